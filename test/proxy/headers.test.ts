// What upstreams receive (CONTRACT §3): client-sent identity headers never get through, on any
// route; the gateway's own set comes once, with exact values; credentials stay at the gateway.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startEchoUpstream, type EchoUpstream, type Hit } from '../helpers/echoUpstream.js';
import {
  bearer, closeSql, describeWithServices, makeUser, marker, sql, startTestGateway, startTwoGateways, TEST_JWT_SECRET, testConfig, type TestGateway, type TestUser,
} from '../helpers/gateway.js';
import { rawExchange } from '../helpers/http.js';

/** A request with raw header lines (duplicates and odd spellings kept as written). */
function rawRequest(
  baseUrl: string, path: string, headerPairs: string[],
): Promise<{ status: number; headers: http.IncomingHttpHeaders; json: any }> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, method: 'GET', path, headers: ['Host', url.host, ...headerPairs], agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => { text += c; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, json: JSON.parse(text) }));
    });
    req.on('error', reject);
    req.end();
  });
}

// Every way a client could try to pass identity along, including a Connection header naming the
// gateway's own headers so that a proxy honouring it would strip them after adding them.
const FORGED = [
  'X_User_Id', '999', 'x-user-id', '998', 'X-USER-ID', '997', 'X-User-Plan', 'pro', 'x_user_plan', 'pro', 'X-User-Email', 'boss@example.test',
  'x-user-whatever', 'x', 'X-Auth-Method', 'bearer', 'x_auth_method', 'api-key', 'X-Gateway-Assertion', 'forged.jws.value', 'x_gateway_assertion', 'forged',
  'Connection', 'keep-alive, x-user-id, X-User-Plan, x-auth-method, x-request-id, x-forwarded-for',
];

const IDENTITY = /^(x-user-.*|x-auth-method|x-gateway-assertion)$/;
/** The identity headers the upstream got, as written on the wire (names normalized the way frameworks read them). */
function identityLines(hit: Hit): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (let i = 0; i < hit.rawHeaders.length; i += 2) {
    const name = hit.rawHeaders[i]!.toLowerCase().replace(/_/g, '-');
    if (IDENTITY.test(name)) out.push([name, hit.rawHeaders[i + 1]!]);
  }
  return out.sort();
}

