// Bodies streamed both ways (CONTRACT §3): the gateway passes each chunk on as it comes, it never
// waits for a whole body. Integrity alone (routing.happy.test.ts, 5 MB) would pass through a
// buffering proxy too; here each side holds back the end of its body until the other side has
// seen the start, so a proxy that buffers can only fail. The upstream is a plain node:http server
// of this file's own, so that it can act on a request before its body ends.
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import {
  bearer, closeSql, describeWithServices, makeUser, marker, startTestGateway, testConfig, type TestGateway, type TestUser,
} from '../helpers/gateway.js';

/** Generous: a chunk crosses the loopback in well under a millisecond. */
const WAIT_MS = 5000;

const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

interface Deferred<T> { promise: Promise<T>; resolve(value: T): void }

function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => { resolve = r; });
  return { promise, resolve };
}

/** p, or a failure saying what did not happen (the gateway holding a body back) after WAIT_MS. */
async function within<T>(p: Promise<T>, failure: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => { timer = setTimeout(() => reject(new Error(failure)), WAIT_MS); });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** What the upstream has received of one request so far, while it is still arriving. */
interface Arrival {
  headers: http.IncomingHttpHeaders;
  chunks: Buffer[];
  ended: boolean;
  firstData: Promise<void>;
  /** Resolves when the upstream's side of this request is closed (complete or aborted). */
  closed: Promise<void>;
}

/** What the upstream has sent of one response so far. */
interface Sending {
  finished: boolean;
  /** The test resolves it once the client has the first chunk: only then does the response end. */
  finish: Deferred<void>;
  /** Resolves when the upstream's connection for this response closes (ended or cut). */
  closed: Promise<void>;
}

/** What the upstream has written of one /big/ response, as far as its socket took it. */
interface Flood {
  written: number;
  finished: boolean;
}

/** The size of a /big/ response: far more than the socket buffers on the way can hold. */
const FLOOD_BYTES = 64 * 1024 * 1024;

interface StreamingUpstream {
  url: string;
  /** Resolves when a request whose path contains the marker arrives (headers only, body to come). */
  arrival(marker: string): Promise<Arrival>;
  /** Registers, before the request is sent, a /down/ response the test will let finish. */
  sending(marker: string): Sending;
  /** Registers, before the request is sent, a /big/ response of FLOOD_BYTES written as fast as the connection takes it. */
  flood(marker: string): Flood;
  /** Lets every /down/ response still held end (after a failed test). */
  finishAll(): void;
  close(): Promise<void>;
}

