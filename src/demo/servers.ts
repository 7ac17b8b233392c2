// The demo's stand-ins, each a small server on loopback: the echo upstream (with the browser
// page, the user's inbox and authenticator app under /demo/), the mail catcher, and a receiver
// that prints each request's OpenTelemetry trace.
import { readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { generateSync } from 'otplib';
import type { SMTPServer } from 'smtp-server';
import { WebSocketServer } from 'ws';

const PAGE_FILE = fileURLToPath(new URL('../../demo/browser.html', import.meta.url));

/** The last link token the mail catcher received, by address and kind of link (reset-password, verify-email, magic). */
export type Inbox = Map<string, string>;
export const inboxKey = (address: string, kind: string) => `${address.toLowerCase()} ${kind}`;

/**
 * The echo upstream: answers with what the gateway told it about the caller; greets WebSockets
 * with it and echoes their messages. Its `/` is the demo's browser page, which calls the gateway
 * (`gatewayUrl()`, known once it listens) from this other origin. Two stand-ins for what a user
 * has at hand, under /demo/ (the gateway routes nothing there): their inbox (the last link token
 * the mail catcher received for an address) and their authenticator app (the TOTP code of a
 * secret, now or at the next step).
 */
export function startEchoUpstream(gatewayUrl: () => string, inbox: Inbox): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(readFileSync(PAGE_FILE, 'utf8').replace('%GATEWAY_URL%', gatewayUrl()));
      return;
    }
    const url = new URL(req.url ?? '/', 'http://demo');
    if (req.method === 'GET' && url.pathname.startsWith('/demo/')) {
      const [, , what, arg = ''] = url.pathname.split('/');
      const answer = what === 'totp' ? totpCode(decodeURIComponent(arg), url.searchParams.has('next'))
        : what === 'mail' ? inbox.get(inboxKey(url.searchParams.get('to') ?? '', decodeURIComponent(arg)))
          : undefined;
      res.writeHead(answer ? 200 : 404, { 'content-type': 'text/plain; charset=utf-8' }).end(answer ?? 'nothing here\n');
      return;
    }
    req.resume();
    req.on('end', () => {
      // The headers an application behind the gateway acts on: identity, request id, forwarding.
      const received: Record<string, string> = {};
      for (const [name, value] of Object.entries(req.headers)) {
        if (name.startsWith('x-') || name === 'authorization') received[name] = String(value);
      }
      const body = `${JSON.stringify({ upstream: 'echo', method: req.method, path: req.url, headers: received }, null, 2)}\n`;
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
      res.end(body);
    });
  });
  new WebSocketServer({ server }).on('connection', (ws, req) => {
    ws.send(`hello ${String(req.headers['x-user-email'])}, on the ${String(req.headers['x-user-plan'])} plan (x-user-id ${String(req.headers['x-user-id'])})`);
    ws.on('message', (data) => ws.send(`echo: ${String(data)}`));
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

/**
 * The code an authenticator app shows for the secret. A code is accepted once per step; the next
 * step's is accepted already (one step either side), so a walkthrough needs no 30-second wait.
 */
function totpCode(secret: string, next: boolean): string | undefined {
  if (!/^[A-Z2-7]+=*$/.test(secret)) return undefined;
  return generateSync({ secret, epoch: Math.floor((Date.now() + (next ? 30_000 : 0)) / 1000) });
}

/** Quoted-printable (RFC 2045 §6.7), as nodemailer encodes French text: soft line breaks, then =XX bytes. */
function decodeQuotedPrintable(text: string): string {
  const joined = text.replace(/=\r?\n/g, '');
  const bytes: number[] = [];
  for (let i = 0; i < joined.length; i++) {
    const hex = joined[i] === '=' ? joined.slice(i + 1, i + 3) : '';
    if (/^[0-9A-F]{2}$/i.test(hex)) {
      bytes.push(parseInt(hex, 16));
      i += 2;
    } else bytes.push(...Buffer.from(joined[i]!));
  }
  return Buffer.from(bytes).toString('utf8');
}

/**
 * The mail catcher: an SMTP server on loopback that the gateway sends its account mails to, and
 * that prints the link each one carries, as the user would find it in their inbox. It also keeps
 * the last token of each kind of link in `tokensDir` (reset-password.token, verify-email.token,
 * magic.token), so that a pasted walkthrough command can read it, and in `inbox` for the page.
 */
export async function startMailCatcher(tokensDir: string, inbox: Inbox): Promise<SMTPServer> {
  // Loaded here: nothing but the demo needs an SMTP server.
  const { SMTPServer } = await import('smtp-server');
  const server = new SMTPServer({
    logger: false,
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'], // loopback only, plain SMTP
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        const end = raw.search(/\r?\n\r?\n/);
        const head = end < 0 ? raw : raw.slice(0, end);
        const body = end < 0 ? '' : raw.slice(end);
        const text = /content-transfer-encoding:\s*quoted-printable/i.test(head) ? decodeQuotedPrintable(body) : body;
        const link = /https?:\/\/\S+/.exec(text)?.[0];
        const to = session.envelope.rcptTo.map((r) => r.address).join(', ');
        const token = link ? new URL(link).searchParams.get('token') : null;
        console.log(`\n[demo mail catcher] a mail to ${to}:\n  ${link ?? '(no link)'}\n  token: ${token ?? '-'}\n`);
        if (link && token) {
          const kind = new URL(link).pathname.split('/').pop()!;
          writeFileSync(path.join(tokensDir, `${kind}.token`), token);
          for (const { address } of session.envelope.rcptTo) inbox.set(inboxKey(address, kind), token);
        }
        callback();
      });
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return server;
}

interface JsonSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes?: Array<{ key: string; value: { stringValue?: string; intValue?: string | number } }>;
}

/**
 * The trace receiver: an OTLP/HTTP endpoint (JSON) that prints each request's trace on one line
 * once its server span arrives: route, status, decision and duration, then the stages and the
 * upstream call under it (with the storage calls a stage waited for), as a collector's UI would
 * show them (docs/tracing.md). A request's spans end before its server span, so they come in the
 * same export or an earlier one.
 */
export async function startTraceReceiver(): Promise<http.Server> {
  const waiting = new Map<string, JsonSpan[]>(); // spans by trace, until their server span comes
  const ms = (span: JsonSpan) => (Number(BigInt(span.endTimeUnixNano) - BigInt(span.startTimeUnixNano)) / 1e6).toFixed(1);
  const attribute = (span: JsonSpan, key: string) => { const v = span.attributes?.find((a) => a.key === key)?.value; return v?.stringValue ?? v?.intValue; };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      let spans: JsonSpan[];
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { resourceSpans: Array<{ scopeSpans: Array<{ spans: JsonSpan[] }> }> };
        spans = body.resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans));
      } catch {
        return;
      }
      for (const span of spans) {
        const trace = waiting.get(span.traceId) ?? [];
        waiting.delete(span.traceId);
        if (span.kind !== 2 /* SERVER */) {
          waiting.set(span.traceId, [...trace, span]);
          if (waiting.size > 500) waiting.delete(waiting.keys().next().value!);
          continue;
        }
        const children = (parent: JsonSpan) => trace.filter((s) => s.parentSpanId === parent.spanId).sort((a, b) => (BigInt(a.startTimeUnixNano) < BigInt(b.startTimeUnixNano) ? -1 : 1));
        const stages = children(span).map((stage) => {
          const calls = children(stage).map((call) => `${call.name} ${ms(call)} ms`);
          return `${stage.name} ${ms(stage)} ms${calls.length ? ` (${calls.join(', ')})` : ''}`;
        });
        const decision = attribute(span, 'gateway.decision');
        const status = attribute(span, 'http.response.status_code') ?? '';
        console.log(`[demo traces] ${span.name} ${status}${decision ? ` ${decision}` : ''}, ${ms(span)} ms${stages.length ? `: ${stages.join(' › ')}` : ''}`);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}