describeWithServices('identity headers sent upstream', () => {
  let upstream: EchoUpstream;
  let a: TestGateway;
  let b: TestGateway;
  let user: TestUser;
  let apiKey: string;
  let apiKeyId: string;

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    const config = testConfig({
      upstreams: { app: { url: upstream.url } },
      routes: [
        { path: '/open', upstream: 'app', auth: 'none' },
        { path: '/maybe', upstream: 'app', auth: 'optional' },
        { path: '/private', upstream: 'app', auth: 'required' },
      ],
    });
    [a, b] = await startTwoGateways(config);
    // API keys are for pro users (other suites check that no other plan holds one).
    user = await makeUser(a, { plan: 'pro' });
    apiKey = `gw_${randomBytes(24).toString('base64url')}`;
    const [row] = await sql<{ id: number }>('INSERT INTO api_tokens (user_id, token_hash) VALUES ($1, $2) RETURNING id', [user.id, createHash('sha256').update(apiKey).digest('hex')]);
    apiKeyId = String(row!.id);
  });

  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await upstream?.close();
    await closeSql();
  });

  /** Every request the upstream got whose target or x-marker header carries m. */
  const reached = (m: string): Hit[] => upstream.hits.filter((h) => h.url.includes(m) || h.headers['x-marker'] === m);

  const own = (method: string): Array<[string, string]> => [
    ['x-auth-method', method], ['x-user-email', user.email], ['x-user-id', String(user.id)],
    // CONTRACT §21: which key, on an API key's request only.
    ...(method === 'api-key' ? [['x-user-key-id', apiKeyId] as [string, string]] : []), ['x-user-plan', 'pro'],
  ];

  it('removes every client-sent identity header on auth: none and anonymous optional routes', async () => {
    for (const [gw, route] of [[a, 'open'], [b, 'maybe']] as const) {
      const m = marker();
      const res = await rawRequest(gw.url, `/${route}/${m}`, FORGED);
      expect(res.status).toBe(200);
      const hit = upstream.last(m)!;
      expect(identityLines(hit)).toEqual([]);
      expect(hit.headers.connection).not.toMatch(/x-user|x-auth|x-request-id|x-forwarded/i);
      expect(hit.headers['x-request-id']).toBe(res.headers['x-request-id']);
    }
  });

  it('replaces them with the gateway\'s own, once each, for bearer and API key users', async () => {
    const cases = [
      { gw: a, route: 'private', auth: bearer(user.access), method: 'bearer' },
      { gw: b, route: 'private', auth: { 'x-api-key': apiKey }, method: 'api-key' },
      { gw: a, route: 'maybe', auth: bearer(user.access), method: 'bearer' },
      { gw: b, route: 'maybe', auth: { 'x-api-key': apiKey }, method: 'api-key' },
    ];
    for (const { gw, route, auth, method } of cases) {
      const m = marker();
      const [name, value] = Object.entries(auth)[0]!;
      const res = await rawRequest(gw.url, `/${route}/${m}`, [...FORGED, name, value]);
      expect(res.status).toBe(200);
      const hit = upstream.last(m)!;
      expect(identityLines(hit)).toEqual(own(method));
      // The gateway's credentials stay at the gateway.
      expect(hit.headers.authorization).toBeUndefined();
      expect(hit.headers['x-api-key']).toBeUndefined();
    }
  });

  it('does not forward X-API-Key or the gateway\'s token even on auth: none routes, but keeps other Authorization', async () => {
    const m = marker();
    await a.get(`/open/${m}`, { headers: { ...bearer(user.access), 'x-api-key': apiKey } });
    expect(upstream.last(m)!.headers.authorization).toBeUndefined();
    expect(upstream.last(m)!.headers['x-api-key']).toBeUndefined();
    expect(identityLines(upstream.last(m)!)).toEqual([]);
    // Someone else's bearer token, or another scheme, is the upstream's business.
    for (const authorization of ['Bearer not-a-gateway-token', 'Basic dXNlcjpwYXNz']) {
      const n = marker();
      await b.get(`/open/${n}`, { headers: { authorization } });
      expect(upstream.last(n)!.headers.authorization).toBe(authorization);
    }
    // On an optional route another scheme is anonymous, not a failed login.
    const basic = marker();
    const res = await a.get(`/maybe/${basic}`, { headers: { authorization: 'Basic dXNlcjpwYXNz' } });
    expect(res.status).toBe(200);
    expect(upstream.last(basic)!.headers.authorization).toBe('Basic dXNlcjpwYXNz');
    expect(identityLines(upstream.last(basic)!)).toEqual([]);
  });

  it('keeps a gateway token from the upstream whatever scheme, or none, the client sent it with', async () => {
    // A client that leaves out `Bearer ` or writes another scheme still hands the upstream a
    // credential it could replay against the gateway: the same token in a proper Bearer header is
    // dropped (CONTRACT §3, "when it carried the gateway's own token").
    const cases: Array<[string, Record<string, string>]> = [
      ['/open', { authorization: user.access }],
      ['/open', { authorization: `Token ${user.refresh}` }],
      ['/open', { authorization: `Bearer ${user.access},` }],
      ['/maybe', { authorization: `JWT ${user.access}` }],
      ['/private', { authorization: user.refresh, 'x-api-key': apiKey }],
    ];
    for (const [route, headers] of cases) {
      const m = marker();
      const res = await a.get(`${route}/${m}`, { headers });
      expect(res.status, JSON.stringify(headers)).toBe(200);
      expect(reached(m)).toHaveLength(1);
      expect(reached(m)[0]!.headers.authorization, JSON.stringify(headers)).toBeUndefined();
    }
    // A JWT that is not the gateway's stays the upstream's business, whatever its scheme.
    const foreign = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl';
    for (const authorization of [`Token ${foreign}`, foreign]) {
      const m = marker();
      await a.get(`/open/${m}`, { headers: { authorization } });
      expect(reached(m)[0]!.headers.authorization).toBe(authorization);
    }
  });

  it('keeps an expired gateway access token, and a refresh token, from an auth: none upstream', async () => {
    const now = Math.floor(Date.now() / 1000);
    const accessToken = (secret: string) => new SignJWT({ plan: 'free', email: user.email })
      .setProtectedHeader({ alg: 'HS256', typ: 'at+jwt' }).setSubject(String(user.id)).setJti(randomUUID())
      .setIssuedAt(now - 3600).setExpirationTime(now - 1800)
      .sign(new TextEncoder().encode(secret));
    const expired = await accessToken(TEST_JWT_SECRET);
    // The same token signed with another key is not the gateway's: it belongs to the upstream.
    const foreign = await accessToken('another-service-secret-of-32-bytes-or-more');
    for (const [token, forwarded] of [[expired, false], [user.refresh, false], [foreign, true]] as const) {
      const m = marker();
      const res = await b.get(`/open/${m}`, { headers: bearer(token) });
      expect(res.status).toBe(200);
      expect(upstream.count(m)).toBe(1);
      expect(upstream.last(m)!.headers.authorization).toBe(forwarded ? `Bearer ${token}` : undefined);
    }
  });

  it('answers 401 on an optional route when a gateway credential fails', async () => {
    const m = marker();
    for (const headers of [{ authorization: 'Bearer expired.or.forged' }, { 'x-api-key': 'gw_unknown' }] as Array<Record<string, string>>) {
      const res = await b.get(`/maybe/${m}`, { headers });
      expect(res.status).toBe(401);
      expect(res.json).toEqual({ error: 'Token invalide ou expiré' });
    }
    expect(upstream.count(m)).toBe(0);
  });

  // The rest of the forwarding family, which frameworks read for addresses, redirects and links.
  const CLAIMS = { forwarded: 'for=203.0.113.9;host=evil.example;proto=https', 'x-real-ip': '203.0.113.9', 'x-forwarded-port': '443', 'x-forwarded-prefix': '/evil' };

  it('replaces X-Forwarded-For/-Proto/-Host, drops the other forwarding headers and sends the upstream\'s Host', async () => {
    const m = marker();
    const res = await a.get(`/open/${m}`, { headers: { 'x-forwarded-for': '203.0.113.9', 'x-forwarded-host': 'evil.example', 'x-forwarded-proto': 'https', ...CLAIMS } });
    expect(res.status).toBe(200);
    const hit = upstream.last(m)!;
    // trustProxy is false: what the client claims about its address is replaced, not extended.
    expect(hit.headers['x-forwarded-for']).toBe('127.0.0.1');
    expect(hit.headers['x-forwarded-proto']).toBe('http');
    expect(hit.headers['x-forwarded-host']).toBe(new URL(a.url).host);
    expect(hit.headers.host).toBe(new URL(upstream.url).host);
    for (const name of Object.keys(CLAIMS)) expect(hit.headers[name], name).toBeUndefined();
  });

  it('sends no X-Forwarded-Host of the client\'s when the request has an empty Host', async () => {
    const m = marker();
    // Node accepts an empty Host line (and HTTP/1.0 needs none); an HTTP client would fill it in.
    const answer = await rawExchange(a.url, Buffer.from(`GET /open/${m} HTTP/1.1\r\nHost:\r\nX-Forwarded-Host: evil.example\r\nConnection: close\r\n\r\n`), { halfClose: false });
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(upstream.count(m)).toBe(1);
    expect(upstream.last(m)!.headers['x-forwarded-host']).toBeUndefined();
  });

  it('extends the client\'s X-Forwarded-* chain under server.trustProxy, and still drops Forwarded and X-Real-IP', async () => {
    const trusting = await startTestGateway(testConfig({ server: { trustProxy: true }, upstreams: { app: { url: upstream.url } }, routes: [{ path: '/open', upstream: 'app', auth: 'none' }] }));
    try {
      const m = marker();
      await trusting.get(`/open/${m}`, { headers: { 'x-forwarded-for': '203.0.113.9', 'x-forwarded-host': 'shop.example', 'x-forwarded-proto': 'https', ...CLAIMS } });
      const hit = upstream.last(m)!;
      expect(hit.headers['x-forwarded-for']).toBe('203.0.113.9, 127.0.0.1');
      expect(hit.headers['x-forwarded-proto']).toBe('https');
      expect(hit.headers['x-forwarded-host']).toBe('shop.example');
      // What the operator's proxy says of ports and prefixes is kept; the other address claims never pass (CONTRACT §8).
      expect(hit.headers['x-forwarded-port']).toBe('443');
      expect(hit.headers['x-forwarded-prefix']).toBe('/evil');
      expect(hit.headers.forwarded).toBeUndefined();
      expect(hit.headers['x-real-ip']).toBeUndefined();
    } finally {
      await trusting.close();
    }
  });

  it('uses one request id for the response, the upstream and a caller-supplied safe id', async () => {
    const m = marker();
    const res = await b.get(`/private/${m}`, { headers: { ...bearer(user.access), 'x-request-id': `trace-${m}` } });
    expect(res.headers['x-request-id']).toBe(`trace-${m}`);
    expect(upstream.last(m)!.headers['x-request-id']).toBe(`trace-${m}`);
    const unsafe = await b.get(`/private/${m}`, { headers: { ...bearer(user.access), 'x-request-id': 'bad id with spaces' } });
    expect(unsafe.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(upstream.last(m)!.headers['x-request-id']).toBe(unsafe.headers['x-request-id']);
  });
});
