// A real SMTP server in the test process (smtp-server, from the nodemailer project) on a loopback
// port the system picks: the gateway sends to it over SMTP as to any relay, and tests read the
// received messages as a mail client would (mailparser), links included.
import type { AddressInfo } from 'node:net';
import { simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';

export interface ReceivedMail {
  to: string;
  /** The SMTP envelope's recipients (RCPT TO), as the relay delivers. */
  recipients: string[];
  /** `Name <address>` */
  from: string;
  subject: string;
  /** The text as a reader sees it (transfer encoding undone). */
  text: string;
  /** The Content-Type without its parameters: text/plain. */
  contentType: string;
  /** Whether the message had an HTML part. */
  html: boolean;
  /** The HTML part's source as a reader's client gets it (transfer encoding undone), if any. */
  htmlSource: string | undefined;
  /** The message as it came over SMTP. */
  raw: string;
  /** The first http(s) URL in the text. */
  link: string | undefined;
  /** That link's `token` query parameter. */
  token: string | undefined;
}

export interface SmtpCatcher {
  /** smtp://127.0.0.1:PORT, for mail.smtp */
  url: string;
  port: number;
  messages: ReceivedMail[];
  /** Messages received for this address so far. */
  to(address: string): ReceivedMail[];
  /** Waits for the n-th message (from 1) to this address. */
  waitFor(address: string, n?: number, timeoutMs?: number): Promise<ReceivedMail>;
  /** Accepts the data of every message from now on only when release() is called (a slow relay). */
  hold(): void;
  release(): void;
  /** Messages whose data arrived and waits for release(). */
  held: number;
  close(): Promise<void>;
}

export async function startSmtpCatcher(): Promise<SmtpCatcher> {
  let holding = false;
  let waiters: Array<() => void> = [];
  const catcher = {
    url: '', port: 0, messages: [] as ReceivedMail[], held: 0,
    to: (address: string) => catcher.messages.filter((m) => m.to === address.toLowerCase()),
    async waitFor(address: string, n = 1, timeoutMs = 5000) {
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline) {
        const found = catcher.to(address)[n - 1];
        if (found) return found;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      throw new Error(`no message ${n} to ${address} within ${timeoutMs} ms (received: ${catcher.messages.map((m) => m.to).join(', ') || 'none'})`);
    },
    hold() { holding = true; },
    release() {
      holding = false;
      for (const go of waiters.splice(0)) go();
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
  const server = new SMTPServer({
    logger: false,
    authOptional: true,
    // Plain SMTP on loopback: nodemailer would otherwise upgrade to TLS and refuse the built-in certificate.
    disabledCommands: ['STARTTLS', 'AUTH'],
    onData(stream, session, callback) {
      const recipients = session.envelope.rcptTo.map((r) => r.address.toLowerCase());
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => {
        const raw = Buffer.concat(chunks);
        const accept = () => {
          catcher.held = Math.max(0, catcher.held - 1);
          void simpleParser(raw).then((parsed) => {
            const text = parsed.text ?? '';
            const link = /https?:\/\/\S+/.exec(text)?.[0];
            const to = Array.isArray(parsed.to) ? parsed.to[0] : parsed.to;
            catcher.messages.push({
              to: (to?.value[0]?.address ?? '').toLowerCase(),
              recipients,
              from: parsed.from?.value.map((a) => (a.name ? `${a.name} <${a.address}>` : a.address ?? '')).join(', ') ?? '',
              subject: parsed.subject ?? '',
              text,
              contentType: (parsed.headers.get('content-type') as { value?: string } | undefined)?.value ?? '',
              html: parsed.html !== false,
              htmlSource: parsed.html === false ? undefined : parsed.html,
              raw: raw.toString('utf8'),
              link,
              token: link ? new URL(link).searchParams.get('token') ?? undefined : undefined,
            });
            callback();
          }, (err: Error) => callback(err));
        };
        if (!holding) return accept();
        catcher.held++;
        waiters.push(accept);
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  catcher.port = (server.server.address() as AddressInfo).port;
  catcher.url = `smtp://127.0.0.1:${catcher.port}`;
  // Closing waits for open connections; held messages are released so it can.
  const close = catcher.close;
  catcher.close = () => { catcher.release(); waiters = []; return close(); };
  return catcher;
}

/** The `mail` settings that send to the catcher, links to an application at app.example.test. */
export function mailSettings(catcher: Pick<SmtpCatcher, 'url'>) {
  return {
    smtp: catcher.url,
    from: 'Gateway <no-reply@example.test>',
    resetUrl: 'https://app.example.test/reset-password?token={token}',
    verifyUrl: 'https://app.example.test/verify-email?token={token}',
  };
}
