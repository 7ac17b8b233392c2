// The HTTPS listener (CONTRACT §10): HTTP/2 over ALPN beside HTTP/1.1 on one port, with real
// clients (curl --http2, undici with allowH2, node:http2, node:https); the Host and Expect rules
// over TLS; the certificate renewed on SIGHUP without dropping connections (the built CLI);
// HTTP/2 connections let go at shutdown.
import { execFile } from 'node:child_process';
import { copyFileSync, rmSync } from 'node:fs';
import http2 from 'node:http2';
import https from 'node:https';
import path from 'node:path';
import tls, { type TLSSocket } from 'node:tls';
import { Agent, buildConnector, request as undiciRequest } from 'undici';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { exampleCertificateDir, makePki, servedCn, type Pki } from '../helpers/certs.js';
import { docsExample } from '../helpers/docs.js';
import {
  bearer, closeSql, describeWithServices, eventually, makeUser, marker, rawTestConfig, startTestGateway, testConfigFromFile, type TestGateway,
} from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { spawnGateway, type LogLine } from '../helpers/gatewayProcess.js';

interface Answer { status: number; headers: Record<string, unknown>; body: string }

/** curl, as a user runs it: the HTTP version it spoke, the status and the body. */
function curl(args: string[]): Promise<{ version: string; status: number; body: string }> {
  return new Promise((resolve, reject) => {
    execFile('curl', ['-s', '-w', '\n%{http_version} %{http_code}', ...args], (err, stdout) => {
      if (err) return reject(err);
      const cut = stdout.lastIndexOf('\n');
      const [version, status] = stdout.slice(cut + 1).split(' ');
      resolve({ version: version!, status: Number(status), body: stdout.slice(0, cut) });
    });
  });
}

/** One request on an HTTP/2 session. */
function h2(session: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const stream = session.request(headers, { endStream: body === undefined });
    let status = 0;
    let responseHeaders: Record<string, unknown> = {};
    let data = '';
    stream.on('response', (h) => { status = Number(h[':status']); responseHeaders = h; });
    stream.setEncoding('utf8').on('data', (c: string) => { data += c; });
    stream.on('end', () => resolve({ status, headers: responseHeaders, body: data }));
    stream.on('error', reject);
    if (body !== undefined) stream.end(body);
  });
}

/** Bytes written on a fresh TLS connection speaking HTTP/1.1, and what comes back. */
function tlsExchange(url: string, ca: string, bytes: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: hostname, port: Number(port), ca, servername: 'localhost', ALPNProtocols: ['http/1.1'] }, () => socket.end(bytes));
    let out = '';
    socket.setEncoding('utf8').on('data', (c: string) => { out += c; });
    socket.on('end', () => resolve(out));
    socket.on('error', reject);
  });
}

