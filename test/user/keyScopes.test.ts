// Restricted API keys (CONTRACT §21, docs/api-keys.md "Restricted keys"), the page's example run
// as written: a key with scopes passes a route only holding all of its scopes, nothing else but
// GET /api/v1/user/me unless it holds `*`; a bearer sign-in and a key without scopes pass as before.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bearer, closeSql, configProblems, describeWithServices, makeUser, marker, startDecidingGateway, startTestGateway, testConfigFromYaml, type TestGateway } from '../helpers/gateway.js';
import { docsExample } from '../helpers/docs.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';

const KEYS = '/api/v1/user/api-keys';

describeWithServices('restricted API keys: scopes (CONTRACT §21)', () => {
  let upstream: EchoUpstream;
  let gw: TestGateway;
  let access: string;
  const keyOf = async (scopes: string[] | null) => (await gw.post(KEYS, { name: 'k', scopes }, { headers: bearer(access) })).json.key as string;

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    gw = await startTestGateway(testConfigFromYaml(docsExample('api-keys', 'api-key-scopes'), { APP_URL: upstream.url }));
    access = (await makeUser(gw)).access;
  });
  afterAll(async () => {
    await gw?.close();
    await upstream?.close();
    await closeSql();
  });

  it('a key with scopes passes only the routes whose scopes it holds, before the upstream is reached', async () => {
    const reader = await keyOf(['reports:read']);
    const m = marker();
    expect((await gw.get(`/api/v1/reports/${m}`, { headers: { 'x-api-key': reader } })).status).toBe(200);
    for (const [path, required] of [['/api/v1/exports', ['reports:read', 'exports:write']], ['/api/v1/orders', ['*']]] as const) {
      const res = await gw.get(`${path}/${m}`, { headers: { 'x-api-key': reader } });
      expect([res.status, res.json], path).toEqual([403, { error: 'Portée insuffisante', required_scopes: required }]);
    }
    expect(upstream.count(m)).toBe(1);
    const both = await keyOf(['reports:read', 'exports:write']);
    expect((await gw.get(`/api/v1/exports/${m}`, { headers: { 'x-api-key': both } })).status).toBe(200);
  });

  it('own endpoints: only GET /api/v1/user/me for a key with scopes, unless it holds *', async () => {
    const reader = await keyOf(['reports:read']);
    expect((await gw.get('/api/v1/user/me', { headers: { 'x-api-key': reader } })).status).toBe(200);
    const token = await gw.post('/api/v1/user/api-token', {}, { headers: { 'x-api-key': reader } });
    expect([token.status, token.json]).toEqual([403, { error: 'Portée insuffisante', required_scopes: ['*'] }]);
    // §21's endpoints refuse any key first, scoped or not.
    expect((await gw.get(KEYS, { headers: { 'x-api-key': reader } })).status).toBe(401);
    const all = await keyOf(['*']);
    expect((await gw.post('/api/v1/user/api-token', {}, { headers: { 'x-api-key': all } })).status).toBe(201);
  });

  it('a bearer sign-in, a key without scopes and a key with * pass every route as before', async () => {
    const m = marker();
    for (const headers of [bearer(access), { 'x-api-key': await keyOf(null) }, { 'x-api-key': await keyOf(['*']) }]) {
      for (const path of ['/api/v1/reports', '/api/v1/exports', '/api/v1/orders']) expect((await gw.get(`${path}/${m}`, { headers })).status).toBe(200);
    }
  });

  it('creates keys only with the scopes routes declare', async () => {
    expect((await gw.post(KEYS, { name: 'k', scopes: ['reports:write'] }, { headers: bearer(access) })).json).toEqual({ error: 'Portée inconnue' });
    const res = await gw.post(KEYS, { name: 'k', scopes: ['exports:write', 'reports:read'] }, { headers: bearer(access) });
    expect([res.status, res.json.scopes]).toEqual([201, ['exports:write', 'reports:read']]);
  });

  it('decides the same on the decisions listener', async () => {
    const routes = [{ path: '/reports', upstream: 'app', scopes: ['reports:read'] }, { path: '/orders', upstream: 'app' }];
    const deciding = await startDecidingGateway({ apiKeys: { plans: 'all' }, upstreams: { app: { url: upstream.url } }, routes });
    try {
      const user = await makeUser(deciding);
      const key = (await deciding.post(KEYS, { name: 'k', scopes: ['reports:read'] }, { headers: bearer(user.access) })).json.key as string;
      const decide = (uri: string) => deciding.decide('GET', '/decisions', { headers: { 'x-forwarded-uri': uri, 'x-forwarded-method': 'GET', 'x-api-key': key } });
      expect((await decide('/reports/1')).status).toBe(200);
      const refused = await decide('/orders/1');
      expect([refused.status, JSON.parse(String(refused.headers['x-gateway-error']))]).toEqual([403, { error: 'Portée insuffisante', required_scopes: ['*'] }]);
    } finally {
      await deciding.close();
    }
  });

  it('checks scopes in the contract order: after the credential, before mfa and plans (CONTRACT §22)', async () => {
    const routes = [
      { path: '/secure', upstream: 'app', mfa: 'required', scopes: ['reports:read'] },
      { path: '/paid', upstream: 'app', plans: ['pro'], scopes: ['reports:read'] },
      { path: '/other', upstream: 'app', scopes: ['other:read'] },
    ];
    const deciding = await startDecidingGateway({ apiKeys: { plans: 'all' }, upstreams: { app: { url: upstream.url } }, routes });
    try {
      const user = await makeUser(deciding);
      const keyWith = async (scopes: string[]) => (await deciding.post(KEYS, { name: 'k', scopes }, { headers: bearer(user.access) })).json.key as string;
      const refusal = async (uri: string, key: string) => {
        const res = await deciding.decide('GET', '/decisions', { headers: { 'x-forwarded-uri': uri, 'x-forwarded-method': 'GET', 'x-api-key': key } });
        return [res.status, JSON.parse(String(res.headers['x-gateway-error']))];
      };
      // Holding the scope, the next checks answer: an API key never passes mfa, and free is not pro.
      const holder = await keyWith(['reports:read']);
      expect(await refusal('/secure/1', holder)).toEqual([403, { error: 'Authentification à deux facteurs requise' }]);
      expect((await refusal('/paid/1', holder))[1]).toMatchObject({ error: 'Plan insuffisant', current_plan: 'free' });
      // Without it, the scopes answer first on both.
      const stranger = await keyWith(['other:read']);
      for (const uri of ['/secure/1', '/paid/1']) expect(await refusal(uri, stranger), uri).toEqual([403, { error: 'Portée insuffisante', required_scopes: ['reports:read'] }]);
    } finally {
      await deciding.close();
    }
  });

  it('refuses scopes on a route with auth: none', () => {
    expect(configProblems('upstreams: { app: { url: "http://127.0.0.1:1" } }\nroutes:\n  - { path: /p, upstream: app, auth: none, scopes: [a] }\n').join('\n'))
      .toMatch(/scopes need auth: required or optional/);
  });
});
