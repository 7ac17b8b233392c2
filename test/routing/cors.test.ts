// CORS (CONTRACT §10) as a browser meets it: preflights answered before any guard, the gateway's
// own errors readable by the page, the upstream's own CORS headers replaced, per-route overrides,
// reload. The docs' example runs as written; a real browser does the same in test/browser/.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { applyConfig } from '../../src/live/reload.js';
import { docsExample } from '../helpers/docs.js';
import {
  bearer, closeSql, configProblems, describeWithServices, makeUser, marker, ownRedisPrefix, startTestGateway, testConfig, testConfigFromYaml, type TestGateway,
} from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';

const APP = 'https://app.example.com';
const DEV = 'http://localhost:5173';
const EVIL = 'https://evil.example.net';

const preflight = (origin: string, method: string, headers = 'authorization') => ({
  origin, 'access-control-request-method': method, 'access-control-request-headers': headers,
});
const CORS_NAMES = [
  'access-control-allow-origin', 'access-control-allow-methods', 'access-control-allow-headers', 'access-control-allow-credentials', 'access-control-max-age',
  'access-control-expose-headers',
];
const corsHeaders = (headers: Record<string, unknown>) => Object.fromEntries(CORS_NAMES.filter((n) => n in headers).map((n) => [n, headers[n]]));