// `/down/<marker>` answers `first:<marker>` at once, then the rest only when the test says so;
// `?length=1` announces a content-length instead of chunking. Any other path reads the request
// body and answers its length and hash once it has all of it.
async function startStreamingUpstream(): Promise<StreamingUpstream> {
  const arrivals = new Map<string, Deferred<Arrival>>();
  const sendings = new Map<string, Sending & { close(): void }>();
  const floods = new Map<string, Flood>();
  const sockets = new Set<import('node:net').Socket>();
  const markerOf = (url: string) => /\/(m[0-9a-f]{12})(?:[/?]|$)/.exec(url)?.[1] ?? '';
  const arrivalFor = (m: string) => {
    let d = arrivals.get(m);
    if (!d) arrivals.set(m, d = deferred<Arrival>());
    return d;
  };

  const server = http.createServer((req, res) => {
    const url = req.url ?? '/';
    const m = markerOf(url);
    if (url.includes('/big/')) {
      const flood = floods.get(m);
      if (!flood) { res.writeHead(500); res.end('no /big/ registered for this marker'); return; }
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(FLOOD_BYTES) });
      const chunk = Buffer.alloc(64 * 1024, 'b');
      // Writes only as fast as the connection drains: what is written is what the gateway took.
      const pump = () => {
        while (flood.written < FLOOD_BYTES) {
          flood.written += chunk.length;
          if (!res.write(chunk)) { res.once('drain', pump); return; }
        }
        res.end();
        flood.finished = true;
      };
      pump();
      return;
    }
    if (url.includes('/down/')) {
      const sending = sendings.get(m);
      const first = `first:${m}\n`;
      const rest = `rest:${m}\n`;
      if (!sending) { res.writeHead(500); res.end('no /down/ registered for this marker'); return; }
      res.writeHead(200, {
        'content-type': 'text/plain; charset=utf-8',
        ...(url.includes('length=1') ? { 'content-length': String(Buffer.byteLength(first + rest)) } : {}),
      });
      res.on('close', () => sending.close());
      res.write(first);
      void sending.finish.promise.then(() => { res.end(rest); sending.finished = true; });
      return;
    }
    const firstData = deferred();
    const closed = deferred();
    const arrival: Arrival = { headers: req.headers, chunks: [], ended: false, firstData: firstData.promise, closed: closed.promise };
    req.on('close', () => closed.resolve());
    req.on('data', (c: Buffer) => { arrival.chunks.push(c); firstData.resolve(); });
    req.on('end', () => {
      arrival.ended = true;
      const body = Buffer.concat(arrival.chunks);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ length: body.length, sha256: sha(body), userId: req.headers['x-user-id'] ?? null }));
    });
    arrivalFor(m).resolve(arrival);
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    arrival: (m) => arrivalFor(m).promise,
    sending: (m) => {
      const closed = deferred();
      const s = { finished: false, finish: deferred(), closed: closed.promise, close: () => closed.resolve() };
      sendings.set(m, s);
      return s;
    },
    flood: (m) => {
      const f: Flood = { written: 0, finished: false };
      floods.set(m, f);
      return f;
    },
    finishAll: () => { for (const s of sendings.values()) s.finish.resolve(); },
    close: async () => {
      for (const s of sendings.values()) s.finish.resolve();
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Client requests of the running test, destroyed after it: a failed one must not keep the gateway from closing. */
const openRequests = new Set<http.ClientRequest>();

interface OpenResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** The first chunk the client read. */
  first: Promise<Buffer>;
  /** The whole body, once the response has ended. */
  body: Promise<Buffer>;
}

/** A GET whose body the test reads as it comes, on a connection of its own. */
function openGet(baseUrl: string, path: string, headers: Record<string, string>): Promise<OpenResponse> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const req = http.get({ host: url.hostname, port: url.port, path, headers, agent: false }, (res) => {
      const first = deferred<Buffer>();
      const parts: Buffer[] = [];
      const body = new Promise<Buffer>((done, fail) => {
        res.on('data', (c: Buffer) => { if (!parts.length) first.resolve(c); parts.push(c); });
        res.on('end', () => done(Buffer.concat(parts)));
        res.on('error', fail);
        res.on('aborted', () => fail(new Error('response cut short')));
      });
      body.catch(() => undefined); // read by the test, or never when it failed earlier
      resolve({ status: res.statusCode ?? 0, headers: res.headers, first: first.promise, body });
    });
    openRequests.add(req);
    req.on('error', reject);
  });
}

interface OpenRequest {
  req: http.ClientRequest;
  response: Promise<{ status: number; json: any }>; // eslint-disable-line @typescript-eslint/no-explicit-any -- the upstream's JSON
}

