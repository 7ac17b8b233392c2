// HTTP at its edges (issue 16, item 7): requests Node would answer with an empty body, or that
// would turn into a 500, a silently changed request or a dropped connection, get the catalog's
// answer; every 401 says how to authenticate (RFC 6750).
import type { FastifyInstance } from 'fastify';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, expect, it, onTestFinished } from 'vitest';
import { bearer, closeSql, describeWithServices, makeUser, marker, startDecidingGateway, TEST_JWT_SECRET, type TestGateway } from '../helpers/gateway.js';
import { rawExchange } from '../helpers/http.js';
import { buildAdminApp } from '../../src/admin/app.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';

const JSON_400 = '{"error":"Requête invalide"}';

describeWithServices('HTTP at its edges', () => {
  let upstream: EchoUpstream;
  let gw: TestGateway;

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    gw = await startDecidingGateway({
      upstreams: { app: { url: upstream.url } },
      routes: [{ path: '/open', upstream: 'app', auth: 'none' }, { path: '/private', upstream: 'app' }],
    });
  });

  afterAll(async () => {
    await gw?.close();
    await upstream?.close();
    await closeSql();
  });

  const raw = (text: string) => rawExchange(gw.url, Buffer.from(text, 'latin1'), { halfClose: false });
  const statusLine = (answer: string) => answer.split('\r\n', 1)[0];
  const body = (answer: string) => answer.slice(answer.indexOf('\r\n\r\n') + 4);

  it('answers 400 from the catalog to HTTP/1.1 without Host, or with a Host that is not a host', async () => {
    for (const host of [undefined, 'evil:1@127.0.0.1', 'a b', 'x/y', '127.0.0.1:99999999']) {
      const m = marker();
      const answer = await raw(`GET /open/${m} HTTP/1.1\r\n${host === undefined ? '' : `Host: ${host}\r\n`}Connection: close\r\n\r\n`);
      expect(statusLine(answer), String(host)).toBe('HTTP/1.1 400 Bad Request');
      expect(body(answer)).toBe(JSON_400);
      expect(upstream.count(m)).toBe(0);
    }
    // HTTP/1.0 needs no Host; a valid one goes through, and X-Forwarded-Host repeats it.
    const m = marker();
    expect(statusLine(await raw(`GET /open/${m} HTTP/1.0\r\n\r\n`))).toBe('HTTP/1.1 200 OK');
    const n = marker();
    expect(statusLine(await raw(`GET /open/${n} HTTP/1.1\r\nHost: shop.example:8443\r\nConnection: close\r\n\r\n`))).toBe('HTTP/1.1 200 OK');
    expect(upstream.last(n)!.headers['x-forwarded-host']).toBe('shop.example:8443');
  });

  it('answers 431 from the catalog to headers larger than the listener takes, and forwards nothing', async () => {
    const m = marker();
    const answer = await raw(`GET /open/${m} HTTP/1.1\r\nHost: shop.example\r\nX-Padding: ${'p'.repeat(20_000)}\r\n\r\n`);
    expect(statusLine(answer)).toBe('HTTP/1.1 431 Request Header Fields Too Large');
    expect(answer).toMatch(/\r\nconnection: close\r\n/i);
    expect(body(answer)).toBe('{"error":"En-têtes de requête trop volumineux"}');
    expect(upstream.count(m)).toBe(0);
  });

  // The listener's deadlines are shortened here; Node looks for requests past them every second
  // (SERVER_OPTIONS' connectionsCheckingInterval, fixed when the server is made), not every 30 s,
  // its default: the 408 comes within a few seconds.
  it('answers 408 from the catalog to a request whose headers never finish arriving (slowloris)', async () => {
    const server = gw.app.server;
    const before = { request: server.requestTimeout, headers: server.headersTimeout };
    server.requestTimeout = 1000;
    server.headersTimeout = 1000;
    try {
      const m = marker();
      const answer = await rawExchange(gw.url, Buffer.from(`GET /open/${m} HTTP/1.1\r\nHost: shop.example\r\nX-Slow: 1\r\n`, 'latin1'), { halfClose: false, timeoutMs: 10_000 });
      expect(statusLine(answer)).toBe('HTTP/1.1 408 Request Timeout');
      expect(body(answer)).toBe('{"error":"Requête trop lente à arriver"}');
      expect(upstream.count(m)).toBe(0);
    } finally {
      server.requestTimeout = before.request;
      server.headersTimeout = before.headers;
    }
  });

  it('answers the same 400 on the admin and decisions listeners, with the request id', async () => {
    const admin: FastifyInstance = await buildAdminApp(gw.services);
    const adminUrl = await admin.listen({ host: '127.0.0.1', port: 0 });
    onTestFinished(() => admin.close());
    for (const url of [adminUrl, gw.decisionsUrl!]) {
      for (const host of [undefined, 'evil:1@127.0.0.1']) {
        const answer = await rawExchange(url, Buffer.from(`GET /healthz HTTP/1.1\r\n${host === undefined ? '' : `Host: ${host}\r\n`}Connection: close\r\n\r\n`, 'latin1'), { halfClose: false });
        expect(statusLine(answer), `${url} ${String(host)}`).toBe('HTTP/1.1 400 Bad Request');
        expect(body(answer)).toBe(JSON_400);
        expect(answer).toMatch(/\r\nx-request-id: \S+\r\n/i);
      }
      const ok = await rawExchange(url, Buffer.from('GET /healthz HTTP/1.1\r\nHost: gateway.internal\r\nConnection: close\r\n\r\n', 'latin1'), { halfClose: false });
      // The Host check passes it on (the decisions listener has no /healthz of its own: 404).
      expect(statusLine(ok), url).toMatch(/^HTTP\/1\.1 (200 OK|404 Not Found)$/);
    }
  });

  it('answers 400 to a request with two Host headers (RFC 9112 §3.2), whichever comes first', async () => {
    // Node keeps the first and drops the second; a proxy in front that keeps the last would route on
    // one host while the gateway repeats the other to the upstream in X-Forwarded-Host.
    for (const hosts of [['shop.example', 'evil.example'], ['shop.example', 'shop.example']]) {
      const m = marker();
      const answer = await raw(`GET /open/${m} HTTP/1.1\r\n${hosts.map((h) => `Host: ${h}\r\n`).join('')}Connection: close\r\n\r\n`);
      expect(statusLine(answer), hosts.join(', ')).toBe('HTTP/1.1 400 Bad Request');
      expect(body(answer)).toBe(JSON_400);
      expect(upstream.count(m)).toBe(0);
    }
  });

  it('answers an unknown Expect with the catalog\'s 417', async () => {
    const m = marker();
    const answer = await raw(`GET /open/${m} HTTP/1.1\r\nHost: x\r\nExpect: bogus\r\nConnection: close\r\n\r\n`);
    expect(statusLine(answer)).toBe('HTTP/1.1 417 Expectation Failed');
    expect(body(answer)).toBe('{"error":"En-tête Expect non pris en charge"}');
    expect(upstream.count(m)).toBe(0);
  });

  it('answers a malformed chunk with the catalog\'s 400 instead of dropping the connection', async () => {
    const m = marker();
    const answer = await raw(`POST /open/${m} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n`);
    expect(statusLine(answer)).toBe('HTTP/1.1 400 Bad Request');
    expect(body(answer)).toBe(JSON_400);
  });

  it('refuses a GET or HEAD with a body, which the upstream would otherwise get without it', async () => {
    for (const [method, framing] of [['GET', 'Content-Length: 5\r\n\r\nhello'], ['GET', 'Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n'], ['HEAD', 'Content-Length: 2\r\n\r\n{}']]) {
      const m = marker();
      const answer = await raw(`${method} /open/${m} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n${framing}`);
      expect(statusLine(answer), `${method} ${framing}`).toBe('HTTP/1.1 400 Bad Request');
      expect(upstream.count(m)).toBe(0);
    }
    const m = marker();
    expect((await gw.get(`/open/${m}`, { headers: { 'content-length': '0' } })).status).toBe(200);
  });

  it('refuses a signed token whose sub is past the users table\'s range with 401, not 500', async () => {
    const iat = Math.floor(Date.now() / 1000);
    for (const sub of ['4294967297', '2147483648', '9999999999']) {
      const token = await new SignJWT({ plan: 'pro', email: 'x@example.test' }).setProtectedHeader({ alg: 'HS256', typ: 'at+jwt' })
        .setSubject(sub).setIssuedAt(iat).setExpirationTime(iat + 600).setJti(crypto.randomUUID()).sign(new TextEncoder().encode(TEST_JWT_SECRET));
      const res = await gw.get('/private/x', { headers: bearer(token) });
      expect(res.status, sub).toBe(401);
      expect(res.json).toEqual({ error: 'Token invalide ou expiré' });
      const refresh = await gw.post('/api/v1/auth/refresh', { refresh_token: token });
      expect(refresh.status).toBe(401);
    }
  });

  it('gives every 401 a WWW-Authenticate challenge, saying invalid_token when a credential was refused', async () => {
    const user = await makeUser(gw);
    const plain = 'Bearer realm="gateway"';
    const invalid = 'Bearer realm="gateway", error="invalid_token"';
    expect((await gw.get('/private/x')).headers['www-authenticate']).toBe(plain);
    expect((await gw.get('/private/x', { headers: bearer(`${user.access}x`) })).headers['www-authenticate']).toBe(invalid);
    expect((await gw.get('/private/x', { headers: { 'x-api-key': 'gw_made_up' } })).headers['www-authenticate']).toBe(invalid);
    expect((await gw.get('/api/v1/user/me')).headers['www-authenticate']).toBe(plain);
    const login = await gw.post('/api/v1/auth/login', { email: user.email, password: 'wrong password' });
    expect(login.status).toBe(401);
    expect(login.headers['www-authenticate']).toBe(plain);
    // Not on other statuses.
    expect((await gw.get(`/private/${marker()}`, { headers: bearer(user.access) })).headers['www-authenticate']).toBeUndefined();
  });
});
