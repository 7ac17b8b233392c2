// Requests crafted so that the gateway would decide on one route and the upstream serve another,
// or that would wear the gateway down (CONTRACT §2, §3; README "Routes, guards and headers"): a
// route over the gateway's own endpoints, dot segments, case and ;parameters, encoded separators,
// `#`, method overrides, and long paths by the thousand. Two instances on one database and one
// with a `/` route, before a real upstream.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEchoUpstream, type EchoUpstream, type Hit } from '../helpers/echoUpstream.js';
import {
  bearer, closeSql, describeWithServices, makeUser, marker, startTestGateway, startTwoGateways, testConfig, type TestGateway, type TestUser,
} from '../helpers/gateway.js';

describeWithServices('requests crafted to get around the route table', () => {
  let upstream: EchoUpstream;
  let a: TestGateway;
  let b: TestGateway;
  let rootGw: TestGateway;
  let pro: TestUser;

  /** Every request the upstream got whose target or x-marker header carries m. */
  const reached = (m: string): Hit[] => upstream.hits.filter((h) => h.url.includes(m) || h.headers['x-marker'] === m);

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    [a, b] = await startTwoGateways(testConfig({
      upstreams: { app: { url: upstream.url } },
      routes: [
        { path: '/races', upstream: 'app', methods: ['GET', 'POST'], auth: 'none' },
        { path: '/races/premium', upstream: 'app', auth: 'required', plans: ['premium', 'pro'] },
        { path: '/rw', upstream: 'app', auth: 'none', rewritePrefix: '/inner/v2' },
        { path: '/open', upstream: 'app', auth: 'none' },
        { path: '/public', upstream: 'app', auth: 'none' },
        { path: '/paid', upstream: 'app', auth: 'required', plans: ['pro'] },
        { path: '/api/v1', upstream: 'app', auth: 'none' },
      ],
    }));
    rootGw = await startTestGateway(testConfig({ upstreams: { app: { url: upstream.url } }, routes: [{ path: '/', upstream: 'app', auth: 'none' }] }));
    pro = await makeUser(a, { plan: 'pro' });
  });

  afterAll(async () => {
    await Promise.all([a?.close(), b?.close(), rootGw?.close()]);
    await upstream?.close();
    await closeSql();
  });

  describe('own endpoints', () => {
    it('never lets a route shadow the gateway\'s own endpoints', async () => {
      const m = marker();
      for (const gw of [a, rootGw]) {
        const login = await gw.post('/api/v1/auth/login', {}, { headers: { 'x-marker': m } });
        expect(login.status).toBe(400);
        expect(login.json).toEqual({ error: 'Email et mot de passe requis' });
        const health = await gw.get('/healthz', { headers: { 'x-marker': m } });
        expect(health.json).toEqual({ status: 'ok' });
        const me = await gw.get('/api/v1/user/me', { headers: { 'x-marker': m } });
        expect(me.json).toEqual({ error: 'Token invalide ou expiré' });
        // Another method on an own path is the gateway's answer too, never the upstream's.
        const get = await gw.get('/api/v1/auth/login', { headers: { 'x-marker': m } });
        expect(get.status).toBe(405);
        expect(get.json).toEqual({ error: 'Méthode non autorisée' });
        expect(get.headers.allow).toBe('POST');
        // Dot segments reach the own endpoint, not the upstream.
        const dotted = await gw.post('/api/v1/x/../auth/login', {}, { headers: { 'x-marker': m } });
        expect(dotted.json).toEqual({ error: 'Email et mot de passe requis' });
        // The rest of the own endpoints, one request each.
        expect(await gw.get('/readyz', { headers: { 'x-marker': m } })).toMatchObject({ status: 200, json: { status: 'ok' } });
        const jwks = await gw.get('/.well-known/jwks.json', { headers: { 'x-marker': m } });
        expect(jwks.status).toBe(200);
        expect(jwks.json.keys).toEqual(expect.any(Array));
        const own = [
          ['POST', '/api/v1/user/api-token', 401, 'Token invalide ou expiré'],
          ['DELETE', '/api/v1/user/webhook', 401, 'Token invalide ou expiré'],
          ['POST', '/api/v1/auth/refresh', 400, 'refresh_token manquant'],
        ] as const;
        for (const [method, path, status, error] of own) {
          const res = await gw.request(method, path, { json: {}, headers: { 'x-marker': m } });
          expect({ status: res.status, json: res.json }, `${method} ${path}`).toEqual({ status, json: { error } });
        }
      }
      expect(upstream.hits.filter((h) => h.headers['x-marker'] === m)).toEqual([]);
      // What is not an own endpoint still goes to the route.
      const other = await rootGw.get(`/api/v1/${m}`);
      expect(other.status).toBe(200);
      expect(upstream.count(m)).toBe(1);
    });
  });

  describe('path normalization', () => {
    it('matches and guards dot-segment paths as their normalized form', async () => {
      const m = marker();
      for (const raw of [`/public/../paid/${m}`, `/public/%2e%2e/paid/${m}`, `/public/.%2E/paid/${m}`, `/public//..//paid/${m}`, `/public/./../p%61id/${m}`]) {
        const res = await a.get(raw);
        expect(res.status, raw).toBe(401);
        expect(res.json).toEqual({ error: 'Token invalide ou expiré' });
      }
      expect(upstream.count(m)).toBe(0);
      const ok = await b.get(`/public/../paid/${m}?x=1`, { headers: bearer(pro.access) });
      expect(ok.status).toBe(200);
      expect(upstream.last(m)!.url).toBe(`/paid/${m}?x=1`);
      expect(upstream.last(m)!.headers['x-user-plan']).toBe('pro');
    });

    it('guards every spelling that a case-folding or servlet upstream reads as the route', async () => {
      // /races is public and /races/premium paid: Express or ASP.NET serve /races/PREMIUM as the
      // paid route, Tomcat or Spring serve /races/premium;x/... as it.
      const m = marker();
      const spellings = [`/races/PREMIUM/${m}`, `/RACES/Premium/${m}`, `/races/premium;jsessionid=1/${m}`, `/races;a=1/premium;b=2/${m}`, `/races/%50remium/${m}`,
        // A segment of parameters alone: Tomcat drops `;x`, then folds the `//` it leaves.
        `/races/;x/premium/${m}`, `/races/;/premium/${m}`];
      for (const raw of spellings) {
        const res = await a.get(raw);
        expect(res.status, raw).toBe(401);
        expect(res.json).toEqual({ error: 'Token invalide ou expiré' });
      }
      expect(upstream.count(m)).toBe(0);
      // Allowed through, the path reaches the upstream as the client wrote it.
      const ok = await b.get(`/races/PREMIUM;v=1/${m}?q=1`, { headers: bearer(pro.access) });
      expect(ok.status).toBe(200);
      expect(upstream.last(m)!.url).toBe(`/races/PREMIUM;v=1/${m}?q=1`);
      expect(upstream.last(m)!.headers['x-user-plan']).toBe('pro');
      // Every route is matched so: the public one's methods, and rewritePrefix replacing the prefix however it was written.
      expect((await a.request('DELETE', `/RACES/${m}`)).status).toBe(405);
      expect((await a.get(`/RW;v=2/${m}/page`)).json.url).toBe(`/inner/v2/${m}/page`);
      expect((await b.get(`/Rw;v=2?${m}`)).json.url).toBe(`/inner/v2?${m}`);
      expect((await b.get(`/;a/rw/;b/${m}`)).json.url).toBe(`/inner/v2/;b/${m}`);
      expect(upstream.count(m)).toBe(3); // count() reads paths: one request has the marker in its query only
    });

    it('refuses paths an upstream could split differently (encoded slash, ..;, #)', async () => {
      const m = marker();
      const before = upstream.hits.length;
      // A `#` ends the path for the proxy's URL parser: `/races/premium#` would go out as the paid
      // route's path after matching the public /races (the marker, after it, would not reach the upstream).
      for (const raw of [
        `/public%2F..%2Fpaid/${m}`, `/public%2fpaid/${m}`, `/public%5Cpaid/${m}`, `/public/..;/paid/${m}`, `/public\\..\\paid/${m}`,
        `/races/premium#${m}`, `/races/premium#?${m}`, `/races/x#/../premium/${m}`,
      ]) {
        const res = await a.get(raw);
        expect(res.status, raw).toBe(400);
        expect(res.json).toEqual({ error: 'Requête invalide' });
      }
      expect(upstream.hits.slice(before)).toEqual([]);
    });
  });

  describe('method overrides', () => {
    it('answers 405 to a method override naming a method the route does not take', async () => {
      // Symfony and Laravel (X-HTTP-Method-Override, ?_method=), Express's method-override and many
      // more run the overriding method instead of the request line's: a POST carrying DELETE would
      // reach a route declared for GET and POST only, or a TRACE one the gateway never forwards.
      const m = marker();
      const cases: Array<[string, Record<string, string>]> = [
        [`/races/${m}`, { 'x-http-method-override': 'DELETE' }],
        [`/races/${m}`, { 'x-http-method': 'put' }],
        [`/races/${m}`, { 'x-method-override': 'PATCH' }],
        [`/races/${m}`, { X_HTTP_Method_Override: 'DELETE' }],
        [`/races/${m}?_method=DELETE`, {}],
        [`/races/${m}?x=1&%5Fmethod=put`, {}],
        [`/open/${m}`, { 'x-http-method-override': 'TRACE' }],
      ];
      for (const [path, headers] of cases) {
        const res = await a.post(path, { m }, { headers });
        expect({ status: res.status, json: res.json }, `${path} ${JSON.stringify(headers)}`).toEqual({ status: 405, json: { error: 'Méthode non autorisée' } });
        expect(res.headers.allow).toBe(path.startsWith('/races') ? 'GET, POST, HEAD' : 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS');
      }
      expect(reached(m)).toEqual([]);
      // An override the route does take passes through unchanged.
      const n = marker();
      const ok = await a.post(`/races/${n}?_method=get`, { n }, { headers: { 'x-http-method-override': 'GET' } });
      expect(ok.status).toBe(200);
      expect(reached(n).map((h) => [h.method, h.url, h.headers['x-http-method-override']])).toEqual([['POST', `/races/${n}?_method=get`, 'GET']]);
    });
  });

  describe('resources', () => {
    it('does not hold on to every distinct long path it is sent', async () => {
      // Each distinct path used to be kept (up to 10,000 of them) in the own-endpoint lookup cache:
      // paths of ~16 kB, the most Node's parser takes, pinned ~160 MB per instance.
      setFlagsFromString('--expose-gc');
      const gc = runInNewContext('gc') as () => void;
      const quiet = await startTestGateway(testConfig({ upstreams: { app: { url: upstream.url } }, routes: [{ path: '/open', upstream: 'app', auth: 'none' }] }), { logLevel: 'warn' });
      try {
        const filler = 'a'.repeat(12_000);
        const send = async (i: number) => {
          const res = await quiet.get(`/nowhere/${i}/${filler}`);
          expect(res.status).toBe(404);
        };
        for (let i = 0; i < 50; i++) await send(i); // warm up
        gc();
        const before = process.memoryUsage().heapUsed;
        for (let i = 50; i < 3050; i++) await send(i);
        gc();
        const grown = process.memoryUsage().heapUsed - before;
        // 3,000 paths of 12 kB are 36 MB; a bounded cache of short entries holds well under 8 MB.
        expect(grown).toBeLessThan(8 * 1024 * 1024);
      } finally {
        await quiet.close();
      }
    });
  });

  it('still admits and forwards the ordinary requests next to those', async () => {
    const m = marker();
    const ok = await a.get(`/races/premium/${m}?q=1`, { headers: bearer(pro.access) });
    expect(ok.status).toBe(200);
    expect(reached(m).map((h) => [h.url, h.headers['x-user-id'], h.headers.authorization])).toEqual([[`/races/premium/${m}?q=1`, String(pro.id), undefined]]);
  });
});
