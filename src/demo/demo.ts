// `npm run demo`: the gateway doing its job on this machine, with nothing to install or configure.
// Starts a small echo upstream, a mail catcher (an SMTP server that prints the links it receives)
// and the gateway (embedded PGlite in a fresh temporary directory, demo/gateway.demo.yaml: one
// route per guard), then prints curl commands to paste, and the address of a browser page
// (demo/browser.html, served by the upstream: another origin than the gateway's) that does the same
// through CORS. A trace receiver prints each request's OpenTelemetry trace as it arrives.
// Ctrl-C stops them all and deletes the temporary data.
import '../cli/nodeVersion.js';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { authenticator } from 'otplib';
import type { SMTPServer } from 'smtp-server';
import { WebSocketServer } from 'ws';
import { loadConfig } from '../config/load.js';
import { startGitHubFake, type GitHubFake } from './githubFake.js';
import { startDemoIdp, DEMO_IDP_USER, type DemoIdp } from './localProvider.js';
import { createLogger } from '../telemetry/logger.js';
import { startGateway, type RunningGateway } from '../server.js';

// The demo GitHub's one user: a primary verified address, and a verified secondary one that does not count.
const DEMO_GITHUB_LOGIN = 'octocat';
const DEMO_GITHUB_USER = { id: 583231, emails: [{ email: 'octo@users.noreply.example.com', primary: false, verified: true }, { email: 'octocat@example.com', primary: true, verified: true }] };
const CONFIG_FILE = fileURLToPath(new URL('../../demo/gateway.demo.yaml', import.meta.url));
const PAGE_FILE = fileURLToPath(new URL('../../demo/browser.html', import.meta.url));

/** The last link token the mail catcher received, by address and kind of link (reset-password, verify-email, magic). */
type Inbox = Map<string, string>;
const inboxKey = (address: string, kind: string) => `${address.toLowerCase()} ${kind}`;

/**
 * The echo upstream: answers with what the gateway told it about the caller; greets WebSockets
 * with it and echoes their messages. Its `/` is the demo's browser page, which calls the gateway
 * (`gatewayUrl()`, known once it listens) from this other origin. Two stand-ins for what a user
 * has at hand, under /demo/ (the gateway routes nothing there): their inbox (the last link token
 * the mail catcher received for an address) and their authenticator app (the TOTP code of a
 * secret, now or at the next step).
 */
