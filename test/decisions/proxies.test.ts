// Decisions through real proxies (CONTRACT §11, docs/decisions.md): nginx with auth_request and
// Caddy with forward_auth, started here on loopback ports with the configurations the docs ship
// (only their example ports changed: see withPorts), in front of an echo upstream and two gateway
// instances running the docs' gateway.yaml. What a client and the upstream see, through the proxy.
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Proxy } from '../helpers/globalSetup.js';
import { docsBlock, docsExample } from '../helpers/docs.js';
import {
  bearer, closeSql, makeUser, marker, newEmail, newPassword, startTestGateway, testConfigFromYaml, testServices, TEST_JWT_SECRET, usage, type TestGateway,
} from '../helpers/gateway.js';
import { request, type HttpResponse, type RequestOptions } from '../helpers/http.js';
import { sparePort } from '../helpers/ports.js';
import { describeWithProxy, startCaddy, startNginx, withPorts, type RunningProxy } from '../helpers/proxies.js';
import { startEchoUpstream, type EchoUpstream, type Hit } from '../helpers/echoUpstream.js';

const UPGRADE_URL = '/api/v1/subscription/upgrade';
const COPIED = ['x-user-id', 'x-user-plan', 'x-user-email', 'x-auth-method', 'x-user-key-id', 'x-gateway-assertion'];
// What a client may send to pass as someone else: the decision refuses any of them nginx hands it
// (CONTRACT §33); Caddy's configuration removes them before it asks. Both drop `_` names.
const SPOOFED = { 'X-User-Key-Id': '1', 'X-User-Id': '1', 'X-User-Plan': 'pro', 'X-User-Email': 'boss@example.test', 'X-Auth-Method': 'api-key', 'X-Gateway-Assertion': 'forged', X_User_Id: '1' };
const SPOOFED_EXTRA = { 'X-User-Role': 'admin' };

/**
 * The identity headers the upstream received (any x-user-*, the copied ones, any `_` name). An
 * empty x-user-key-id (the gateway's answer for a request without a key, copied as is by a proxy
 * that copies empty values) says "no key" as its absence does, and is left out.
 */
const identityAt = (hit: Hit) => Object.fromEntries(Object.entries(hit.headers)
  .filter(([name]) => COPIED.includes(name) || name.startsWith('x-user-') || name.includes('_'))
  .filter(([name, value]) => !(name === 'x-user-key-id' && value === '')));

