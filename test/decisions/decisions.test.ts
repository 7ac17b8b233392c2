// The decisions listener (CONTRACT §11), asked directly as a proxy would ask it: both ways of naming
// the original request, the identity headers of a 200, every denial with the status, body and
// headers the proxied request gets, decision-only routes, and exact counting across two instances.
// test/decisions/proxies.test.ts puts real nginx and Caddy in front.
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StorageUnavailableError } from '../../src/errors/index.js';
import {
  bearer, closeSql, describeWithServices, makeUser, marker, startDecidingGateway, usage, type TestGateway,
} from '../helpers/gateway.js';
import type { HttpResponse } from '../helpers/http.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';

const UPGRADE_URL = '/api/v1/subscription/upgrade';
const IDENTITY = ['x-user-id', 'x-user-plan', 'x-user-email', 'x-auth-method', 'x-gateway-assertion'];
// What a client may send to pass as someone else: each one alone gets the decision refused (CONTRACT §33).
const SPOOFED = {
  'X-User-Key-Id': '7', 'X-User-Id': '1', 'X-User-Plan': 'pro', 'X-User-Email': 'boss@example.test', 'X-Auth-Method': 'api-key', 'X-Gateway-Assertion': 'forged',
  'X-User-Role': 'admin', 'X_User_Id': '1', 'X-USER-EXTERNAL-ID': 'ext-1', 'X-Org-Id': '31', 'x_org_role': 'owner', 'X-Org-Plan': 'pro'
};

function settings(upstream: string) {
  return {
    plans: { freeDailyLimit: 3 },
    upstreams: { app: { url: upstream }, signed: { url: upstream, assertion: true } },
    routes: [
      { path: '/api', upstream: 'app', auth: 'none' },
      { path: '/public', upstream: 'app', auth: 'none' },
      { path: '/maybe', upstream: 'app', auth: 'optional' },
      { path: '/premium', upstream: 'app', plans: ['premium', 'pro'] },
      { path: '/race', upstream: 'app', dailyLimit: true },
      { path: '/readonly', upstream: 'app', methods: ['GET'] },
      { path: '/signed', upstream: 'signed' },
      // Decision-only: no upstream (CONTRACT §11).
      { path: '/internal', plans: ['pro'] },
    ],
  };
}

/** The identity headers an answer carries. */
const identityOf = (res: HttpResponse) => Object.fromEntries(Object.entries(res.headers).filter(([name]) => IDENTITY.includes(name) || name.includes('_') || name.startsWith('x-user')));

/** A denial: the status and body the proxied request gets, and the same body again in x-gateway-error. */
function expectDenial(res: HttpResponse, status: number, body: Record<string, unknown>): void {
  expect(res.status, res.text).toBe(status);
  expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
  expect(res.json).toEqual(body);
  const header = res.headers['x-gateway-error'] as string;
  expect(header).toMatch(/^[\x20-\x7e]+$/);
  expect(JSON.parse(header)).toEqual(body);
  expect(identityOf(res)).toEqual({});
}

