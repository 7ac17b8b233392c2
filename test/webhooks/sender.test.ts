// One webhook attempt (src/webhooks/sender.ts) against receivers of the test's own, without a
// database: what each answer, failure and refusal comes to (the outbox decides retries on it), what
// the receiver gets, the attempt's span, and what the sender logs. The delivery suites
// (deliveries.*.test.ts) run the same attempts end to end through the outbox.
import { getEventListeners, once } from 'node:events';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ClaimedDelivery } from '../../src/storage/events/index.js';
import { SpanKind } from '../../src/telemetry/spans.js';
import { describeError, WebhookSender, type SenderDeps } from '../../src/webhooks/sender.js';
import type { LookupAll } from '../../src/webhooks/ssrf.js';
import { webhookCertificate } from '../helpers/gateway.js';
import { capturingTracing } from '../helpers/servedTrace.js';
import { receiverCertificate } from '../helpers/webhookReceiver.js';

interface Received { method: string; url: string; headers: IncomingMessage['headers']; body: string; clientPort: number }

/** A receiver answering each request with `answer(path)`: a status, or 'hang' (never answers). */
async function receiver(secure: boolean, answer: (path: string) => number | 'hang' = () => 200) {
  const received: Received[] = [];
  const state = { open: 0, sockets: 0 };
  const handle = (req: IncomingMessage, res: ServerResponse) => {
    state.open++;
    res.on('close', () => state.open--);
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      received.push({ method: req.method!, url: req.url!, headers: req.headers, body, clientPort: req.socket.remotePort! });
      const status = answer(req.url!);
      if (status !== 'hang') res.writeHead(status).end('ignored');
    });
  };
  const server = secure ? https.createServer(receiverCertificate(), handle) : http.createServer(handle);
  server.on('connection', (socket: import('node:net').Socket) => {
    state.sockets++;
    socket.on('close', () => state.sockets--);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  const close = () => new Promise<void>((done) => {
    server.closeAllConnections();
    server.close(() => done());
  });
  return { received, port, /** Requests whose connection is still open. */ open: () => state.open, /** Connections still open. */ sockets: () => state.sockets, close };
}

const job = (over: Partial<ClaimedDelivery> = {}): ClaimedDelivery => ({
  id: 'msg_1', user_id: 7, subject: null, type: 'webhook.test', body: '{"type":"webhook.test"}', attempts: 2, max_attempts: 4, traceparent: null,
  url: null, secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', plan: 'pro', is_active: 1, ...over,
});
const HOOK_SECRET = 'whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD';

describe('one webhook attempt', () => {
  let https200: Awaited<ReturnType<typeof receiver>>;
  let plain: Awaited<ReturnType<typeof receiver>>;
  const senders: WebhookSender[] = [];
  const logged: Record<string, unknown>[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => void logged.push(JSON.parse(line) as Record<string, unknown>) });
  const statuses = (path: string) => (path.startsWith('/status/') ? Number(path.slice(8).split('?')[0]) : path === '/hang' ? 'hang' : 200);

  function sender(over: Partial<SenderDeps> = {}, config: Partial<SenderDeps['config']> = {}): WebhookSender {
    const made = new WebhookSender({ config: { timeout: 30_000, retries: 3, allowPrivateNetworks: true, caFile: webhookCertificate.certFile, ...config }, log, maxSockets: 4, ...over });
    senders.push(made);
    return made;
  }
  const attempt = (s: WebhookSender, delivery: ClaimedDelivery, signal = new AbortController().signal) => s.attempt(delivery, signal);
  const at = (path: string) => job({ url: `https://127.0.0.1:${https200.port}${path}` });
  const hooks = (url: string) => () => ({ url, secrets: [HOOK_SECRET], allowPrivateNetworks: true }) as ReturnType<NonNullable<SenderDeps['hooks']>>;

  beforeAll(async () => {
    [https200, plain] = await Promise.all([receiver(true, statuses), receiver(false, statuses)]);
  });
  afterEach(() => {
    for (const s of senders.splice(0)) s.close();
  });
  afterAll(async () => {
    await Promise.all([https200?.close(), plain?.close()]);
  });

  it('a 2xx is a success; 5xx and 429 a server error (retried); any other status, 3xx included, rejected', async () => {
    const s = sender();
    const outcomes = [];
    for (const status of [200, 204, 299, 300, 302, 404, 499, 429, 500, 503]) outcomes.push([status, await attempt(s, at(`/status/${status}`))]);
    expect(outcomes).toEqual([
      [200, { outcome: 'success' }], [204, { outcome: 'success' }], [299, { outcome: 'success' }],
      [300, { outcome: 'rejected', error: 'HTTP 300' }], [302, { outcome: 'rejected', error: 'HTTP 302' }], [404, { outcome: 'rejected', error: 'HTTP 404' }],
      [499, { outcome: 'rejected', error: 'HTTP 499' }], [429, { outcome: 'server_error', error: 'HTTP 429' }], [500, { outcome: 'server_error', error: 'HTTP 500' }],
      [503, { outcome: 'server_error', error: 'HTTP 503' }],
    ]);
  });

  it('POSTs the signed body to the path and query given, each attempt on a connection of its own (no keep-alive)', async () => {
    const s = sender();
    expect(await attempt(s, at('/status/200?tenant=a'))).toEqual({ outcome: 'success' });
    const got = https200.received.at(-1)!;
    expect({ method: got.method, url: got.url, body: got.body }).toEqual({ method: 'POST', url: '/status/200?tenant=a', body: '{"type":"webhook.test"}' });
    expect(got.headers).toMatchObject({ 'webhook-id': 'msg_1', 'content-length': '23', 'webhook-signature': expect.stringMatching(/^v1,/) });
    // Each connection goes to the address just checked: none is kept for the next attempt, and each
    // closes once answered (the answer's body read away), not when the receiver gives up on it.
    const signal = new AbortController().signal;
    expect(await attempt(s, at('/status/200'), signal)).toEqual({ outcome: 'success' });
    expect(https200.received.at(-1)!.clientPort).not.toBe(got.clientPort);
    await expect.poll(() => https200.sockets()).toBe(0);
    // The worker's signal outlives its attempts: none leaves a listener on it.
    expect(getEventListeners(signal, 'abort')).toEqual([]);
  });

  it('opens at most maxSockets connections at once (the worker\'s concurrency), to users and to hooks alike', async () => {
    const hang = await receiver(false, () => 'hang');
    try {
      const s = sender({ maxSockets: 1, hooks: hooks(`http://127.0.0.1:${hang.port}/hang`) });
      const hook = job({ user_id: null, subject: 'user.created' });
      const stop = new AbortController();
      const pending = [attempt(s, hook, stop.signal), attempt(s, hook, stop.signal)];
      await expect.poll(() => hang.received.length).toBe(1);
      await new Promise((done) => setTimeout(done, 200));
      expect(hang.received.length).toBe(1);
      stop.abort();
      expect(await Promise.all(pending)).toEqual([{ outcome: 'network_error', error: 'aborted' }, { outcome: 'network_error', error: 'aborted' }]);
    } finally {
      await hang.close();
    }
  });

  it('sends nothing to a user without a webhook, a secret, the pro plan or an active account', async () => {
    const s = sender();
    const before = https200.received.length;
    const url = `https://127.0.0.1:${https200.port}/status/200`;
    const skipped = { outcome: 'skipped', error: 'no webhook, or its owner is not an active pro user' };
    for (const over of [{ url: null }, { url, secret: null }, { url, plan: 'free' }, { url, plan: null }, { url, is_active: 0 }]) {
      expect(await attempt(s, job(over)), JSON.stringify(over)).toEqual(skipped);
    }
    expect(https200.received.length).toBe(before);
  });

  it('sends an operator hook to hooks.url as configured now, plain http to loopback allowed there only; none without hooks', async () => {
    const hook = job({ user_id: null, subject: 'user.created', url: null, secret: null, plan: null, is_active: null });
    expect(await attempt(sender(), hook)).toEqual({ outcome: 'skipped', error: 'hooks: is not configured' });
    const hooked = sender({ hooks: hooks(`http://127.0.0.1:${plain.port}/status/204`) });
    expect(await attempt(hooked, hook)).toEqual({ outcome: 'success' });
    const first = plain.received.at(-1)!;
    expect(first).toMatchObject({ method: 'POST', url: '/status/204', headers: { 'webhook-id': 'msg_1' } });
    expect(await attempt(hooked, hook)).toEqual({ outcome: 'success' });
    expect(plain.received.at(-1)!.clientPort).not.toBe(first.clientPort);
    // A user's webhook is https only, whatever the address.
    expect(await attempt(sender(), job({ url: `http://127.0.0.1:${plain.port}/status/200` }))).toEqual({ outcome: 'blocked', error: 'the webhook URL is not a valid https URL' });
    // A loopback name that resolves elsewhere gets no cleartext.
    const elsewhere: LookupAll = async () => [{ address: '10.1.2.3', family: 4 }];
    const rebound = sender({ hooks: hooks(`http://localhost:${plain.port}/status/200`), lookup: elsewhere });
    expect(await attempt(rebound, hook)).toEqual({ outcome: 'blocked', error: 'blocked: plain http to 10.1.2.3, which is not loopback' });
    // https to an address that is not loopback is no cleartext: it is tried (192.0.2.1, TEST-NET-1, answers
    // nothing: unreachable or silent, as the machine's routes have it).
    const remote = sender({ lookup: async () => [{ address: '192.0.2.1', family: 4 }] }, { timeout: 300 });
    expect(['network_error', 'timeout']).toContain((await attempt(remote, job({ url: 'https://hooks.test/x' }))).outcome);
  });

  it('refuses a target that resolves to a non-public address, logged with whose it is; a failed lookup is a network error', async () => {
    const closed = sender({}, { allowPrivateNetworks: false });
    expect(await attempt(closed, at('/status/200'))).toEqual({ outcome: 'blocked', error: 'blocked: 127.0.0.1 is not a public address' });
    expect(logged.filter((l) => l.msg === 'webhook target resolves to a non-public address: refused').at(-1))
      .toMatchObject({ level: 40, userId: 7, subject: null, host: `127.0.0.1:${https200.port}` });
    const unresolved: LookupAll = async () => { throw Object.assign(new Error('queryA ENOTFOUND hooks.test'), { code: 'ENOTFOUND' }); };
    expect(await attempt(sender({ lookup: unresolved }), job({ url: 'https://hooks.test/x' }))).toEqual({ outcome: 'network_error', error: 'DNS: ENOTFOUND' });
  });

  it('a refused connection is a network error; no answer in webhooks.timeout a timeout, and the request is dropped', async () => {
    const gone = await receiver(true);
    await gone.close();
    expect(await attempt(sender(), job({ url: `https://127.0.0.1:${gone.port}/x` }))).toEqual({ outcome: 'network_error', error: 'ECONNREFUSED' });
    const hanging = await receiver(true, () => 'hang');
    try {
      expect(await attempt(sender({}, { timeout: 300 }), job({ url: `https://127.0.0.1:${hanging.port}/hang` }))).toEqual({ outcome: 'timeout', error: 'no answer within 300 ms' });
      await expect.poll(() => hanging.open()).toBe(0);
    } finally {
      await hanging.close();
    }
  });

  it('an abort (the worker stopping) ends the attempt at once, before or while it waits for the answer', async () => {
    const s = sender();
    const before = https200.received.length;
    expect(await attempt(s, at('/status/200'), AbortSignal.abort())).toEqual({ outcome: 'network_error', error: 'aborted' });
    expect(https200.received.length).toBe(before);
    const stop = new AbortController();
    const waiting = attempt(s, at('/hang'), stop.signal);
    await expect.poll(() => https200.received.length).toBe(before + 1);
    stop.abort();
    // Within the test's time, where webhooks.timeout is 30 s; and its connection is closed.
    expect(await waiting).toEqual({ outcome: 'network_error', error: 'aborted' });
    await expect.poll(() => https200.open()).toBe(0);
  });

  it('close() ends the attempts in flight, to users and to hooks', async () => {
    const s = sender({ hooks: hooks(`http://127.0.0.1:${plain.port}/hang`) });
    const hook = job({ user_id: null, subject: 'user.created' });
    const [before, beforePlain] = [https200.received.length, plain.received.length];
    const inFlight = [attempt(s, at('/hang')), attempt(s, hook)];
    await expect.poll(() => [https200.received.length, plain.received.length]).toEqual([before + 1, beforePlain + 1]);
    s.close();
    expect(await Promise.all(inFlight)).toEqual([{ outcome: 'network_error', error: 'ECONNRESET' }, { outcome: 'network_error', error: 'ECONNRESET' }]);
  });

  it('an attempt is a client span of the trace that caused the message, whose traceparent the receiver gets', async () => {
    const { tracing, exported: spans } = capturingTracing();
    const traceId = 'a1'.padStart(32, '0');
    const caused = job({ traceparent: `00-${traceId}-${'b'.repeat(16)}-01` });
    const traced = sender({ tracing, hooks: hooks('http://localhost/unreachable') });
    expect(await attempt(traced, { ...caused, url: `https://127.0.0.1:${https200.port}/status/200` })).toEqual({ outcome: 'success' });
    const deliveredParent = String(https200.received.at(-1)!.headers.traceparent);
    expect(await attempt(traced, { ...caused, url: `https://127.0.0.1:${https200.port}/status/400` })).toMatchObject({ outcome: 'rejected' });
    expect(await attempt(traced, { ...caused, user_id: null, subject: 'user.created' })).toMatchObject({ outcome: 'network_error' });
    expect(await attempt(traced, { ...caused, url: 'https://localhost/unreachable' })).toMatchObject({ outcome: 'network_error' });
    await tracing.close();
    const seen = spans.map((span) => ({ name: span.name, kind: span.kind, traceId: span.traceId, status: span.status, attributes: span.attributes }));
    const common = { name: 'POST webhook', kind: SpanKind.CLIENT, traceId };
    const attributes = { 'http.request.method': 'POST', 'server.address': '127.0.0.1', 'server.port': https200.port, 'gateway.webhook.type': 'webhook.test', 'gateway.webhook.attempt': 2 };
    // Strictly: a failure's span has no status code attribute at all.
    expect(seen).toStrictEqual([
      { ...common, status: 0, attributes: { ...attributes, 'http.response.status_code': 200 } },
      { ...common, status: 2, attributes: { ...attributes, 'http.response.status_code': 400, 'error.type': '400' } },
      // The default port of the URL's scheme; nothing answered there.
      { ...common, status: 2, attributes: { ...attributes, 'server.address': 'localhost', 'server.port': 80, 'error.type': 'network' } },
      { ...common, status: 2, attributes: { ...attributes, 'server.address': 'localhost', 'server.port': 443, 'error.type': 'network' } },
    ]);
    expect(deliveredParent).toBe(`00-${traceId}-${spans[0]!.spanId}-01`);
    // Not tracing here: the receiver still joins the trace of the request, as a proxy that does not trace passes it on.
    expect(await attempt(sender(), { ...caused, url: `https://127.0.0.1:${https200.port}/status/200` })).toEqual({ outcome: 'success' });
    expect(https200.received.at(-1)!.headers.traceparent).toBe(caused.traceparent);
  });

  it('webhooks.caFile is read at start, and an unreadable one named', () => {
    let thrown: unknown;
    try {
      sender({}, { caFile: '/nonexistent/ca.pem' });
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toMatchObject({ message: 'webhooks.caFile: cannot read /nonexistent/ca.pem: ENOENT', cause: { code: 'ENOENT' } });
  });

  it('describes an error by its code, else its message, else itself', () => {
    expect([describeError(Object.assign(new Error('m'), { code: 'EPIPE' })), describeError(new Error('m')), describeError(null), describeError(undefined), describeError('text')])
      .toEqual(['EPIPE', 'm', 'null', 'undefined', 'text']);
  });
});