describeWithServices('CORS', () => {
  let upstream: EchoUpstream;
  let gw: TestGateway;

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    // An upstream with a CORS policy of its own, which the gateway's must replace.
    upstream.handle = (req, res) => {
      if (!req.url?.includes('own-cors')) return false;
      res.writeHead(200, { 'content-type': 'application/json', 'access-control-allow-origin': '*', 'access-control-allow-credentials': 'true', vary: 'Accept-Encoding' });
      res.end('{}');
      return true;
    };
    gw = await startTestGateway(testConfigFromYaml(docsExample('browsers-and-cors', 'cors'), { APP_URL: upstream.url }));
  });

  afterAll(async () => {
    await gw?.close();
    await upstream?.close();
    await closeSql();
  });

  it('answers a preflight on an own endpoint with 204 and the policy, for an allowed origin', async () => {
    const res = await gw.request('OPTIONS', '/api/v1/auth/login', { headers: preflight(APP, 'POST', 'content-type') });
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    expect(res.headers.vary).toBe('Origin');
    expect(corsHeaders(res.headers)).toEqual({
      'access-control-allow-origin': APP,
      'access-control-allow-methods': 'POST',
      'access-control-allow-headers': 'authorization, content-type, x-api-key',
      'access-control-max-age': '600',
    });
  });

  it('answers a preflight on a guarded route before any guard: 204 with the route\'s methods, and the upstream never sees it', async () => {
    const m = marker();
    const res = await gw.request('OPTIONS', `/api/v1/races/${m}`, { headers: preflight(DEV, 'POST') });
    expect(res.status).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe(DEV);
    expect(res.headers['access-control-allow-methods']).toBe('GET, POST, HEAD');
    expect(upstream.count(m)).toBe(0);
  });

  it('answers a preflight from another origin 204 without the policy, so the browser stops there', async () => {
    for (const path of ['/api/v1/auth/login', `/api/v1/races/${marker()}`]) {
      const res = await gw.request('OPTIONS', path, { headers: preflight(EVIL, 'POST') });
      expect(res.status).toBe(204);
      expect(res.headers.vary).toBe('Origin');
      expect(corsHeaders(res.headers)).toEqual({});
    }
    // `null` (sandboxed frames, file:// pages) is nobody's origin.
    const sandboxed = await gw.request('OPTIONS', '/api/v1/auth/login', { headers: preflight('null', 'POST') });
    expect(corsHeaders(sandboxed.headers)).toEqual({});
  });

  it('lets the page read the gateway\'s own errors: 401, 403, 429, 404 and 405 carry the CORS headers', async () => {
    const expected = { 'access-control-allow-origin': APP, 'access-control-expose-headers': 'x-request-id, retry-after' };
    const unauthenticated = await gw.get(`/api/v1/races/${marker()}`, { headers: { origin: APP } });
    expect(unauthenticated.status).toBe(401);
    expect(unauthenticated.json).toEqual({ error: 'Token invalide ou expiré' });
    expect(corsHeaders(unauthenticated.headers)).toEqual(expected);
    // An error's body depends on Accept too (problem details on request, CONTRACT §20).
    expect(unauthenticated.headers.vary).toBe('Origin, Accept');

    const user = await makeUser(gw);
    const first = await gw.get(`/api/v1/races/${marker()}`, { headers: { origin: APP, ...bearer(user.access) } });
    expect(first.status).toBe(200);
    const limited = await gw.get(`/api/v1/races/${marker()}`, { headers: { origin: APP, ...bearer(user.access) } });
    expect(limited.status).toBe(429);
    expect(limited.json.error).toBe('Limite quotidienne atteinte (plan free: 1 course/jour)');
    expect(corsHeaders(limited.headers)).toEqual(expected);

    const forbidden = await gw.post('/api/v1/user/api-token', {}, { headers: { origin: APP, ...bearer(user.access) } });
    expect(forbidden.status).toBe(403);
    expect(forbidden.json.upgrade_url).toBe('/api/v1/subscription/upgrade');
    expect(corsHeaders(forbidden.headers)).toEqual(expected);

    for (const [method, path, status] of [['GET', `/nowhere/${marker()}`, 404], ['DELETE', `/api/v1/races/${marker()}`, 405]] as const) {
      const res = await gw.request(method, path, { headers: { origin: APP } });
      expect(res.status).toBe(status);
      expect(corsHeaders(res.headers)).toEqual(expected);
    }
  });

  it('replaces the upstream\'s own CORS headers with the gateway\'s, and keeps its Vary values beside Origin', async () => {
    const ok = await gw.get(`/api/v1/widgets/own-cors/${marker()}`, { headers: { origin: DEV } });
    expect(ok.status).toBe(200);
    // The route's override: any origin, reflected; no credentials (the upstream said true).
    expect(corsHeaders(ok.headers)).toEqual({ 'access-control-allow-origin': DEV, 'access-control-expose-headers': 'x-request-id, retry-after' });
    expect(ok.headers.vary).toBe('Accept-Encoding, Origin');
    const other = await gw.get(`/api/v1/widgets/own-cors/${marker()}`, { headers: { origin: EVIL } });
    expect(other.headers['access-control-allow-origin']).toBe(EVIL);
    const refusedElsewhere = await gw.get(`/api/v1/races/${marker()}`, { headers: { origin: EVIL } });
    expect(corsHeaders(refusedElsewhere.headers)).toEqual({});
  });

  it('adds only Vary to a request without Origin (a server, curl), and passes the Origin on to the upstream', async () => {
    const m = marker();
    const plain = await gw.get(`/api/v1/widgets/${m}`);
    expect(plain.status).toBe(200);
    expect(plain.headers.vary).toBe('Origin');
    expect(corsHeaders(plain.headers)).toEqual({});
    await gw.get(`/api/v1/widgets/${m}`, { headers: { origin: APP } });
    expect(upstream.last(m)!.headers.origin).toBe(APP);
  });

  it('answers credentials: true with Allow-Credentials on preflights and answers; the override keeps the global values it does not name', async () => {
    const yaml = `
cors: { origins: ["${APP}"], credentials: true, maxAge: 90s, exposeHeaders: [] }
upstreams: { app: { url: "${upstream.url}" } }
routes:
  - { path: /shared, upstream: app, auth: none }
  - { path: /partner, upstream: app, auth: none, cors: { origins: ["${DEV}"] } }
`;
    const own = await startTestGateway(testConfigFromYaml(yaml));
    try {
      const pre = await own.request('OPTIONS', '/partner/x', { headers: preflight(DEV, 'PUT') });
      expect(corsHeaders(pre.headers)).toEqual({
        'access-control-allow-origin': DEV,
        'access-control-allow-methods': 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS',
        'access-control-allow-headers': 'authorization, content-type, x-api-key',
        'access-control-allow-credentials': 'true',
        'access-control-max-age': '90',
      });
      expect(corsHeaders((await own.request('OPTIONS', '/partner/x', { headers: preflight(APP, 'PUT') })).headers)).toEqual({});
      const shared = await own.get('/shared/x', { headers: { origin: APP } });
      expect(corsHeaders(shared.headers)).toEqual({ 'access-control-allow-origin': APP, 'access-control-allow-credentials': 'true' });
      // Own endpoints follow the global policy, not a route's.
      expect(corsHeaders((await own.request('OPTIONS', '/api/v1/auth/refresh', { headers: preflight(DEV, 'POST') })).headers)).toEqual({});
    } finally {
      await own.close();
    }
  });

  it('lets the page read the auth rate limit\'s 429 and its Retry-After', async () => {
    // A Redis prefix of its own: the limit counts per client address, and every test here is 127.0.0.1.
    const own = await startTestGateway(testConfig({ cors: { origins: [APP] }, auth: { rateLimit: { max: 1, window: '1m' } }, storage: { redisKeyPrefix: ownRedisPrefix('cors') } }));
    try {
      const login = () => own.post('/api/v1/auth/login', { email: 'nobody@example.test', password: 'x' }, { headers: { origin: APP } });
      expect((await login()).status).toBe(401);
      const limited = await login();
      expect(limited.status).toBe(429);
      expect(limited.json).toEqual({ error: 'Trop de tentatives, réessayez plus tard' });
      expect(limited.headers['retry-after']).toBeDefined();
      expect(corsHeaders(limited.headers)).toEqual({ 'access-control-allow-origin': APP, 'access-control-expose-headers': 'x-request-id, retry-after' });
      // A preflight is never counted: the browser sends one before each real request.
      expect((await own.request('OPTIONS', '/api/v1/auth/login', { headers: preflight(APP, 'POST') })).status).toBe(204);
    } finally {
      await own.close();
    }
  });

  it('takes a changed policy on reload', async () => {
    const own = await startTestGateway(testConfig({ cors: { origins: [APP] }, upstreams: { app: { url: upstream.url } }, routes: [{ path: '/r', upstream: 'app', auth: 'none' }] }));
    try {
      expect((await own.get('/r/x', { headers: { origin: DEV } })).headers['access-control-allow-origin']).toBeUndefined();
      const next = testConfig({ cors: { origins: [APP, DEV] }, upstreams: { app: { url: upstream.url } }, routes: [{ path: '/r', upstream: 'app', auth: 'none' }] });
      expect(applyConfig(own.services, next).applied).toEqual(['cors.origins']);
      expect((await own.get('/r/x', { headers: { origin: DEV } })).headers['access-control-allow-origin']).toBe(DEV);
    } finally {
      await own.close();
    }
  });
});