describeWithServices('HTTPS listener', () => {
  let pki: Pki;
  let dir: string;
  let upstream: EchoUpstream;
  let gw: TestGateway;
  let base: string;

  beforeAll(async () => {
    pki = makePki('Gateway CA');
    dir = exampleCertificateDir(pki.issue('gateway', { cn: 'gateway', names: ['localhost', '127.0.0.1'] }), 'gateway');
    upstream = await startEchoUpstream();
    // The docs' example as written, on the test's storage and port 0.
    gw = await startTestGateway(testConfigFromFile(docsExample('tls', 'https-listener'), dir, { APP_URL: upstream.url }));
    base = `https://localhost:${new URL(gw.url).port}`;
  });

  afterAll(async () => {
    await gw?.close();
    await upstream?.close();
    pki?.remove();
    if (dir) rmSync(dir, { recursive: true, force: true });
    await closeSql();
  });

  it('serves curl --http2 and curl --http1.1 on the same port, through the guards', async () => {
    const email = `h2-${marker()}@example.test`;
    const register = await curl([
      '--http2', '--cacert', pki.caFile, '-H', 'content-type: application/json', '-d', JSON.stringify({ email, password: 'correct-horse-1' }), `${base}/api/v1/auth/register`,
    ]);
    expect(register).toMatchObject({ version: '2', status: 201 });
    const login = await curl(['--http1.1', '--cacert', pki.caFile, '-H', 'content-type: application/json', '-d', JSON.stringify({ email, password: 'correct-horse-1' }), `${base}/api/v1/auth/login`]);
    expect(login).toMatchObject({ version: '1.1', status: 200 });
    const token = JSON.parse(login.body).access_token as string;
    const m = marker();
    const guarded = await curl(['--http2', '--cacert', pki.caFile, '-H', `authorization: Bearer ${token}`, `${base}/api/v1/orders/${m}`]);
    expect(guarded).toMatchObject({ version: '2', status: 200 });
    const hit = upstream.last(m)!;
    expect(hit.headers['x-user-email']).toBe(email);
    expect(hit.headers['x-forwarded-proto']).toBe('https');
    expect(hit.headers['x-forwarded-host']).toBe(`localhost:${new URL(gw.url).port}`);
    expect(hit.headers.authorization).toBeUndefined();
    const refused = await curl(['--http2', '--cacert', pki.caFile, `${base}/api/v1/orders/${marker()}`]);
    expect(refused).toMatchObject({ version: '2', status: 401, body: '{"error":"Token invalide ou expiré"}' });
  });

  it('negotiates HTTP/2 with undici (allowH2) and streams a body both ways', async () => {
    let alpn: string | false | null | undefined;
    const connector = buildConnector({ ca: pki.ca, allowH2: true });
    const agent = new Agent({ allowH2: true, connect: (opts, cb) => connector(opts, (err, socket) => { alpn = (socket as TLSSocket | null)?.alpnProtocol; cb(err as never, socket as never); }) });
    try {
      const user = await makeUser(gw);
      const m = marker();
      const body = 'x'.repeat(200_000);
      const res = await undiciRequest(`${base}/api/v1/orders/${m}`, { method: 'POST', body, headers: { ...bearer(user.access), 'content-type': 'text/plain' }, dispatcher: agent });
      expect(alpn).toBe('h2');
      expect(res.statusCode).toBe(200);
      const echoed = await res.body.json() as { bodyLength: number };
      expect(echoed.bodyLength).toBe(200_000);
      expect(upstream.last(m)!.headers['x-user-id']).toBe(String(user.id));
    } finally {
      await agent.close();
    }
  });

  it('keeps the Host rules over TLS: HTTP/1.1 without Host or with a bad Host, HTTP/2 with a bad :authority', async () => {
    const noHost = await tlsExchange(gw.url, pki.ca, 'GET /api/v1/orders/x HTTP/1.1\r\nConnection: close\r\n\r\n');
    expect(noHost.split('\r\n', 1)[0]).toBe('HTTP/1.1 400 Bad Request');
    expect(noHost).toContain('{"error":"Requête invalide"}');
    const badHost = await tlsExchange(gw.url, pki.ca, 'GET /api/v1/orders/x HTTP/1.1\r\nHost: evil:1@127.0.0.1\r\nConnection: close\r\n\r\n');
    expect(badHost.split('\r\n', 1)[0]).toBe('HTTP/1.1 400 Bad Request');
    const session = http2.connect(base, { ca: pki.ca });
    try {
      // Node's HTTP/2 layer resets a stream whose :authority breaks RFC 3986 (`evil:1@host`);
      // one that is a URI authority but not a host name gets the catalog's 400.
      await expect(h2(session, { ':path': '/healthz', ':authority': 'evil:1@127.0.0.1' })).rejects.toThrow(/NGHTTP2_PROTOCOL_ERROR/);
      const res = await h2(session, { ':path': `/api/v1/orders/${marker()}`, ':authority': 'bad!host' });
      expect(res.status).toBe(400);
      expect(JSON.parse(res.body)).toEqual({ error: 'Requête invalide' });
      // The session is still good for the next request.
      expect((await h2(session, { ':path': '/healthz' })).status).toBe(200);
    } finally {
      session.close();
    }
  });

  it('answers an unknown Expect with the catalog\'s 417 on both protocols, and refuses an HTTP/2 GET with a body', async () => {
    const http1 = await tlsExchange(gw.url, pki.ca, 'GET /healthz HTTP/1.1\r\nHost: localhost\r\nExpect: something\r\nConnection: close\r\n\r\n');
    expect(http1.split('\r\n', 1)[0]).toBe('HTTP/1.1 417 Expectation Failed');
    expect(http1).toContain('En-tête Expect non pris en charge');
    const session = http2.connect(base, { ca: pki.ca });
    try {
      const res = await h2(session, { ':path': '/healthz', expect: 'something' });
      expect(res.status).toBe(417);
      expect(JSON.parse(res.body)).toEqual({ error: 'En-tête Expect non pris en charge' });
      const m = marker();
      const user = await makeUser(gw);
      const withBody = await h2(session, { ':path': `/api/v1/orders/${m}`, ':method': 'GET', ...bearer(user.access) }, 'a search the upstream would not get');
      expect(withBody.status).toBe(400);
      expect(upstream.count(m)).toBe(0);
    } finally {
      session.close();
    }
  });

  it('drains HTTP/2 as it drains HTTP/1.1: during server.shutdownDelay an answer tells its session GOAWAY', async () => {
    const own = await startTestGateway(testConfigFromFile(docsExample('tls', 'https-listener'), dir, { APP_URL: upstream.url }));
    const session = http2.connect(`https://localhost:${new URL(own.url).port}`, { ca: pki.ca });
    const goaway = new Promise<void>((resolve) => session.once('goaway', () => resolve()));
    try {
      expect((await h2(session, { ':path': '/readyz' })).status).toBe(200);
      const closing = own.close(1000);
      await eventually(() => own.services.lifecycle.draining);
      // Served as ever (the load balancer is told by /readyz), and the session is let go.
      expect((await h2(session, { ':path': '/readyz' })).status).toBe(503);
      await goaway;
      await closing;
    } finally {
      session.destroy();
      await own.close();
    }
  });

  /** A gateway of the test's own (the docs' HTTPS listener) and a marker whose requests the upstream answers after 300 ms. */
  async function gatewayWithSlowRoute() {
    const own = await startTestGateway(testConfigFromFile(docsExample('tls', 'https-listener'), dir, { APP_URL: upstream.url }));
    const user = await makeUser(own);
    const m = marker();
    upstream.handle = (req, res) => {
      if (!req.url?.includes(m)) return false;
      setTimeout(() => res.end('late but whole'), 300);
      return true;
    };
    return { own, user, m };
  }

  it('lets a slow HTTP/1.1 request over TLS finish when it closes, answered with Connection: close', async () => {
    const { own, user, m } = await gatewayWithSlowRoute();
    try {
      const agent = new https.Agent({ keepAlive: true, ca: pki.ca });
      const answer = new Promise<{ status: number; connection: string | undefined; body: string }>((resolve, reject) => {
        https.get(`https://localhost:${new URL(own.url).port}/api/v1/orders/${m}`, { agent, headers: bearer(user.access) }, (res) => {
          let body = '';
          res.setEncoding('utf8').on('data', (c: string) => { body += c; });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, body }));
        }).on('error', reject);
      });
      await eventually(() => upstream.count(m) === 1);
      await own.close();
      expect(await answer).toEqual({ status: 200, connection: 'close', body: 'late but whole' });
      agent.destroy();
    } finally {
      upstream.handle = undefined;
    }
  });

  it('lets its HTTP/2 connections go when it closes: streams in flight finish, then the session ends', async () => {
    const { own, user, m } = await gatewayWithSlowRoute();
    const session = http2.connect(`https://localhost:${new URL(own.url).port}`, { ca: pki.ca });
    const ended = new Promise<void>((resolve) => session.once('close', () => resolve()));
    const slow = h2(session, { ':path': `/api/v1/orders/${m}`, ...bearer(user.access) });
    await eventually(() => upstream.count(m) === 1);
    await own.close();
    expect(await slow).toMatchObject({ status: 200, body: 'late but whole' });
    await ended;
    upstream.handle = undefined;
  });
});