/** A POST whose body the test writes piece by piece (chunked unless headers give a content-length). */
function openPost(baseUrl: string, path: string, headers: Record<string, string>): OpenRequest {
  const url = new URL(baseUrl);
  const req = http.request({ host: url.hostname, port: url.port, method: 'POST', path, headers, agent: false });
  openRequests.add(req);
  const response = new Promise<{ status: number; json: unknown }>((resolve, reject) => {
    req.on('response', (res) => {
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () => {
        const text = Buffer.concat(parts).toString('utf8');
        let json: unknown;
        try { json = JSON.parse(text); } catch { json = text; }
        resolve({ status: res.statusCode ?? 0, json });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
  });
  response.catch(() => undefined); // read by the test, or never when it failed earlier
  return { req, response };
}

describeWithServices('bodies streamed both ways', () => {
  let upstream: StreamingUpstream;
  let gw: TestGateway;
  let user: TestUser;
  // The guarded route authenticates before forwarding: the body must still stream behind it.
  const routes = () => [
    { name: 'auth: none', prefix: '/open', headers: {} as Record<string, string>, userId: null as string | null },
    { name: 'auth: required, bearer', prefix: '/guarded', headers: bearer(user.access), userId: String(user.id) },
  ];

  beforeAll(async () => {
    upstream = await startStreamingUpstream();
    gw = await startTestGateway(testConfig({
      // A long timeout: the upstream legitimately pauses mid-body while the test looks.
      upstreams: { stream: { url: upstream.url, timeout: '30s' } },
      routes: [
        { path: '/open', upstream: 'stream', auth: 'none' },
        { path: '/guarded', upstream: 'stream', auth: 'required' },
      ],
    }));
    user = await makeUser(gw);
  });

  // After a failure, nothing may be left half-way: the gateway would wait for it when closing.
  afterEach(() => {
    upstream.finishAll();
    for (const req of openRequests) {
      if (req.socket && !req.socket.destroyed) req.socket.resetAndDestroy();
      else req.destroy();
    }
    openRequests.clear();
  });

  afterAll(async () => {
    await gw?.close();
    await upstream?.close();
    await closeSql();
  });

  it.each([
    ['chunked', ''],
    ['with content-length', '?length=1'],
  ])('passes the upstream\'s first chunk to the client before the upstream has finished (%s)', async (_framing, query) => {
    for (const route of routes()) {
      const m = marker();
      const sending = upstream.sending(m);
      const res = await within(openGet(gw.url, `${route.prefix}/down/${m}${query}`, route.headers),
        `${route.name}: no response headers while the upstream was still sending: the gateway waits for the whole response`);
      expect(res.status, route.name).toBe(200);
      expect(res.headers['content-type']).toBe('text/plain; charset=utf-8');
      const first = await within(res.first,
        `${route.name}: the first chunk did not reach the client while the upstream held the rest back: the gateway buffers responses`);
      expect(first.toString()).toBe(`first:${m}\n`);
      expect(sending.finished).toBe(false);

      sending.finish.resolve();
      const body = await within(res.body, `${route.name}: the response never ended`);
      expect(body.toString()).toBe(`first:${m}\nrest:${m}\n`);
    }
  });

  it.each([
    ['chunked, no content-length', false],
    ['with content-length', true],
  ])('passes the client\'s first chunk to the upstream before the client has finished sending (%s)', async (_framing, sized) => {
    for (const route of routes()) {
      const m = marker();
      const first = Buffer.from(`first:${m}\n`);
      const rest = Buffer.alloc(256 * 1024, 'r');
      const whole = Buffer.concat([first, rest]);
      const headers: Record<string, string> = { ...route.headers, 'content-type': 'application/octet-stream' };
      if (sized) headers['content-length'] = String(whole.length);
      const { req, response } = openPost(gw.url, `${route.prefix}/up/${m}`, headers);
      req.write(first);

      const arrival = await within(upstream.arrival(m),
        `${route.name}: the upstream got no request while the client was still sending: the gateway waits for the whole body`);
      // Headers first, identity included: the guard ran before the body was read.
      expect(arrival.headers['x-user-id'] ?? null, route.name).toBe(route.userId);
      expect(arrival.headers['content-type']).toBe('application/octet-stream');
      if (sized) expect(arrival.headers['content-length']).toBe(String(whole.length));
      else expect(arrival.headers['transfer-encoding']).toBe('chunked');
      await within(arrival.firstData,
        `${route.name}: the first chunk did not reach the upstream while the client held the rest back: the gateway buffers request bodies`);
      expect(Buffer.concat(arrival.chunks).toString()).toBe(first.toString());
      expect(arrival.ended).toBe(false);

      req.end(rest);
      const res = await within(response, `${route.name}: no answer after the client finished sending`);
      expect(res.status, route.name).toBe(200);
      expect(res.json).toEqual({ length: whole.length, sha256: sha(whole), userId: route.userId });
      expect(arrival.ended).toBe(true);
    }
  });

  // A client that goes away mid-body: its request can never complete, so the gateway must let go
  // of the connection and of the upstream request at once, not hold both until it shuts down.
  it.each([
    ['half-closes (FIN), chunked', false, 'fin'],
    ['half-closes (FIN), with content-length', true, 'fin'],
    ['resets, chunked', false, 'reset'],
    ['resets, with content-length', true, 'reset'],
    // The catalog's 400 for the broken framing goes to the client; the upstream request must end too.
    ['sends a malformed chunk', false, 'malformed'],
  ] as const)('lets go of the connection and the upstream request when the client %s mid-body', async (_how, sized, how) => {
    for (const route of routes()) {
      const m = marker();
      const headers: Record<string, string> = { ...route.headers, 'content-type': 'application/octet-stream' };
      if (sized) headers['content-length'] = '100000';
      const { req } = openPost(gw.url, `${route.prefix}/up/${m}`, headers);
      req.on('error', () => {}); // the gateway drops the connection: expected here
      req.write(Buffer.from(`first:${m}\n`));
      const arrival = await within(upstream.arrival(m), `${route.name}: the request never reached the upstream`);
      await within(arrival.firstData, `${route.name}: the first chunk never reached the upstream`);

      const clientSocket = req.socket!;
      const clientClosed = new Promise<void>((resolve) => clientSocket.once('close', () => resolve()));
      if (how === 'fin') clientSocket.end();
      else if (how === 'reset') clientSocket.resetAndDestroy();
      else clientSocket.write('zz\r\nnot a chunk\r\n');
      await within(arrival.closed, `${route.name}: the upstream request stayed open after the client went away`);
      expect(arrival.ended).toBe(false);
      await within(clientClosed, `${route.name}: the gateway kept the client's half-closed connection open`);
    }
    // The client's doing, not the upstream's: not counted as an upstream failure (operators alert
    // on that metric), logged as what it was.
    expect((await gw.services.metrics.upstreamErrors.get()).values).toEqual([]);
    expect(gw.logs.filter((l) => l.includes('client went away before the response'))).toHaveLength(2);
    expect(gw.logs.filter((l) => l.includes('upstream failed'))).toEqual([]);
    gw.logs.length = 0;
  });
  // The client's pace sets the upstream's: a proxy that read on regardless would hold whatever the
  // client has not taken yet in memory, a whole download per slow client.
  it('holds the upstream back while the client does not read, and passes everything on when it does', async () => {
    for (const route of routes()) {
      const m = marker();
      const flood = upstream.flood(m);
      const url = new URL(gw.url);
      const res = await within(new Promise<http.IncomingMessage>((resolve, reject) => {
        const req = http.get({ host: url.hostname, port: url.port, path: `${route.prefix}/big/${m}`, headers: route.headers, agent: false }, resolve);
        openRequests.add(req);
        req.on('error', reject);
      }), `${route.name}: no response headers`);
      res.pause();
      expect(res.statusCode, route.name).toBe(200);
      // Wait until the upstream can write no more: the buffers between it and the client are full.
      let seen = -1;
      while (flood.written !== seen) {
        seen = flood.written;
        await new Promise((resolve) => setTimeout(resolve, 300));
      }
      expect(flood.finished, `${route.name}: the upstream wrote its whole response to a client that read nothing`).toBe(false);
      expect(flood.written).toBeLessThan(FLOOD_BYTES / 2);

      let received = 0;
      res.on('data', (c: Buffer) => { received += c.length; });
      res.resume();
      await within(new Promise((resolve) => res.on('end', resolve)), `${route.name}: the response did not end once the client read it`);
      expect(received).toBe(FLOOD_BYTES);
      expect(flood.finished).toBe(true);
    }
  });

  it('cuts the upstream response short when the client leaves in the middle of it', async () => {
    for (const route of routes()) {
      const m = marker();
      const sending = upstream.sending(m);
      const res = await within(openGet(gw.url, `${route.prefix}/down/${m}`, route.headers), `${route.name}: no response headers`);
      await within(res.first, `${route.name}: the first chunk never came`);
      for (const req of openRequests) req.destroy();
      await within(sending.closed, `${route.name}: the upstream's response stayed open after the client went away`);
      expect(sending.finished).toBe(false);
    }
    expect((await gw.services.metrics.upstreamErrors.get()).values).toEqual([]);
  });
});