function startEchoUpstream(gatewayUrl: () => string, inbox: Inbox): Promise<http.Server> {
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
  return authenticator.clone({ epoch: Date.now() + (next ? 30_000 : 0) }).generate(secret);
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
async function startMailCatcher(tokensDir: string, inbox: Inbox): Promise<SMTPServer> {
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
async function startTraceReceiver(): Promise<http.Server> {
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
        console.log(`[demo traces] ${span.name} ${attribute(span, 'http.response.status_code') ?? ''}${decision ? ` ${decision}` : ''}, ${ms(span)} ms${stages.length ? `: ${stages.join(' › ')}` : ''}`);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

/** The preferred port when it is free on 127.0.0.1, else one the system picks (not 0: port 0 means no admin or decisions listener). */
async function freePort(preferred: number): Promise<number> {
  const tryPort = (port: number) => new Promise<number | undefined>((resolve) => {
    const probe = net.createServer();
    probe.once('error', () => resolve(undefined));
    probe.listen(port, '127.0.0.1', () => {
      const { port: bound } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(bound));
    });
  });
  return (await tryPort(preferred)) ?? (await tryPort(0)) ?? 0;
}

/** A link that signs a browser in to the console once, within 10 minutes (docs/console.md), minted with the admin key. */
async function consoleLink(adminUrl: string | undefined, adminKey: string): Promise<string | undefined> {
  if (!adminUrl) return undefined;
  const res = await fetch(`${adminUrl}/console/tickets`, { method: 'POST', headers: { authorization: `Bearer ${adminKey}` } });
  return res.status === 201 ? ((await res.json()) as { url: string }).url : undefined;
}

function walkthrough(url: string, decisionsUrl: string | undefined, adminUrl: string | undefined, adminKey: string, tokensDir: string, page: string, consoleUrl?: string): string {
  const resetToken = path.join(tokensDir, 'reset-password.token');
  const magicToken = path.join(tokensDir, 'magic.token');
  // The demo's stand-in for an authenticator app, on the echo server (curl needs no name lookup).
  const totp = `${page.replace('localhost', '127.0.0.1')}demo/totp`;
  const login = `-X POST ${url}/api/v1/auth/login -H 'content-type: application/json' -d '{"email":"ada@example.com","password":"a-brand-new-password"}'`;
  const field = (name: string) => `sed -E 's/.*"${name}":"([^"]+)".*/\\1/'`;
  const json = "-H 'content-type: application/json'";
  const show = `-w '  (HTTP %{http_code})\\n'`;
  const lines = [
    '',
    `The gateway is listening on ${url}, in front of an echo server that answers with the headers it received.`,
    'Routes (demo/gateway.demo.yaml): /api/v1/public (no guard), /api/v1/profile (token required),',
    '/api/v1/reports (plans premium and pro), /api/v1/races (free: one use a day; premium: 5 a day, 60 a minute),',
    '/api/v1/signed (token required; its upstream also gets the identity signed in x-gateway-assertion),',
    '/api/v1/live (a WebSocket for signed-in users), /api/v1/billing (a second factor required).',
    '',
    `In a browser, open ${page} : a page on another origin (the echo server's) that registers,`,
    'logs in and calls these routes through CORS, opens a WebSocket with ?access_token=, and',
    'registers a passkey and signs in with it.',
    '',
    'Every request is traced (OpenTelemetry, docs/tracing.md): the demo\'s terminal prints each trace within',
    'a second, as a [demo traces] line with the route, status, decision and the time of each stage.',
    '',
    'In another terminal, paste these one by one:',
    '',
    '# 1. Register: every new account is on the free plan (a verification link is mailed: see the demo\'s terminal)',
    `curl -s ${show} -X POST ${url}/api/v1/auth/register ${json} -d '{"email":"ada@example.com","password":"correct-horse-battery"}'`,
    '',
    '# 2. Log in, and keep the access token in a shell variable',
    `TOKEN=$(curl -s -X POST ${url}/api/v1/auth/login ${json} -d '{"email":"ada@example.com","password":"correct-horse-battery"}' | sed -E 's/.*"access_token":"([^"]+)".*/\\1/'); echo "$TOKEN"`,
    '',
    '# 3. No token: 401, the upstream never sees the request',
    `curl -s ${show} ${url}/api/v1/profile`,
    '',
    '# 4. With the token: the upstream receives x-user-id, x-user-plan, x-user-email, x-auth-method and',
    '#    x-request-id, set by the gateway (the forged X-User-Plan sent here is removed, and the token is not forwarded)',
    `curl -s ${show} ${url}/api/v1/profile -H "Authorization: Bearer $TOKEN" -H 'X-User-Plan: pro'`,
    '',
    '# 5. A premium/pro route on the free plan: 403, with the plans needed and where to upgrade',
    `curl -s ${show} ${url}/api/v1/reports -H "Authorization: Bearer $TOKEN"`,
    '',
    '# 6. The free plan\'s daily quota: the first call goes through, the second one is refused with 429',
    `curl -s ${show} ${url}/api/v1/races -H "Authorization: Bearer $TOKEN"`,
    `curl -s ${show} ${url}/api/v1/races -H "Authorization: Bearer $TOKEN"`,
    '',
    '# 7. An upstream that wants proof gets x-gateway-assertion too: a JWT signed by the gateway\'s assertion',
    '#    key, published (apart from the access-token key) at /.well-known/gateway-assertion-keys.json',
    `curl -s ${show} ${url}/api/v1/signed -H "Authorization: Bearer $TOKEN"`,
    `curl -s ${show} ${url}/.well-known/gateway-assertion-keys.json`,
  ];
  if (decisionsUrl) {
    lines.push(
      '',
      '# 8. The same decisions for a proxy you already run (nginx auth_request, Caddy forward_auth: docs/decisions.md):',
      '#    200 with the identity headers for the proxy to copy, or the denial for it to pass on, and nothing forwarded',
      `curl -s -D - ${decisionsUrl}/decisions/api/v1/profile -H "Authorization: Bearer $TOKEN"`,
      `curl -s ${show} ${decisionsUrl}/decisions -H 'X-Forwarded-Uri: /api/v1/reports' -H "Authorization: Bearer $TOKEN"`,
    );
  }
  if (adminUrl) {
    lines.push(
      '',
      '# 9. Upgrade the user (id 1, from step 1) to premium with the admin API: the same token now passes the',
      '#    plan guard, because the gateway reads the plan from the database, not from the token',
      `curl -s ${show} -X PUT ${adminUrl}/admin/v1/users/1/plan -H 'Authorization: Bearer ${adminKey}' ${json} -d '{"plan":"premium"}'`,
      `curl -s ${show} ${url}/api/v1/reports -H "Authorization: Bearer $TOKEN"`,
      '',
      '# 10. Premium\'s quota (5 a day, 60 a minute): the daily route admits again, and says what is left',
      `curl -s -D - -o /dev/null ${url}/api/v1/races -H "Authorization: Bearer $TOKEN" | grep -i '^ratelimit'`,
    );
  }
  lines.push(
    '',
    '# 11. The sessions of the account: one per login, the one of this token marked current',
    `curl -s ${show} ${url}/api/v1/user/sessions -H "Authorization: Bearer $TOKEN"`,
    '',
    '# 12. A forgotten password: the answer is the same whether the account exists or not. The reset link is',
    '#     mailed; the demo\'s mail catcher prints it in the demo\'s terminal (as it printed the verification link',
    '#     at step 1), and keeps its token in a file, which the next command waits for. Then a new password:',
    `curl -s ${show} -X POST ${url}/api/v1/auth/password/forgot ${json} -d '{"email":"ada@example.com"}'`,
    `RESET_TOKEN=$(until [ -s ${resetToken} ]; do sleep 0.2; done; cat ${resetToken}); echo "$RESET_TOKEN"`,
    `curl -s ${show} -X POST ${url}/api/v1/auth/password/reset ${json} -d "{\\"token\\":\\"$RESET_TOKEN\\",\\"new_password\\":\\"a-brand-new-password\\"}"`,
    '',
    '# 13. The old password no longer works, the new one does; every session ended with the reset',
    `curl -s ${show} -X POST ${url}/api/v1/auth/login ${json} -d '{"email":"ada@example.com","password":"correct-horse-battery"}'`,
    `curl -s ${show} -X POST ${url}/api/v1/auth/login ${json} -d '{"email":"ada@example.com","password":"a-brand-new-password"}'`,
    '',
    '# 14. A route that needs a second factor (mfa: required): a password sign-in is refused with 403',
    `TOKEN=$(curl -s ${login} | ${field('access_token')}); echo "$TOKEN"`,
    `curl -s ${show} ${url}/api/v1/billing -H "Authorization: Bearer $TOKEN"`,
    '',
    '# 15. Enrol TOTP (from a sign-in at most 5 minutes old; the reset of step 12 verified the email). Scan the',
    '#     otpauth URL with an authenticator app, or ask the demo\'s stand-in for one, then confirm with the code:',
    `SECRET=$(curl -s -X POST ${url}/api/v1/auth/mfa/totp/enroll -H "Authorization: Bearer $TOKEN" | ${field('secret')}); echo "$SECRET"`,
    `CODE=$(curl -s ${totp}/$SECRET); echo "$CODE"`,
    `curl -s ${show} -X POST ${url}/api/v1/auth/mfa/totp/confirm -H "Authorization: Bearer $TOKEN" ${json} -d "{\\"code\\":\\"$CODE\\"}"`,
    '',
    '# 16. The password now gets no tokens: a 403 with an mfa_token, which a code turns into a pair at aal2',
    '#     (each code is accepted once: this one is the code the app shows next, accepted already)',
    `MFA_TOKEN=$(curl -s ${login} | ${field('mfa_token')}); echo "$MFA_TOKEN"`,
    `TOKEN=$(curl -s -X POST ${url}/api/v1/auth/mfa/verify ${json} -d "{\\"mfa_token\\":\\"$MFA_TOKEN\\",\\"code\\":\\"$(curl -s "${totp}/$SECRET?next")\\"}" | ${field('access_token')}); echo "$TOKEN"`,
    `curl -s ${show} ${url}/api/v1/billing -H "Authorization: Bearer $TOKEN"`,
    '',
    '# 17. Without a password: a sign-in link by email (the mail catcher prints it and keeps its token). This',
    '#     user has TOTP, so the link too gets the 403 with an mfa_token: a link is one factor, as a password is',
    `curl -s ${show} -X POST ${url}/api/v1/auth/magic-link ${json} -d '{"email":"ada@example.com"}'`,
    `MAGIC_TOKEN=$(until [ -s ${magicToken} ]; do sleep 0.2; done; cat ${magicToken}); echo "$MAGIC_TOKEN"`,
    `curl -s ${show} -X POST ${url}/api/v1/auth/magic-link/verify ${json} -d "{\\"token\\":\\"$MAGIC_TOKEN\\"}"`,
    '',
    `# 18. With an identity provider (OpenID Connect): on the browser page, "Sign in with Demo IdP" goes to the`,
    `#     demo's own provider (sign in as ${DEMO_IDP_USER.login}, any password) and back with a login_code the page exchanges`,
    '#     for a pair with amr ["fed"] (docs/identity-providers.md); "Sign in with GitHub (demo)" does the same',
    `#     with a fake of GitHub's endpoints on this machine, where ${DEMO_GITHUB_LOGIN} approves at once (kind: github)`,
  );
  if (adminUrl) {
    lines.push('', ...(consoleUrl ? ['# The console, for operators: this link signs you in, once, within 10 minutes:', `#    ${consoleUrl}`] : []),
      `# ${consoleUrl ? 'After that, ' : 'The console, for operators: '}open ${adminUrl}/console/ and sign in with the admin key ${adminKey}`);
  }
  lines.push('', 'Press Ctrl-C to stop the demo (its data is deleted).', '');
  return lines.join('\n');
}

async function main(): Promise<void> {
  console.log('Starting the demo: an echo upstream and the gateway on embedded storage…');
  // The embedded database in data/, the mail catcher's tokens in mail/; all deleted at the end.
  const root = mkdtempSync(path.join(os.tmpdir(), 'gateway-demo-'));
  const dataDir = path.join(root, 'data');
  const tokensDir = path.join(root, 'mail');
  mkdirSync(tokensDir);
  let gatewayUrl = '';
  const inbox: Inbox = new Map();
  const upstream = await startEchoUpstream(() => gatewayUrl, inbox);
  const page = `http://127.0.0.1:${(upstream.address() as net.AddressInfo).port}/`;
  const mail = await startMailCatcher(tokensDir, inbox);
  const traces = await startTraceReceiver();
  let gateway: RunningGateway | undefined;
  let idp: DemoIdp | undefined;
  let github: GitHubFake | undefined;
  let stopping: Promise<void> | undefined;
  const stop = () => (stopping ??= (async () => {
    await gateway?.close().catch((err: unknown) => console.error(`while stopping the gateway: ${String(err)}`));
    await idp?.close();
    await github?.close();
    upstream.closeAllConnections();
    await new Promise<void>((resolve) => upstream.close(() => resolve()));
    await new Promise<void>((resolve) => mail.close(() => resolve()));
    await new Promise<void>((resolve) => traces.close(() => resolve()));
    rmSync(root, { recursive: true, force: true });
  })());
  const onSignal = () => {
    if (stopping) process.exit(130); // a second Ctrl-C: do not wait
    console.log('\nStopping the demo…');
    void stop().then(() => {
      console.log('Demo stopped; its data was deleted.');
      process.exit(0);
    });
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  try {
    const adminKey = `demo-admin-${randomBytes(12).toString('hex')}`;
    const env = {
      ...process.env,
      DEMO_DATA_DIR: dataDir,
      DEMO_UPSTREAM: page.slice(0, -1),
      // The page's origin, as a browser writes it whichever name you open it by.
      DEMO_PAGE_ORIGIN: page.slice(0, -1),
      DEMO_PAGE_ORIGIN_LOCALHOST: page.slice(0, -1).replace('127.0.0.1', 'localhost'),
      DEMO_JWT_SECRET: randomBytes(48).toString('base64url'),
      DEMO_ADMIN_KEY: adminKey,
      DEMO_SMTP_URL: `smtp://127.0.0.1:${(mail.server.address() as net.AddressInfo).port}`,
      DEMO_OTLP_ENDPOINT: `http://127.0.0.1:${(traces.address() as net.AddressInfo).port}`,
      DEMO_PORT: process.env.PORT ? undefined : String(await freePort(8080)),
      // Whoever sets PORT (a second demo, a test) chose the ports: the admin and decisions listeners take any free ones.
      DEMO_ADMIN_PORT: String(await freePort(process.env.PORT ? 0 : 9090)),
      DEMO_DECISIONS_PORT: String(await freePort(process.env.PORT ? 0 : 9191)),
    };
    // "Sign in with Demo IdP" (src/demo/localProvider.ts): the provider registers the gateway's callback, so
    // the gateway's port is known before it listens (PORT=0 becomes a free port here).
    const gatewayPort = process.env.PORT && process.env.PORT !== '0' ? process.env.PORT : env.DEMO_PORT ?? String(await freePort(0));
    idp = await startDemoIdp(`http://127.0.0.1:${gatewayPort}`);
    // "Sign in with GitHub (demo)": a fake of GitHub's endpoints (src/demo/githubFake.ts), its one user approving at once.
    github = await startGitHubFake({ clientId: 'demo-github', defaultLogin: DEMO_GITHUB_LOGIN, users: { [DEMO_GITHUB_LOGIN]: DEMO_GITHUB_USER } });
    Object.assign(env, idp.env, { DEMO_GITHUB_URL: github.url, DEMO_GITHUB_CLIENT_SECRET: github.clientSecret }, process.env.PORT ? { PORT: gatewayPort } : {});
    const { config } = loadConfig(CONFIG_FILE, env);
    // Request denials and errors show up here as you paste the commands (LOG_LEVEL=debug: every request).
    const log = createLogger(process.env.LOG_LEVEL ?? 'info');
    gateway = await startGateway(config, { log });
    // Start-up lines first, so the walkthrough is the last thing on the screen.
    await new Promise((resolve) => setTimeout(resolve, 50));
    await new Promise<void>((resolve) => log.flush(() => resolve()));
    gatewayUrl = gateway.url.replace('localhost', '127.0.0.1');
    // Opened by a host name, not an address: passkeys are bound to one (auth.passkeys.rpId: localhost).
    const pageByName = page.replace('127.0.0.1', 'localhost');
    console.log(walkthrough(gatewayUrl, gateway.decisionsUrl, gateway.adminUrl, adminKey, tokensDir, pageByName, await consoleLink(gateway.adminUrl, adminKey)));
  } catch (err) {
    console.error(`The demo could not start: ${err instanceof Error ? err.message : String(err)}`);
    await stop();
    process.exitCode = 1;
  }
}

void main();