for (const proxy of ['nginx', 'caddy'] as const satisfies readonly Proxy[]) {
  describeWithProxy(proxy)(`decisions through ${proxy}`, () => {
    let upstream: EchoUpstream;
    let a: TestGateway;
    let b: TestGateway;
    let front: RunningProxy;
    const call = (method: string, path: string, options?: RequestOptions) => request(front.url, method, path, options);
    /** The JSON error the client got, with the proxy's log on failure. */
    const expectDenied = (res: HttpResponse, status: number, body: Record<string, unknown>) => {
      expect(res.status, `${res.text}\n${front.log()}`).toBe(status);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.json).toEqual(body);
    };

    beforeAll(async () => {
      upstream = await startEchoUpstream();
      // The docs' gateway.yaml, run as written: its ${DECISIONS_PORT} and ${APP_UPSTREAM} as the docs say to set them.
      const yaml = docsExample('decisions', 'decisions');
      const [portA, portB, proxyPort] = [await sparePort(), await sparePort(), await sparePort()];
      const instance = (port: number) => startTestGateway(testConfigFromYaml(yaml, {
        DECISIONS_PORT: String(port), APP_UPSTREAM: upstream.url, DATABASE_URL: testServices!.postgres, JWT_SECRET: TEST_JWT_SECRET,
      }));
      [a, b] = await Promise.all([instance(portA), instance(portB)]);
      const port = (url: string | undefined) => Number(new URL(url!).port);
      const site = withPorts(docsBlock('decisions', proxy), {
        8000: proxyPort, 8080: port(a.url), 8081: port(b.url), 9191: port(a.decisionsUrl), 9192: port(b.decisionsUrl), 3000: upstream.port,
      });
      front = await (proxy === 'nginx' ? startNginx : startCaddy)(site, proxyPort);
    });
    afterAll(async () => {
      await front?.close();
      await Promise.all([a?.close(), b?.close()]);
      await upstream?.close();
      await closeSql();
    });

    it('serves the gateway\'s own endpoints through the proxy: register and log in there', async () => {
      const email = newEmail();
      const password = newPassword();
      expect((await call('POST', '/api/v1/auth/register', { json: { email, password } })).status).toBe(201);
      const login = await call('POST', '/api/v1/auth/login', { json: { email, password } });
      expect(login.status).toBe(200);
      const me = await call('GET', '/api/v1/user/me', { headers: bearer(login.json.access_token) });
      expect(me.json).toMatchObject({ email, plan: 'free' });
      expect(upstream.hits.filter((h) => h.path.startsWith('/api/v1/auth') || h.path.startsWith('/api/v1/user'))).toEqual([]);
    });

    it('anonymous: 401 with the gateway\'s French body and WWW-Authenticate, nothing forwarded', async () => {
      const m = marker();
      const res = await call('GET', `/api/v1/reports/${m}`);
      expectDenied(res, 401, { error: 'Token invalide ou expiré' });
      expect(res.headers['www-authenticate']).toBe('Bearer realm="gateway"');
      const refused = await call('GET', `/downloads/${m}`, { headers: bearer('not.a.token') });
      expectDenied(refused, 401, { error: 'Token invalide ou expiré' });
      expect(refused.headers['www-authenticate']).toBe('Bearer realm="gateway", error="invalid_token"');
      expect(upstream.count(m)).toBe(0);
    });

    it('free user on a plans route: 403 with the required plans and upgrade_url', async () => {
      const free = await makeUser(a);
      const m = marker();
      expectDenied(await call('GET', `/api/v1/reports/${m}`, { headers: bearer(free.access) }), 403,
        { error: 'Plan insuffisant', required: ['premium', 'pro'], current_plan: 'free', upgrade_url: UPGRADE_URL });
      expect(upstream.count(m)).toBe(0);
    });

    it('404 and 405 reach the client as the gateway answered them, Allow included', async () => {
      expectDenied(await call('GET', `/nothing/${marker()}`), 404, { error: 'Route introuvable' });
      const m = marker();
      const post = await call('POST', `/api/v1/catalog/${m}`, { json: {} });
      expectDenied(post, 405, { error: 'Méthode non autorisée' });
      expect(post.headers.allow).toBe('GET, HEAD');
      expect(upstream.count(m)).toBe(0);
    });

    it('a signed-in user reaches the upstream with the identity headers and the assertion, never the credentials', async () => {
      const premium = await makeUser(a, { plan: 'premium' });
      const m = marker();
      const res = await call('GET', `/api/v1/reports/${m}?q=1`, { headers: bearer(premium.access) });
      expect(res.status, front.log()).toBe(200);
      const hit = upstream.last(m)!;
      expect(hit.url).toBe(`/api/v1/reports/${m}?q=1`);
      const { 'x-gateway-assertion': assertion, ...identity } = identityAt(hit);
      expect(identity).toEqual({ 'x-user-id': String(premium.id), 'x-user-plan': 'premium', 'x-user-email': premium.email, 'x-auth-method': 'bearer' });
      expect(decodeJwt(assertion as string)).toMatchObject({ aud: 'app', sub: String(premium.id), plan: 'premium' });
      expect(hit.headers.authorization).toBeUndefined();
    });

    it('spoofed identity headers never reach the upstream: anonymous, signed in, or with an API key', async () => {
      // nginx hands the client's headers to the decision, which refuses them (CONTRACT §33); Caddy
      // removes the client's copies before it asks (the rest of the class: reservedHeaders.test.ts).
      const m = marker();
      const anonymous = await call('GET', `/api/v1/catalog/${m}`, { headers: { ...SPOOFED, ...SPOOFED_EXTRA } });
      if (proxy === 'nginx') expectDenied(anonymous, 400, { error: 'Requête invalide' });
      else expect(anonymous.status, front.log()).toBe(200);
      expect(upstream.hits.filter((h) => h.path.includes(m)).map(identityAt)).toEqual(proxy === 'nginx' ? [] : [{}]);

      // A decision-only route: no assertion for it, so the client's copy must not survive either.
      const pro = await makeUser(b, { plan: 'pro' });
      const key = (await b.post('/api/v1/user/api-token', {}, { headers: bearer(pro.access) })).json.api_token as string;
      const [listed] = (await b.get('/api/v1/user/api-keys', { headers: bearer(pro.access) })).json.api_keys as Array<{ id: number }>;
      const d = marker();
      const spoofed = await call('GET', `/downloads/${d}`, { headers: { ...SPOOFED, 'X-API-Key': key } });
      if (proxy === 'nginx') expectDenied(spoofed, 400, { error: 'Requête invalide' });
      // With nothing spoofed, the gateway's own identity only.
      const keyed = proxy === 'nginx' ? await call('GET', `/downloads/${d}`, { headers: { X_User_Id: '1', 'X-API-Key': key } }) : spoofed;
      expect(keyed.status, front.log()).toBe(200);
      const hit = upstream.last(d)!;
      expect(identityAt(hit)).toEqual({ 'x-user-id': String(pro.id), 'x-user-plan': 'pro', 'x-user-email': pro.email, 'x-auth-method': 'api-key', 'x-user-key-id': String(listed!.id) });
      expect(hit.headers['x-api-key']).toBeUndefined();
    });

    it('a client cannot choose the path decided: its own X-Forwarded-Uri and X-Original-URI are ignored', async () => {
      const m = marker();
      const headers = { 'X-Forwarded-Uri': `/api/v1/catalog/${m}`, 'X-Original-URI': `/api/v1/catalog/${m}`, 'X-Forwarded-Method': 'GET', 'X-Original-Method': 'GET' };
      expectDenied(await call('GET', `/api/v1/reports/${m}`, { headers }), 401, { error: 'Token invalide ou expiré' });
      expect(upstream.count(m)).toBe(0);
    });

    it('the gateway\'s own endpoint spelled otherwise is refused, so a password never reaches the application', async () => {
      const m = marker();
      const res = await call('POST', `/API/V1/AUTH/LOGIN?${m}`, { json: { email: 'a@example.test', password: 'secret-password' } });
      expectDenied(res, 404, { error: 'Route introuvable' });
      expect(upstream.hits.filter((h) => h.url.includes(m))).toEqual([]);
    });

    it('a dot segment never lets an anonymous request reach the application under a guarded route', async () => {
      // The proxy forwards the path as the client sent it; Rails routes `/api/v1/reports/%2E%2E/catalog/1`
      // to a nested `reports/:report_id/catalog/:id` action and Fastify or Express read `..` as an `:id`:
      // a decision for `/api/v1/catalog/1` (auth none) would hand a premium route to anyone.
      for (const dots of ['..', '%2e%2e']) {
        const m = marker();
        const res = await call('GET', `/api/v1/reports/${dots}/catalog/${m}`);
        expect(upstream.hits.filter((h) => h.url.includes(m)).map((h) => h.url), `${dots}: ${res.status}\n${front.log()}`).toEqual([]);
        expect([400, 401]).toContain(res.status);
      }
    });

    it('a gateway token in the access_token parameter or a cookie never reaches the application; the rest does', async () => {
      const premium = await makeUser(a, { plan: 'premium' });
      const key = (await a.post('/api/v1/user/api-token', {}, { headers: bearer((await makeUser(a, { plan: 'pro' })).access) })).json.api_token as string;
      for (const [where, options, path] of [
        ['query', { headers: {} }, (m: string) => `/api/v1/reports/${m}?q=1&access_token=${premium.access}&page=2`],
        ['cookie', { headers: { cookie: `theme=dark; gw=${premium.access}; sid=abc` } }, (m: string) => `/api/v1/catalog/${m}?q=1&page=2`],
        ['refresh cookie', { headers: { cookie: `theme=dark; r=${encodeURIComponent(premium.refresh)}; sid=abc` } }, (m: string) => `/api/v1/catalog/${m}?q=1&page=2`],
        ['key in query', { headers: {} }, (m: string) => `/api/v1/catalog/${m}?q=1&api_key=${key}&page=2`],
      ] as const) {
        const m = marker();
        const headers: Record<string, string> = { ...options.headers, ...(where === 'query' ? bearer(premium.access) : {}) };
        const res = await call('GET', path(m), { headers });
        // Caddy cannot forward the cleaned query (docs/decisions.md): it refuses the request instead.
        if (proxy === 'caddy' && where.includes('query')) {
          expectDenied(res, 400, { error: 'Requête invalide' });
          expect(upstream.count(m)).toBe(0);
          continue;
        }
        expect(res.status, `${where}: ${res.text}\n${front.log()}`).toBe(200);
        const hit = upstream.last(m)!;
        expect(hit.url, where).toBe(`/api/v1/${where === 'query' ? 'reports' : 'catalog'}/${m}?q=1&page=2`);
        expect(JSON.stringify(hit.headers), where).not.toContain(premium.access);
        expect(JSON.stringify(hit.headers), where).not.toContain(key);
        if (where.includes('cookie')) expect(hit.headers.cookie, where).toBe('theme=dark; sid=abc');
        expect(hit.headers['x-gateway-clean-uri']).toBeUndefined();
        expect(hit.headers['x-gateway-clean-cookie']).toBeUndefined();
      }
      // Nothing to remove: the URI and cookies reach the application exactly as sent.
      const m = marker();
      expect((await call('GET', `/api/v1/catalog/${m}/a%20b?x=%2F&y`, { headers: { cookie: 'a=1; b=%22two%22' } })).status).toBe(200);
      expect(upstream.last(m)!.url).toBe(`/api/v1/catalog/${m}/a%20b?x=%2F&y`);
      expect(upstream.last(m)!.headers.cookie).toBe('a=1; b=%22two%22');
      const none = marker();
      expect((await call('GET', `/api/v1/catalog/${none}`)).status).toBe(200);
      expect(upstream.last(none)!.headers.cookie).toBeUndefined();
    });

    it('a gateway token in any other header is refused (400): the proxy cannot be told to remove that header', async () => {
      const premium = await makeUser(a, { plan: 'premium' });
      for (const headers of [
        { 'x-access-token': premium.access } as Record<string, string>,
        { 'x-auth-token': `Bearer ${premium.refresh}` },
        { 'proxy-authorization': `Bearer ${premium.access}` },
        { ...bearer(premium.access), 'x-forwarded-token': `${premium.access}X` },
      ]) {
        const m = marker();
        const res = await call('GET', `/api/v1/catalog/${m}`, { headers });
        // Caddy passes Proxy-Authorization on to nobody (hop-by-hop to it): nothing to refuse.
        if (proxy === 'caddy' && 'proxy-authorization' in headers) {
          expect(res.status).toBe(200);
          expect(JSON.stringify(upstream.last(m))).not.toContain(premium.access);
          continue;
        }
        expectDenied(res, 400, { error: 'Requête invalide' });
        expect(upstream.count(m), JSON.stringify(Object.keys(headers))).toBe(0);
      }
      // Another service's token, or none, in such a header goes through.
      const m = marker();
      expect((await call('GET', `/api/v1/catalog/${m}`, { headers: { 'x-access-token': 'eyJhbGciOiJIUzI1NiJ9.e30.c2lnbmF0dXJl' } })).status).toBe(200);
      expect(upstream.last(m)!.headers['x-access-token']).toBe('eyJhbGciOiJIUzI1NiJ9.e30.c2lnbmF0dXJl');
    });

    it('a 429 reaches the client with Retry-After and the RateLimit fields', async () => {
      const free = await makeUser(a);
      const m = marker();
      let res: HttpResponse | undefined;
      for (let i = 0; i < 6; i++) res = await call('GET', `/api/v1/races/${m}/${i}`, { headers: bearer(free.access) });
      expect(res!.status, front.log()).toBe(429);
      expect(Number(res!.headers['retry-after'])).toBeGreaterThan(0);
      expect(res!.headers.ratelimit).toMatch(/r=0/);
      expect(res!.headers['ratelimit-policy']).toMatch(/q=5/);
    });

    it('the daily limit holds exactly under 40 concurrent requests through the proxy, across both instances', async () => {
      const free = await makeUser(a);
      const m = marker();
      const decided = () => [a, b].map((gw) => gw.services.metrics.tallies.routes.get('/api/v1/races')?.decided.get('dailyLimitReached') ?? 0);
      const before = decided();
      const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => call('GET', `/api/v1/races/${m}/${i}`, { headers: bearer(free.access) })));
      const ok = answers.filter((r) => r.status === 200);
      const limited = answers.filter((r) => r.status === 429);
      expect(ok.length, front.log()).toBe(5);
      expect(limited).toHaveLength(35);
      for (const r of limited) expect(r.json).toEqual({ error: 'Limite quotidienne atteinte (plan free: 5 courses/jour)', upgrade_url: UPGRADE_URL });
      expect(upstream.count(m)).toBe(5);
      expect(await usage(free.id)).toMatchObject({ daily_usage: 5 });
      // Both instances decided some of them.
      const after = decided();
      expect(after[0]! - before[0]!).toBeGreaterThan(0);
      expect(after[1]! - before[1]!).toBeGreaterThan(0);
    });
  });
}