describeWithServices('decisions listener', () => {
  let upstream: EchoUpstream;
  let a: TestGateway;
  let b: TestGateway;

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    [a, b] = await Promise.all([startDecidingGateway(settings(upstream.url)), startDecidingGateway(settings(upstream.url))]);
  });
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await upstream?.close();
    await closeSql();
  });

  describe('200: may pass, as whom', () => {
    it('an allowed decision always carries the URI and Cookie less the gateway\'s tokens (CONTRACT §19)', async () => {
      const user = await makeUser(a);
      const plain = await a.decide('GET', '/decisions', { headers: { 'X-Forwarded-Uri': '/public/x?q=1&y', cookie: 'a=1; b=2' } });
      expect(plain.status).toBe(200);
      expect(plain.headers['x-gateway-clean-uri']).toBe('/public/x?q=1&y');
      expect(plain.headers['x-gateway-clean-cookie']).toBe('a=1; b=2');
      const bare = await a.decide('GET', '/decisions/public/x');
      expect(bare.headers['x-gateway-clean-uri']).toBe('/public/x');
      expect(bare.headers['x-gateway-clean-cookie']).toBe('');
      const tokened = await a.decide('GET', '/decisions', {
        headers: { 'X-Forwarded-Uri': `/public/x?q=1&access_token=${user.access};r=${encodeURIComponent(user.refresh)}&z=2`, cookie: `a=1; t=${user.access}; b=2`, 'X-Gateway-Clean': 'uri, cookie' },
      });
      expect(tokened.status).toBe(200);
      expect(tokened.headers['x-gateway-clean-uri']).toBe('/public/x?q=1&z=2');
      expect(tokened.headers['x-gateway-clean-cookie']).toBe('a=1; b=2');
      const only = await a.decide('GET', `/decisions/public/x?access_token=${user.access}`, { headers: { cookie: `t=${user.access}`, 'X-Gateway-Clean': 'URI,Cookie' } });
      expect(only.headers['x-gateway-clean-uri']).toBe('/public/x');
      expect(only.headers['x-gateway-clean-cookie']).toBe('');
    });

    it('refuses (400) a gateway token in the query or a cookie that the proxy does not say it cleans (Traefik, Envoy), counting nothing', async () => {
      const user = await makeUser(a, { plan: 'free' });
      const inQuery = `/race/x?q=1&access_token=${user.access}`;
      const inCookie = { cookie: `a=1; t=${user.access}` };
      for (const [uri, headers] of [
        [inQuery, {}],
        [inQuery, { 'X-Gateway-Clean': 'cookie' }],
        ['/race/x', { ...inCookie, ...bearer(user.access) }],
        ['/race/x', { ...inCookie, ...bearer(user.access), 'X-Gateway-Clean': 'uri' }],
        [inQuery, { ...inCookie, 'X-Gateway-Clean': 'uri' }],
      ] as const) {
        const res = await b.decide('GET', '/decisions', { headers: { 'X-Forwarded-Uri': uri, ...headers } });
        expect(res.status, `${uri} ${JSON.stringify(headers)}`).toBe(400);
        expect(res.json).toEqual({ error: 'Requête invalide' });
      }
      // None of those was decided, so none counted a daily use; a clean request (or one the proxy cleans) is decided as ever.
      expect((await usage(user.id)).daily_usage).toBe(0);
      expect((await a.decide('GET', '/decisions', { headers: { 'X-Forwarded-Uri': '/race/x', ...bearer(user.access), cookie: 'a=1' } })).status).toBe(200);
      const cleaned = await a.decide('GET', '/decisions', { headers: { 'X-Forwarded-Uri': '/race/x', ...bearer(user.access), ...inCookie, 'X-Gateway-Clean': 'cookie' } });
      expect(cleaned.status).toBe(200);
      expect(cleaned.headers['x-gateway-clean-cookie']).toBe('a=1');
      expect((await usage(user.id)).daily_usage).toBe(2);
    });

    it('answers an empty body and the identity headers, for the path after /decisions and for X-Forwarded-Uri alike', async () => {
      const user = await makeUser(a, { plan: 'premium' });
      const m = marker();
      const byPath = await a.decide('GET', `/decisions/premium/${m}?q=1`, { headers: bearer(user.access) });
      const byHeaders = await b.decide('GET', '/decisions', { headers: { ...bearer(user.access), 'X-Forwarded-Uri': `/premium/${m}?q=1`, 'X-Forwarded-Method': 'POST' } });
      for (const res of [byPath, byHeaders]) {
        expect(res.status).toBe(200);
        expect(res.text).toBe('');
        expect(res.headers['content-length']).toBe('0');
        expect(identityOf(res)).toEqual({ 'x-user-id': String(user.id), 'x-user-plan': 'premium', 'x-user-email': user.email, 'x-auth-method': 'bearer', 'x-user-key-id': '' });
        expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
        expect(res.headers['x-gateway-error']).toBeUndefined();
      }
      // Deciding is all it does: nothing was forwarded.
      expect(upstream.count(m)).toBe(0);
    });

    it('says api-key and which key for a request with an API key, and the X-Original-* headers work too', async () => {
      const pro = await makeUser(a, { plan: 'pro' });
      const key = (await a.post('/api/v1/user/api-token', {}, { headers: bearer(pro.access) })).json.api_token as string;
      const [listed] = (await a.get('/api/v1/user/api-keys', { headers: bearer(pro.access) })).json.api_keys as Array<{ id: number }>;
      const res = await a.decide('GET', '/decisions', { headers: { 'x-api-key': key, 'X-Original-URI': '/internal/report', 'X-Original-Method': 'DELETE' } });
      expect(res.status).toBe(200);
      expect(identityOf(res)).toEqual({ 'x-user-id': String(pro.id), 'x-user-plan': 'pro', 'x-user-email': pro.email, 'x-auth-method': 'api-key', 'x-user-key-id': String(listed!.id) });
    });

    it('signs which key and its scopes into the assertion of an API key\'s request, and neither for a bearer one', async () => {
      const pro = await makeUser(a, { plan: 'pro' });
      const created = await a.post('/api/v1/user/api-keys', { name: 'ci', scopes: ['*'] }, { headers: bearer(pro.access) });
      expect(created.status, created.text).toBe(201);
      const byKey = await b.decide('GET', '/decisions/signed/x', { headers: { 'x-api-key': created.json.key } });
      expect(byKey.headers['x-user-key-id']).toBe(String(created.json.id));
      expect(decodeJwt(byKey.headers['x-gateway-assertion'] as string)).toMatchObject({ sub: String(pro.id), auth_method: 'api-key', key_id: String(created.json.id), scopes: ['*'] });
      const byBearer = decodeJwt((await b.decide('GET', '/decisions/signed/x', { headers: bearer(pro.access) })).headers['x-gateway-assertion'] as string);
      expect(byBearer).not.toHaveProperty('key_id');
      expect(byBearer).not.toHaveProperty('scopes');
    });

    it('adds x-gateway-assertion where the route\'s upstream asks for one', async () => {
      const user = await makeUser(a);
      const res = await b.decide('GET', '/decisions/signed/x', { headers: bearer(user.access) });
      expect(res.status).toBe(200);
      const claims = decodeJwt(res.headers['x-gateway-assertion'] as string);
      expect(claims).toMatchObject({ aud: 'signed', sub: String(user.id), plan: 'free', auth_method: 'bearer' });
      expect((await b.decide('GET', '/decisions/premium/x', { headers: bearer((await makeUser(a, { plan: 'pro' })).access) })).headers['x-gateway-assertion']).toBeUndefined();
    });

    it('lets anonymous requests through where the route allows them, without identity headers but an empty x-user-key-id', async () => {
      for (const path of ['/decisions/public/x', '/decisions/maybe/x', '/decisions/api/v1/races']) {
        const res = await a.decide('GET', path);
        expect(res.status, path).toBe(200);
        expect(identityOf(res)).toEqual({ 'x-user-key-id': '' });
      }
    });

    it('refuses a decision request carrying a client\'s copy of any identity header, logged at info with its name', async () => {
      const user = await makeUser(a);
      for (const [name, value] of Object.entries(SPOOFED)) {
        for (const [path, headers] of [['/decisions/public/x', {}], ['/decisions/maybe/x', bearer(user.access)]] as const) {
          const logged = a.logs.length;
          expectDenial(await a.decide('GET', path, { headers: { ...headers, [name]: value } }), 400, { error: 'Requête invalide' });
          const lines = a.logs.slice(logged).map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => String(l.msg).startsWith('decision refused'));
          expect(lines, name).toEqual([expect.objectContaining({ level: 30, msg: 'decision refused: the client sent a reserved identity header', header: name.toLowerCase() })]);
        }
      }
      // Only the gateway's own headers come back, whatever else the client sent.
      const signedIn = await a.decide('GET', '/decisions/maybe/x', { headers: { ...bearer(user.access), 'X-Users': '1', 'X-Organization': '31', 'Gateway-Org-Aware': '1' } });
      expect(signedIn.status).toBe(200);
      expect(identityOf(signedIn)).toEqual({ 'x-user-id': String(user.id), 'x-user-plan': 'free', 'x-user-email': user.email, 'x-auth-method': 'bearer', 'x-user-key-id': '' });
    });

    it('never reads a body the proxy sends along, even one over server.bodyLimit', async () => {
      const res = await a.decide('POST', '/decisions/public/upload', { body: Buffer.alloc(3 * 1024 * 1024, 0x61), headers: { 'content-type': 'application/json' }, freshConnection: true });
      expect(res.status).toBe(200);
    });
  });

  describe('denials: what the proxied request would have got', () => {
    it('401 with WWW-Authenticate, invalid_token when a token was refused', async () => {
      const none = await a.decide('GET', '/decisions/premium/x');
      expectDenial(none, 401, { error: 'Token invalide ou expiré' });
      expect(none.headers['www-authenticate']).toBe('Bearer realm="gateway"');
      const bad = await a.decide('GET', '/decisions', { headers: { ...bearer('not.a.token'), 'X-Forwarded-Uri': '/premium/x' } });
      expectDenial(bad, 401, { error: 'Token invalide ou expiré' });
      expect(bad.headers['www-authenticate']).toBe('Bearer realm="gateway", error="invalid_token"');
    });

    it('403 with the required plans, the current plan and upgrade_url', async () => {
      const free = await makeUser(b);
      expectDenial(await b.decide('GET', '/decisions/premium/x', { headers: bearer(free.access) }), 403,
        { error: 'Plan insuffisant', required: ['premium', 'pro'], current_plan: 'free', upgrade_url: UPGRADE_URL });
    });

    it('404 where no route matches, and for anything but /decisions on this listener', async () => {
      expectDenial(await a.decide('GET', '/decisions/nothing/here'), 404, { error: 'Route introuvable' });
      expectDenial(await a.decide('GET', '/decisions', { headers: { 'X-Forwarded-Uri': '/nothing' } }), 404, { error: 'Route introuvable' });
      for (const path of ['/', '/decision', '/decisionsx/public', '/DECISIONS/public', '/healthz']) {
        expectDenial(await a.decide('GET', path), 404, { error: 'Route introuvable' });
      }
    });

    it('405 with Allow, for the method the proxy names or one an override header asks the upstream to run', async () => {
      const byHeader = await a.decide('GET', '/decisions', { headers: { 'X-Forwarded-Uri': '/readonly/x', 'X-Forwarded-Method': 'POST' } });
      expectDenial(byHeader, 405, { error: 'Méthode non autorisée' });
      expect(byHeader.headers.allow).toBe('GET, HEAD');
      expect(byHeader.headers['x-gateway-error']).toBe('{"error":"M\\u00e9thode non autoris\\u00e9e"}');
      const byPath = await a.decide('DELETE', '/decisions/readonly/x');
      expectDenial(byPath, 405, { error: 'Méthode non autorisée' });
      const override = await a.decide('GET', '/decisions/readonly/x', { headers: { 'X-HTTP-Method-Override': 'DELETE' } });
      expectDenial(override, 405, { error: 'Méthode non autorisée' });
      // HEAD goes with GET: past the method check, on to authentication.
      expect((await a.decide('GET', '/decisions', { headers: { 'X-Forwarded-Uri': '/readonly/x', 'X-Forwarded-Method': 'HEAD' } })).status).toBe(401);
    });

    it('429 once the day\'s uses are counted, with upgrade_url', async () => {
      const free = await makeUser(a);
      for (let i = 0; i < 3; i++) expect((await [a, b][i % 2]!.decide('GET', '/decisions/race/x', { headers: bearer(free.access) })).status).toBe(200);
      expectDenial(await b.decide('POST', '/decisions', { headers: { ...bearer(free.access), 'X-Forwarded-Uri': '/race/y' } }), 429,
        { error: 'Limite quotidienne atteinte (plan free: 3 courses/jour)', upgrade_url: UPGRADE_URL });
      expect((await usage(free.id)).daily_usage).toBe(3);
    });

    it('503 from the catalog, its body in x-gateway-error too, when Postgres fails', async () => {
      const user = await makeUser(a);
      // The fault only (STYLE 8): instance b has never seen this user, so it must ask Postgres.
      const db = b.services.db;
      const query = db.query;
      db.query = (async () => { throw new StorageUnavailableError(new Error('connection refused')); }) as typeof db.query;
      try {
        expectDenial(await b.decide('GET', '/decisions/premium/x', { headers: bearer(user.access) }), 503, { error: 'Service temporairement indisponible' });
      } finally {
        db.query = query;
      }
      expect((await b.decide('GET', '/decisions/public/x', { headers: bearer(user.access) })).status).toBe(200);
    });

    it('400 when the original request cannot be told: no URI, a header sent twice, a path an upstream could read otherwise', async () => {
      expectDenial(await a.decide('GET', '/decisions'), 400, { error: 'Requête invalide' });
      expectDenial(await a.decide('GET', '/decisions', { headers: { 'X-Forwarded-Uri': ['/public/x', '/premium/x'] } }), 400, { error: 'Requête invalide' });
      expectDenial(await a.decide('GET', '/decisions', { headers: { 'X-Forwarded-Uri': 'http://elsewhere/premium' } }), 400, { error: 'Requête invalide' });
      expectDenial(await a.decide('GET', '/decisions/public%2F..%2Fpremium/x'), 400, { error: 'Requête invalide' });
    });

    it('decides a spelling the matcher reads as a guarded route with that route\'s guards, and refuses a path the proxy would forward unresolved', async () => {
      // Case and ;params: the proxy forwards them as they are, and the route they name is guarded.
      for (const path of ['/decisions/PREMIUM/x', '/decisions/premium;x/y']) {
        expectDenial(await a.decide('GET', path), 401, { error: 'Token invalide ou expiré' });
      }
      // Dot segments and escapes: the gateway cannot know how the application behind the proxy will
      // read them (see the next test), so it decides nothing for them.
      for (const path of ['/decisions/public/../premium/x', '/decisions/public/%2e%2e/premium/x', '/decisions/p%72emium/x', '/decisions//premium/x']) {
        expectDenial(await a.decide('GET', path), 400, { error: 'Requête invalide' });
      }
      const res = await a.decide('GET', '/decisions', { headers: { 'X-Forwarded-Uri': '/public/../premium/x' } });
      expectDenial(res, 400, { error: 'Requête invalide' });
    });

    it('never decides a path under a guarded route as a weaker route by resolving dot segments the proxy forwards unresolved', async () => {
      // The proxy forwards the client's path as sent (nginx proxy_pass without a URI, Caddy), and the
      // application routes it without resolving its dot segments: Rails reads `/premium/%2E%2E/public/x`
      // as a nested `premium/:premium_id/public/:id` action (premium_id '..'), Fastify and Express read
      // `..` as an `:id`. Decided as `/public/x`, an anonymous request runs a premium action.
      for (const original of ['/premium/%2e%2e/public/x', '/premium/%2E%2E/public/x', '/premium/../public/x', '/premium/a/../../public/x']) {
        for (const res of [await a.decide('GET', `/decisions${original}`), await a.decide('GET', '/decisions', { headers: { 'X-Forwarded-Uri': original } })]) {
          expect([400, 401], `${original}: ${res.status}`).toContain(res.status);
          expect(identityOf(res)).toEqual({});
        }
      }
    });

    it('never decides for the gateway\'s own endpoints, whatever the spelling: a route on /api does not take them', async () => {
      const user = await makeUser(a, { plan: 'pro' });
      for (const [method, path] of [['POST', '/api/v1/auth/login'], ['GET', '/api/v1/auth/login'], ['POST', '/API/V1/AUTH/LOGIN/'], ['POST', '/api/v1/auth/login;x'], ['GET', '/api/v1/user/me']]) {
        expectDenial(await a.decide(method!, `/decisions${path}`, { headers: bearer(user.access) }), 404, { error: 'Route introuvable' });
        expectDenial(await a.decide('GET', '/decisions', { headers: { 'X-Forwarded-Uri': path!, 'X-Forwarded-Method': method! } }), 404, { error: 'Route introuvable' });
      }
    });
  });

  describe('decision-only routes', () => {
    it('are decided on the decisions listener and do not exist on the public one, guards or not', async () => {
      const pro = await makeUser(a, { plan: 'pro' });
      const free = await makeUser(a);
      const m = marker();
      expect((await a.decide('GET', `/decisions/internal/${m}`, { headers: bearer(pro.access) })).status).toBe(200);
      expectDenial(await a.decide('GET', `/decisions/internal/${m}`, { headers: bearer(free.access) }), 403,
        { error: 'Plan insuffisant', required: ['pro'], current_plan: 'free', upgrade_url: UPGRADE_URL });
      for (const headers of [bearer(pro.access), {}]) {
        const res = await a.get(`/internal/${m}`, { headers });
        expect(res.status).toBe(404);
        expect(res.json).toEqual({ error: 'Route introuvable' });
        expect(res.headers['www-authenticate']).toBeUndefined();
      }
      expect(upstream.count(m)).toBe(0);
    });
  });

  describe('counting', () => {
    it('counts one daily use per 200, exactly, under 40 concurrent decisions across two instances', async () => {
      const free = await makeUser(a);
      const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => [a, b][i % 2]!.decide('GET', `/decisions/race/${i}`, { headers: bearer(free.access) })));
      const statuses = answers.map((r) => r.status).sort();
      expect(statuses.filter((s) => s === 200)).toHaveLength(3);
      expect(statuses.filter((s) => s === 429)).toHaveLength(37);
      expect(await usage(free.id)).toMatchObject({ daily_usage: 3 });
    });
  });
});
