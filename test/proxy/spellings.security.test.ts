// Spellings of guarded paths and own endpoints (issue 16, CONTRACT §8), against an upstream that
// routes like Rails: `/x.json` runs the `/x` action. Every spelling either gets the guards of the
// route it names or is refused; none reaches an upstream with weaker guards; no spelling of an own
// endpoint is ever proxied, not even by a route on `/`.
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bearer, closeSql, describeWithServices, makeUser, startTestGateway, testConfig, usage, type TestGateway } from '../helpers/gateway.js';
import { startRailsUpstream, type RailsUpstream } from '../helpers/railsUpstream.js';
import { fuzzRuns } from '../helpers/fuzz.js';

const GUARDED = ['/api/v1/public/admin', '/api/v1/reports', '/api/v1/races'];
const OWN = ['/api/v1/auth/login', '/api/v1/auth/register', '/api/v1/user/me', '/healthz', '/.well-known/jwks.json'];

describeWithServices('spellings of guarded paths and own endpoints', () => {
  let rails: RailsUpstream;
  let gw: TestGateway;

  beforeAll(async () => {
    rails = await startRailsUpstream();
    gw = await startTestGateway(testConfig({
      upstreams: { rails: { url: rails.url } },
      routes: [
        { path: '/', upstream: 'rails', auth: 'none' },
        { path: '/api/v1', upstream: 'rails', auth: 'none' },
        { path: '/api/v1/public', upstream: 'rails', auth: 'none' },
        { path: '/api/v1/public/admin', upstream: 'rails', auth: 'required' },
        { path: '/api/v1/reports', upstream: 'rails', auth: 'required', plans: ['premium', 'pro'] },
        { path: '/api/v1/races', upstream: 'rails', auth: 'required', dailyLimit: true },
      ],
    }), { logLevel: 'warn' });
  });

  afterAll(async () => {
    await gw?.close();
    await rails?.close();
    await closeSql();
  });

  /** The actions the upstream ran while fn ran. */
  async function ranDuring(fn: () => Promise<unknown>): Promise<string[]> {
    const before = rails.hits.length;
    await fn();
    return rails.hits.slice(before).map((h) => h.action);
  }

  it('gives a format suffix on a guarded path the guards of that path (401), and the upstream never runs its action', async () => {
    for (const spelling of ['admin.json', 'admin.xml', 'admin%2ejson', 'admin.json/', 'Admin.JSON', 'admin.v2.json', 'admin.json;x']) {
      const ran = await ranDuring(async () => {
        const res = await gw.get(`/api/v1/public/${spelling}`);
        expect(res.status, spelling).toBe(401);
        expect(res.json, spelling).toEqual({ error: 'Token invalide ou expiré' });
      });
      expect(ran, spelling).toEqual([]);
    }
    // A suffix on a public path stays public: the shorter route's own actions are served.
    expect(await ranDuring(() => gw.get('/api/v1/public/list.json'))).toEqual(['/api/v1/public/list']);
  });

  it('applies the plan guard to /reports.json and the daily limit to /races.json', async () => {
    const free = await makeUser(gw);
    const pro = await makeUser(gw, { plan: 'pro' });
    const refused = await gw.get('/api/v1/reports.json', { headers: bearer(free.access) });
    expect(refused.status).toBe(403);
    expect(refused.json).toMatchObject({ error: 'Plan insuffisant', current_plan: 'free' });
    expect(await ranDuring(() => gw.get('/api/v1/reports.json', { headers: bearer(pro.access) }))).toEqual(['/api/v1/reports']);

    expect((await gw.get('/api/v1/races.json')).status).toBe(401);
    expect(rails.ran('/api/v1/races')).toHaveLength(0);
    expect((await gw.get('/api/v1/races.json', { headers: bearer(free.access) })).status).toBe(200);
    const second = await gw.get('/api/v1/races.xml/', { headers: bearer(free.access) });
    expect(second.status).toBe(429);
    expect(rails.ran('/api/v1/races')).toHaveLength(1);
    expect((await usage(free.id)).daily_usage).toBe(1);
  });

  it('never proxies another spelling of an own endpoint, so credentials in its body never reach an upstream', async () => {
    for (const spelling of ['/API/V1/AUTH/LOGIN', '/api/v1/auth/login/', '/api/v1/auth/login;x', '/api/v1/auth/login.json', '/Api/V1/Auth/Login/', '/api/v1/AUTH/register']) {
      const ran = await ranDuring(async () => {
        const res = await gw.post(spelling, { email: 'ada@example.test', password: 'correct horse battery' });
        expect(res.status, spelling).toBe(404);
        expect(res.json, spelling).toEqual({ error: 'Route introuvable' });
      });
      expect(ran, spelling).toEqual([]);
    }
    expect(await ranDuring(async () => expect((await gw.get('/HEALTHZ')).status).toBe(404))).toEqual([]);
    // The endpoint itself, spelled as documented, is still the gateway's.
    expect((await gw.post('/api/v1/auth/login', { email: 'nobody@example.test', password: 'x' })).status).toBe(401);
  });

  it('holds for every spelling: case, suffixes, ;params, dot segments, escapes, trailing and doubled slashes', async () => {
    const segmentOf = (path: string) => path.split('/').filter(Boolean);
    const spelling = fc.record({
      target: fc.constantFrom(...GUARDED, ...OWN),
      tail: fc.constantFrom('', '/x', '/7.json'),
      upper: fc.array(fc.boolean(), { minLength: 48, maxLength: 48 }),
      suffix: fc.constantFrom('', '.json', '.xml', '.JSON', '.tar.gz', '%2ejson', '%2Exml'),
      params: fc.constantFrom('', ';x', ';jsessionid=1'),
      paramsFirst: fc.boolean(),
      trailing: fc.constantFrom('', '/', '//'),
      dotSegment: fc.boolean(),
      escape: fc.boolean(),
      doubled: fc.boolean(),
    }).map((s) => {
      const segments = segmentOf(s.target);
      if (s.escape) segments[0] = segments[0]!.replace(/[a-z]/, (c) => `%${c.charCodeAt(0).toString(16)}`);
      const last = segments.length - 1;
      segments[last] = s.paramsFirst ? `${segments[last]}${s.params}${s.suffix}` : `${segments[last]}${s.suffix}${s.params}`;
      if (s.dotSegment) segments.splice(last, 0, 'zz', '..');
      let path = `/${segments.join(s.doubled ? '//' : '/')}`;
      path = [...path].map((c, i) => (s.upper[i % 48] ? c.toUpperCase() : c)).join('').replace(/%([0-9A-F]{2})/gi, (m) => m.toUpperCase());
      return { target: s.target, path: `${path}${s.tail}${s.trailing}` };
    });

    await fc.assert(fc.asyncProperty(spelling, async ({ target, path }) => {
      const ran = await ranDuring(async () => {
        // Credentials in the body of the own endpoints' POSTs; a GET carries none: Node would send
        // its body unframed, as the start of another request on the kept-alive connection.
        const post = /login|register/.test(target);
        const res = await gw.request(post ? 'POST' : 'GET', path, post ? { json: { email: 'ada@example.test', password: 'correct horse battery' } } : {});
        expect(res.status, path).toBeLessThan(500);
      });
      // What each action means to upstreams that fold case and drop ;params (Express, servlets).
      const readings = ran.map((action) => action.toLowerCase().replace(/;[^/]*/g, '').replace(/\/{2,}/g, '/'));
      for (const reading of readings) {
        for (const guarded of GUARDED) expect(reading === guarded || reading.startsWith(`${guarded}/`), `${path} reached ${reading} unguarded`).toBe(false);
        for (const own of OWN) expect(reading, `${path} proxied as ${reading}`).not.toBe(own);
      }
    }), fuzzRuns(300));
  });
});
