// The public request's order is declared once, PUBLIC_ORDER (src/listener/publicOrder.ts), and the
// code follows it: the listener's one onRequest hook calls the steps before routing, forward()
// (src/proxy/forwarder.ts) the rest, each in the list's order. Read from the source, since the
// hook is straight-line code for speed; and seen from outside, through a gateway, wherever two
// steps in turn would answer differently.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PUBLIC_ORDER, type PublicStep } from '../../src/listener/publicOrder.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { closeSql, describeWithServices, eventually, makeUser, marker, startTestGateway, testConfig, usage, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { rawExchange } from '../helpers/http.js';
import { startCollector } from '../helpers/otlp.js';

const SRC = path.resolve(import.meta.dirname, '../../src');
const HOOK = { file: 'listener/publicOrder.ts', opening: 'function publicRequest(' };
const FORWARD = { file: 'proxy/forwarder.ts', opening: '  forward(request: FastifyRequest' };

/** Where each step is called: the function that runs it, and the call that is the step. */
const CALLS: Record<PublicStep, { in: typeof HOOK; call: RegExp }> = {
  context: { in: HOOK, call: /\bcontexts\.of\(request\.raw\)/ },
  host: { in: HOOK, call: /\bcheckHost\(request, reply\)/ },
  trace: { in: HOOK, call: /\bbeginTrace\(tracing, request,/ },
  draining: { in: HOOK, call: /\bcloseWhileDraining\(lifecycle, request, reply\)/ },
  cors: { in: HOOK, call: /\banswerCors\(request, reply\)/ },
  bodyless: { in: FORWARD, call: /\bhasBody\(request\)/ },
  upgrade: { in: FORWARD, call: /\brefusedHandshake\(request, reply\)/ },
  decide: { in: FORWARD, call: /\bthis\.deps\.pipeline\.decide\(/ },
  forward: { in: FORWARD, call: /\bthis\.sendAllowed\(request, reply, decision, upgrade\)/ },
};

/** The code lines of the function that starts with `opening` in `file`, comments left out. */
function bodyLines({ file, opening }: typeof HOOK): string[] {
  const text = readFileSync(path.join(SRC, file), 'utf8');
  const start = text.indexOf(opening);
  expect(start, `${opening} in ${file}`).toBeGreaterThan(-1);
  let depth = 0;
  let end = text.indexOf('{', start);
  do {
    if (text[end] === '{') depth++;
    else if (text[end] === '}') depth--;
    end++;
  } while (depth > 0);
  return text.slice(start, end).split('\n').map((line) => line.replace(/\/\/.*$/, ''));
}

describe('the public request\'s order', () => {
  it('the hook, then forward(), call each step of PUBLIC_ORDER once, in its order', () => {
    const lines = new Map([HOOK, FORWARD].map((fn) => [fn, bodyLines(fn)]));
    // Hook lines first: the hook runs before routing, forward() after it.
    const position = (step: PublicStep) => {
      const { in: fn, call } = CALLS[step];
      const found = lines.get(fn)!.flatMap((line, i) => (call.test(line) ? [i] : []));
      expect(found, `${step}: ${call} once in ${fn.opening}`).toHaveLength(1);
      return (fn === FORWARD ? lines.get(HOOK)!.length : 0) + found[0]!;
    };
    const steps = PUBLIC_ORDER.map(({ step }) => step);
    expect([...steps].sort((a, b) => position(a) - position(b))).toEqual(steps);
  });

  it('the hook is straight-line code and the listener\'s only onRequest hook of its own: no loop, no array, no hook per step', () => {
    const hook = bodyLines(HOOK).join('\n');
    expect(hook).not.toMatch(/\bfor\b|\bwhile\b|\.(forEach|map|reduce|some|every)\(|\[/);
    expect(readFileSync(path.join(SRC, 'app.ts'), 'utf8').match(/addHook\('onRequest'/g)).toHaveLength(1);
    expect(readFileSync(path.join(SRC, 'app.ts'), 'utf8')).toMatch(/addHook\('onRequest', publicRequestHook\(/);
  });

  it('every step says why it comes where it does', () => {
    for (const { step, why } of PUBLIC_ORDER) expect(why.length, step).toBeGreaterThan(20);
    expect(new Set(PUBLIC_ORDER.map(({ step }) => step)).size).toBe(PUBLIC_ORDER.length);
  });
});

const ORIGIN = 'https://app.example.com';
const PREFLIGHT = `Origin: ${ORIGIN}\r\nAccess-Control-Request-Method: GET\r\n`;
const REFUSED_HOST = 'evil:1@127.0.0.1';
const traceparent = (traceId: string) => `traceparent: 00-${traceId}-${'1'.repeat(16)}-01\r\n`;
const statusLine = (answer: string) => answer.split('\r\n', 1)[0];
const headersOf = (answer: string) => answer.slice(0, answer.indexOf('\r\n\r\n')).toLowerCase();

describeWithServices('the public request\'s order, as a client sees it', () => {
  let upstream: EchoUpstream;
  let collector: Awaited<ReturnType<typeof startCollector>>;
  let gw: TestGateway;
  let user: TestUser;

  beforeAll(async () => {
    [upstream, collector] = await Promise.all([startEchoUpstream(), startCollector()]);
    gw = await startTestGateway(testConfig({
      cors: { origins: [ORIGIN] },
      telemetry: { otlp: { endpoint: collector.url } },
      plans: { limits: { free: { daily: 1000 } } },
      upstreams: { app: { url: upstream.url } },
      // Counted routes: a step after decide would find a use already counted.
      routes: [{ path: '/private', upstream: 'app', auth: 'required', dailyLimit: true }, { path: '/live', upstream: 'app', auth: 'required', dailyLimit: true, websocket: true }],
    }));
    user = await makeUser(gw);
  });

  afterAll(async () => {
    await gw?.close();
    await Promise.all([upstream?.close(), collector?.close()]);
    await closeSql();
  });

  const raw = (text: string) => rawExchange(gw.url, Buffer.from(text, 'latin1'), { halfClose: false });
  const traced = (traceId: string) => collector.spans.filter((s) => s.traceId === traceId).map((s) => s.name);

  it('host, trace, cors: a preflight with a refused Host gets the Host check\'s 400, untraced, with no CORS header; with a good Host, a traced 204', async () => {
    const [refused, served] = ['a1'.padStart(32, '0'), 'a2'.padStart(32, '0')];
    const bad = await raw(`OPTIONS /private/${marker()} HTTP/1.1\r\nHost: ${REFUSED_HOST}\r\n${PREFLIGHT}${traceparent(refused)}Connection: close\r\n\r\n`);
    expect(statusLine(bad)).toBe('HTTP/1.1 400 Bad Request');
    expect(bad.endsWith('{"error":"Requête invalide"}')).toBe(true);
    expect(headersOf(bad)).toMatch(/^x-request-id: /m);
    expect(headersOf(bad)).not.toMatch(/^vary:.*origin|^access-control-/m);
    // The same preflight with a Host: answered by CORS before the route's guard (no credentials), and traced.
    const good = await raw(`OPTIONS /private/${marker()} HTTP/1.1\r\nHost: shop.example\r\n${PREFLIGHT}${traceparent(served)}Connection: close\r\n\r\n`);
    expect(statusLine(good)).toBe('HTTP/1.1 204 No Content');
    expect(headersOf(good)).toMatch(new RegExp(`^access-control-allow-origin: ${ORIGIN}\r?$`, 'm'));
    await eventually(() => traced(served).length > 0, 5000);
    // Spans are exported in the order they end: the refused request's would have come first.
    expect(traced(refused)).toEqual([]);
  });

  it('draining, cors: while draining, the preflight CORS answers closes its connection', async () => {
    const preflight = { origin: ORIGIN, 'access-control-request-method': 'GET' };
    expect((await gw.request('OPTIONS', `/private/${marker()}`, { headers: preflight })).headers.connection).toBe('keep-alive');
    gw.services.lifecycle.draining = true;
    try {
      const res = await gw.request('OPTIONS', `/private/${marker()}`, { headers: preflight });
      expect([res.status, res.headers.connection, res.headers['access-control-allow-origin']]).toEqual([204, 'close', ORIGIN]);
    } finally {
      gw.services.lifecycle.draining = false;
    }
  });

  it('bodyless, decide, forward: a GET with a body is refused (400) before the guard\'s 401, and counts no use; a denied request never reaches the upstream', async () => {
    const m = marker();
    const get = (credentials: string, framing: string) => raw(`GET /private/${m} HTTP/1.1\r\nHost: shop.example\r\n${credentials}Connection: close\r\n${framing}`);
    expect(statusLine(await get('', 'Content-Length: 5\r\n\r\nhello'))).toBe('HTTP/1.1 400 Bad Request');
    expect(statusLine(await get(`Authorization: Bearer ${user.access}\r\n`, 'Content-Length: 5\r\n\r\nhello'))).toBe('HTTP/1.1 400 Bad Request');
    expect(statusLine(await get('', '\r\n'))).toBe('HTTP/1.1 401 Unauthorized');
    expect(upstream.last(m)).toBeUndefined();
    expect((await usage(user.id)).daily_usage).toBe(0);
  });

  it('upgrade, decide: a malformed WebSocket handshake is refused (400, Sec-WebSocket-Version: 13) before the guard\'s 401, and counts no use', async () => {
    const handshake = (version: string, credentials = '') => `GET /live/${marker()} HTTP/1.1\r\nHost: shop.example\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n`
      + `Sec-WebSocket-Version: ${version}\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n${credentials}\r\n`;
    for (const credentials of ['', `Authorization: Bearer ${user.access}\r\n`]) {
      const malformed = await raw(handshake('8', credentials));
      expect(statusLine(malformed)).toBe('HTTP/1.1 400 Bad Request');
      expect(headersOf(malformed)).toMatch(/^sec-websocket-version: 13\r?$/m);
    }
    expect(statusLine(await raw(handshake('13')))).toBe('HTTP/1.1 401 Unauthorized');
    expect((await usage(user.id)).daily_usage).toBe(0);
  });
});