describeWithServices('without cors', () => {
  let upstream: EchoUpstream;
  let gw: TestGateway;
  beforeAll(async () => {
    upstream = await startEchoUpstream();
    gw = await startTestGateway(testConfig({ upstreams: { app: { url: upstream.url } }, routes: [{ path: '/open', upstream: 'app', auth: 'none' }, { path: '/closed', upstream: 'app' }] }));
  });
  afterAll(async () => {
    await gw?.close();
    await upstream?.close();
  });

  it('adds nothing, and an OPTIONS request goes to its route as before (an upstream may answer CORS itself)', async () => {
    const m = marker();
    const open = await gw.request('OPTIONS', `/open/${m}`, { headers: preflight(APP, 'POST') });
    expect(open.status).toBe(200);
    expect(upstream.count(m)).toBe(1);
    expect(open.headers.vary).toBeUndefined();
    const closed = await gw.request('OPTIONS', `/closed/${marker()}`, { headers: preflight(APP, 'POST') });
    expect(closed.status).toBe(401);
    expect(corsHeaders(closed.headers)).toEqual({});
  });
});

describe('cors settings', () => {
  const problems = configProblems;

  it('refuses "*" with credentials, globally or through a route\'s override', () => {
    expect(problems('cors: { origins: ["*"], credentials: true }')).toEqual(['cors.origins: "*" cannot be used with credentials: true (browsers refuse it): list the origins']);
    expect(problems(`
cors: { origins: ["${APP}"], credentials: true }
upstreams: { app: { url: "http://127.0.0.1:1" } }
routes: [{ path: /x, upstream: app, cors: { origins: ["*"] } }]`)).toEqual(['routes[0].cors.origins: "*" cannot be used with credentials: true (browsers refuse it): list the origins']);
  });

  it('reads origins as browsers send them, and refuses what is not an origin', () => {
    const config = parseConfig('cors: { origins: ["HTTPS://App.Example.com:443", "http://localhost:5173/"] }', 'gateway.yaml');
    expect(config.cors!.origins).toEqual([APP, DEV]);
    expect(problems('cors: { origins: ["https://app.example.com/path"] }')[0]).toMatch(/^cors\.origins\[0\]: expected an origin such as https:\/\/app\.example\.com/);
    expect(problems('cors: { origins: ["app.example.com"] }')).toHaveLength(1);
    expect(problems('cors: { origins: ["null"] }')).toHaveLength(1);
    expect(problems('cors: { origins: ["*", "https://a.example"] }')).toEqual(['cors.origins: expected "*" alone, or a list of origins without it']);
    expect(problems('cors: { origins: [] }')).toHaveLength(1);
  });

  it('asks a route\'s override for origins when there is no global policy', () => {
    expect(problems(`
upstreams: { app: { url: "http://127.0.0.1:1" } }
routes: [{ path: /x, upstream: app, cors: { credentials: true } }]`)).toEqual(['routes[0].cors.origins: expected origins (there is no global cors to take them from)']);
  });
});
