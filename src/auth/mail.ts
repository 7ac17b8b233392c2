// Mail for the account flows (CONTRACT §13, §20): reset, verification and sign-in links, sent with nodemailer
// over mail.smtp. Nothing of it runs on a request's path: a request only queues the work (look the
// account up, make the link, send), so its answer and its timing are the same whether the address
// has an account or not, and whether the SMTP server is fast, slow or down (account enumeration
// through password/forgot). The queue is bounded: a flood of requests can cost at most MAX_WAITING
// jobs in memory, then jobs are dropped (logged). A job that fails is logged and not retried: the
// user asks again. Messages hold a single-use link, so neither their text nor the link ever goes
// to a log.
import { createTransport } from 'nodemailer';
import type { Logger } from 'pino';
import type { Config } from '../config/schema.js';
import { isSingleMailbox } from '../credentials/emailAddress.js';

export interface Mail {
  to: string;
  subject: string;
  /** Plain text, in the user's language (mail/words.ts). */
  text: string;
  /** With an HTML template: the mail is multipart/alternative, text and HTML. */
  html?: string;
}

/** What a job is for (in its log lines): the link it sends. */
export type MailPurpose = 'reset' | 'verify' | 'magic' | 'org_invitation' | 'account_invitation';

export interface MailLimits {
  maxWaiting: number;
  concurrency: number;
}

const DEFAULT_LIMITS: MailLimits = { maxWaiting: 1000, concurrency: 2 };
// nodemailer waits 2 minutes for a connection and 10 for a quiet socket by default: a stuck SMTP
// server would hold both job slots that long.
const SMTP_TIMEOUTS = { connectionTimeout: 10_000, greetingTimeout: 10_000, socketTimeout: 30_000 };
const CLOSE_WAIT_MS = 5000;

interface Job {
  purpose: MailPurpose;
  userId: number | undefined;
  compose(): Promise<Mail | undefined>;
}

/** Account mails, queued off the request path. */
export interface Mailer {
  /** Whether mail.smtp is set: without it, the endpoints that send mail answer 503. */
  readonly enabled: boolean;
  /** Runs compose() off the request path and sends the mail it returns (undefined: none to send). */
  enqueue(purpose: MailPurpose, userId: number | undefined, compose: () => Promise<Mail | undefined>): void;
}

export class MailQueue implements Mailer {
  private readonly transport;
  private readonly waiting: Job[] = [];
  private running = 0;
  private closed = false;
  private readonly idleWaiters: Array<() => void> = [];
  private readonly log: Logger;
  private readonly from: string | undefined;

  constructor(config: Config['mail'], log: Logger, private readonly limits: MailLimits = DEFAULT_LIMITS) {
    this.log = log.child({ component: 'mail' });
    this.from = config?.from;
    // nodemailer's own logger stays off (its default): at debug it would print the messages.
    this.transport = config?.smtp ? createTransport({ url: config.smtp, ...SMTP_TIMEOUTS }, { from: config.from }) : undefined;
  }

  get enabled(): boolean {
    return this.transport !== undefined;
  }

  enqueue(purpose: MailPurpose, userId: number | undefined, compose: () => Promise<Mail | undefined>): void {
    if (!this.transport || this.closed) return;
    if (this.waiting.length >= this.limits.maxWaiting) {
      this.log.warn({ purpose, userId }, 'mail queue full: job dropped');
      return;
    }
    this.waiting.push({ purpose, userId, compose });
    // Never in the caller's turn: the request is answered first.
    setImmediate(() => this.pump());
  }

  /** Resolves when nothing is waiting or running. */
  idle(): Promise<void> {
    if (this.running === 0 && this.waiting.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Stops taking jobs, lets those started finish (a few seconds at most), then closes the transport. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.waiting.length) this.log.info({ waiting: this.waiting.length }, 'shutting down: queued mails abandoned');
    this.waiting.length = 0;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.idle(), new Promise((resolve) => { timer = setTimeout(resolve, CLOSE_WAIT_MS); })]);
    clearTimeout(timer);
    this.transport?.close();
  }

  private pump(): void {
    while (this.running < this.limits.concurrency && this.waiting.length) {
      const job = this.waiting.shift()!;
      this.running++;
      void this.run(job).finally(() => {
        this.running--;
        this.pump();
        if (this.running === 0 && this.waiting.length === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
      });
    }
  }

  private async run({ purpose, userId, compose }: Job): Promise<void> {
    let mail: Mail | undefined;
    try {
      mail = await compose();
    } catch (err) {
      this.log.warn({ purpose, userId, err: describe(err) }, 'mail not sent: the link could not be made');
      return;
    }
    if (!mail || !this.transport) return;
    // An address stored before registration refused lists and display names (CONTRACT §19) gets
    // no mail until an operator fixes it: `gateway check --database` lists such accounts.
    if (!isSingleMailbox(mail.to)) {
      this.log.warn({ purpose, userId }, 'mail not sent: the account\'s address is not a single mailbox');
      return;
    }
    try {
      // The envelope names the one recipient: nothing in the header's text can add another.
      const envelope = { from: this.from, to: [mail.to] };
      // Only the Subject carries words of the templates; no other header takes a value.
      const info = await this.transport.sendMail({ envelope, to: mail.to, subject: mail.subject, text: mail.text, ...(mail.html === undefined ? {} : { html: mail.html }) });
      this.log.info({ purpose, userId, messageId: info.messageId }, 'mail sent');
    } catch (err) {
      this.log.warn({ purpose, userId, err: describe(err) }, 'mail not sent: the SMTP server refused it or could not be reached');
    }
  }
}

/**
 * What a failure says, without what it carried: nodemailer's errors can hold the message (and so
 * the link) in their properties. Code, SMTP reply code and command, and the first line of the text.
 */
function describe(err: unknown): Record<string, unknown> {
  const e = (err ?? {}) as { code?: unknown; responseCode?: unknown; command?: unknown; message?: unknown };
  return {
    code: e.code,
    responseCode: e.responseCode,
    command: e.command,
    message: typeof e.message === 'string' ? e.message.split('\n', 1)[0]!.slice(0, 200) : String(err),
  };
}
