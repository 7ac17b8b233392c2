// Adversarial requests on the proxy path (CONTRACT §2, §3; README "Routes, guards and headers"):
// request targets, headers and credentials crafted so that the gateway would decide on one thing
// and the upstream receive another.
import { createHash, randomBytes } from 'node:crypto';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  bearer, closeSql, describeWithServices, makeUser, marker, sql, startTestGateway, testConfig, type TestGateway, type TestUser,
} from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream, type Hit } from '../helpers/upstream.js';

describeWithServices('adversarial requests on the proxy path', () => {
  let upstream: EchoUpstream;
  let gw: TestGateway;
  let pro: TestUser;
  let apiKey: string;

  /** Every request the upstream got whose target or x-marker header carries m. */
  const reached = (m: string): Hit[] => upstream.hits.filter((h) => h.url.includes(m) || h.headers['x-marker'] === m);

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    gw = await startTestGateway(testConfig({
      upstreams: { app: { url: upstream.url } },
      routes: [
        { path: '/races', upstream: 'app', methods: ['GET', 'POST'], auth: 'none' },
        { path: '/races/premium', upstream: 'app', auth: 'required', plans: ['premium', 'pro'] },
        { path: '/open', upstream: 'app', auth: 'none' },
        { path: '/maybe', upstream: 'app', auth: 'optional' },
        { path: '/private', upstream: 'app', auth: 'required' },
      ],
    }));
    pro = await makeUser(gw, { plan: 'pro' });
    apiKey = `gw_${randomBytes(24).toString('base64url')}`;
    await sql('INSERT INTO api_tokens (user_id, token_hash) VALUES ($1, $2)', [pro.id, createHash('sha256').update(apiKey).digest('hex')]);
  });

  afterAll(async () => {
    await gw?.close();
    await upstream?.close();
    await closeSql();
  });

  it('keeps a gateway token from the upstream whatever scheme, or none, the client sent it with', async () => {
    // A client that leaves out `Bearer ` or writes another scheme still hands the upstream a
    // credential it could replay against the gateway: the same token in a proper Bearer header is
    // dropped (CONTRACT §3, "when it carried the gateway's own token").
    const cases: Array<[string, Record<string, string>]> = [
      ['/open', { authorization: pro.access }],
      ['/open', { authorization: `Token ${pro.refresh}` }],
      ['/open', { authorization: `Bearer ${pro.access},` }],
      ['/maybe', { authorization: `JWT ${pro.access}` }],
      ['/private', { authorization: pro.refresh, 'x-api-key': apiKey }],
    ];
    for (const [route, headers] of cases) {
      const m = marker();
      const res = await gw.get(`${route}/${m}`, { headers });
      expect(res.status, JSON.stringify(headers)).toBe(200);
      expect(reached(m)).toHaveLength(1);
      expect(reached(m)[0]!.headers.authorization, JSON.stringify(headers)).toBeUndefined();
    }
    // A JWT that is not the gateway's stays the upstream's business, whatever its scheme.
    const foreign = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl';
    for (const authorization of [`Token ${foreign}`, foreign]) {
      const m = marker();
      await gw.get(`/open/${m}`, { headers: { authorization } });
      expect(reached(m)[0]!.headers.authorization).toBe(authorization);
    }
  });

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
      const res = await gw.post(path, { m }, { headers });
      expect({ status: res.status, json: res.json }, `${path} ${JSON.stringify(headers)}`).toEqual({ status: 405, json: { error: 'Méthode non autorisée' } });
      expect(res.headers.allow).toBe(path.startsWith('/races') ? 'GET, POST, HEAD' : 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS');
    }
    expect(reached(m)).toEqual([]);
    // An override the route does take passes through unchanged.
    const n = marker();
    const ok = await gw.post(`/races/${n}?_method=get`, { n }, { headers: { 'x-http-method-override': 'GET' } });
    expect(ok.status).toBe(200);
    expect(reached(n).map((h) => [h.method, h.url, h.headers['x-http-method-override']])).toEqual([['POST', `/races/${n}?_method=get`, 'GET']]);
  });

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

  it('still admits and forwards the ordinary requests next to those', async () => {
    const m = marker();
    const ok = await gw.get(`/races/premium/${m}?q=1`, { headers: bearer(pro.access) });
    expect(ok.status).toBe(200);
    expect(reached(m).map((h) => [h.url, h.headers['x-user-id'], h.headers.authorization])).toEqual([[`/races/premium/${m}?q=1`, String(pro.id), undefined]]);
  });
});