describeWithServices('HTTPS certificate renewal (SIGHUP on the built CLI)', () => {
  let pki: Pki;
  beforeAll(() => { pki = makePki('Gateway CA'); });
  afterAll(async () => {
    pki?.remove();
    await closeSql();
  });

  it('serves the new certificate to new connections, keeps open ones, and refuses files that cannot be used', async () => {
    const first = pki.issue('first', { cn: 'gateway-1', names: ['localhost'] });
    const renewed = pki.issue('renewed', { cn: 'gateway-2', names: ['localhost'] });
    const other = makePki('Another CA');
    const stranger = other.issue('stranger', { cn: 'stranger', names: ['localhost'] });
    const certFile = path.join(pki.dir, 'live.pem');
    const keyFile = path.join(pki.dir, 'live-key.pem');
    copyFileSync(first.certFile, certFile);
    copyFileSync(first.keyFile, keyFile);
    const gw = await spawnGateway(rawTestConfig({ server: { host: '127.0.0.1', port: 0, tls: { certFile, keyFile, http2: true } } }));
    const reloaded = (l: LogLine) => l.msg?.startsWith('configuration reloaded');
    const refused = (l: LogLine) => l.msg === 'configuration reload refused: keeping the running configuration';
    const hup = async (outcome: (l: LogLine) => boolean) => {
      const seen = gw.logs.filter(outcome).length;
      gw.child.kill('SIGHUP');
      await eventually(() => gw.logs.filter(outcome).length > seen, 10_000);
      return gw.logs.filter(outcome).at(-1)!;
    };
    const url = gw.url.replace('127.0.0.1', 'localhost');
    const session = http2.connect(url, { ca: pki.ca });
    const keepAlive = new https.Agent({ keepAlive: true, ca: pki.ca, maxSockets: 1 });
    const http1 = () => new Promise<{ status: number; socketCn: string }>((resolve, reject) => {
      https.get(`${url}/healthz`, { agent: keepAlive }, (res) => {
        const socketCn = String((res.socket as TLSSocket).getPeerCertificate().subject.CN);
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, socketCn }));
      }).on('error', reject);
    });
    try {
      expect(await servedCn(url, pki.ca)).toBe('gateway-1');
      expect((await h2(session, { ':path': '/healthz' })).status).toBe(200);
      expect(await http1()).toEqual({ status: 200, socketCn: 'gateway-1' });

      copyFileSync(renewed.certFile, certFile);
      copyFileSync(renewed.keyFile, keyFile);
      expect((await hup(reloaded)).certificates).toBe('reloaded');
      expect(await servedCn(url, pki.ca)).toBe('gateway-2');
      // Not dropped: the HTTP/2 session and the kept-alive HTTP/1.1 connection go on as they were.
      expect((await h2(session, { ':path': '/healthz' })).status).toBe(200);
      expect(session.closed).toBe(false);
      expect(await http1()).toEqual({ status: 200, socketCn: 'gateway-1' });

      // A key that is not the certificate's: refused, and the running certificate stays.
      copyFileSync(stranger.keyFile, keyFile);
      expect((await hup(refused)).problems).toEqual([expect.stringMatching(/key values mismatch/)]);
      expect(await servedCn(url, pki.ca)).toBe('gateway-2');
    } finally {
      session.close();
      keepAlive.destroy();
      await gw.stop();
      other.remove();
    }
  });
});
