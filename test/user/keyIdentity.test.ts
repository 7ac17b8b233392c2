// Which API key a request came with, as upstreams learn it (CONTRACT §21, docs/api-keys.md "What
// upstreams receive"): x-user-key-id on the proxy and on WebSocket upgrades, never the client's own
// copy (bearer and anonymous requests included), and the signed assertion's key_id and scopes,
// verified with jose against the keys the gateway publishes.
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { GatewayAssertionError, verifyGatewayAssertion } from '../../src/verify/index.js';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bearer, closeSql, describeWithServices, makeUser, marker, startTestGateway, testConfig, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { opened, refused, startWsUpstream, wsConnect, type WsUpstream } from '../helpers/wsUpstream.js';

const KEYS = '/api/v1/user/api-keys';
/** What a client sends to pass as another key (and another user), in the spellings upstream frameworks merge. */
const SPOOFED = { 'X-User-Key-Id': '1', 'x_user_key_id': '2', 'X-USER-KEY-ID': '3' };

describeWithServices('x-user-key-id and the assertion\'s key claims (CONTRACT §21)', () => {
  let echo: EchoUpstream;
  let ws: WsUpstream;
  let gw: TestGateway;
  let user: TestUser;
  const keyFor = async (scopes: string[] | null) => {
    const res = await gw.post(KEYS, { name: 'ci', ...(scopes ? { scopes } : {}) }, { headers: bearer(user.access) });
    expect(res.status, res.text).toBe(201);
    return { id: res.json.id as number, key: res.json.key as string };
  };

  beforeAll(async () => {
    [echo, ws] = await Promise.all([startEchoUpstream(), startWsUpstream()]);
    gw = await startTestGateway(testConfig({
      upstreams: { app: { url: echo.url }, signed: { url: echo.url, assertion: true }, live: { url: ws.url } },
      routes: [
        { path: '/api/v1/reports', upstream: 'signed', scopes: ['reports:read'] },
        { path: '/api/v1/orders', upstream: 'app' },
        { path: '/api/v1/maybe', upstream: 'app', auth: 'optional' },
        { path: '/api/v1/stream', upstream: 'live', websocket: true },
      ],
    }));
    user = await makeUser(gw, { plan: 'pro' });
  });
  afterAll(async () => {
    await gw?.close();
    await Promise.all([echo?.close(), ws?.close()]);
    await closeSql();
  });

  it('the upstream receives the key\'s id on an API-key request, and the client\'s copy is gone', async () => {
    const { id, key } = await keyFor(null);
    const m = marker();
    expect((await gw.get(`/api/v1/orders/${m}`, { headers: { ...SPOOFED, 'x-api-key': key } })).status).toBe(200);
    const hit = echo.last(m)!;
    expect(hit.headers['x-user-key-id']).toBe(String(id));
    expect(hit.headers['x_user_key_id']).toBeUndefined();
    expect(hit.headers['x-auth-method']).toBe('api-key');
  });

  it('a bearer or anonymous request carries no x-user-key-id, whatever the client sent', async () => {
    const m = marker();
    expect((await gw.get(`/api/v1/orders/${m}`, { headers: { ...SPOOFED, ...bearer(user.access) } })).status).toBe(200);
    expect((await gw.get(`/api/v1/maybe/${m}`, { headers: SPOOFED })).status).toBe(200);
    expect(echo.hits.filter((h) => h.url.includes(m)).map((h) => Object.keys(h.headers).filter((n) => /key.id/i.test(n)))).toEqual([[], []]);
  });

  it('a WebSocket upgrade with a key carries its id, and one with a bearer token none', async () => {
    const { id, key } = await keyFor(['*']);
    const url = (m: string) => `${gw.url.replace(/^http/, 'ws')}/api/v1/stream/${m}`;
    const [byKey, byBearer] = [marker(), marker()];
    opened(await wsConnect(url(byKey), { headers: { ...SPOOFED, 'x-api-key': key } })).ws.close();
    opened(await wsConnect(url(byBearer), { headers: { ...SPOOFED, ...bearer(user.access) } })).ws.close();
    expect(ws.last(byKey)!.headers['x-user-key-id']).toBe(String(id));
    expect(Object.keys(ws.last(byBearer)!.headers).filter((n) => /key.id/i.test(n))).toEqual([]);
  });

  it('a WebSocket upgrade with a key that lacks the route\'s scopes is refused as a request is, nothing opened upstream (CONTRACT §21)', async () => {
    const { key } = await keyFor(['reports:read']);
    const m = marker();
    const refusal = refused(await wsConnect(`${gw.url.replace(/^http/, 'ws')}/api/v1/stream/${m}`, { headers: { 'x-api-key': key } }));
    expect([refusal.status, refusal.json]).toEqual([403, { error: 'Portée insuffisante', required_scopes: ['*'] }]);
    expect(ws.last(m)).toBeUndefined();
  });

  it('the assertion of an API-key request names the key and its scopes; a key without scopes says null; a bearer one says neither', async () => {
    const jwks = createRemoteJWKSet(new URL(`${gw.url}/.well-known/gateway-assertion-keys.json`));
    const verified = async (headers: Record<string, string>) => {
      const m = marker();
      expect((await gw.get(`/api/v1/reports/${m}`, { headers })).status).toBe(200);
      const hit = echo.last(m)!;
      return { hit, claims: (await jwtVerify(hit.headers['x-gateway-assertion'] as string, jwks, { issuer: 'auth-gateway', audience: 'signed' })).payload };
    };
    const scoped = await keyFor(['reports:read']);
    const byScoped = await verified({ 'x-api-key': scoped.key });
    expect(byScoped.claims).toMatchObject({ sub: String(user.id), auth_method: 'api-key', key_id: String(scoped.id), scopes: ['reports:read'] });
    expect(byScoped.hit.headers['x-user-key-id']).toBe(byScoped.claims.key_id);
    // auth-gateway/verify hands the upstream the key and its scopes, and only with the header that matches.
    const options = { jwksUrl: `${gw.url}/.well-known/gateway-assertion-keys.json`, audience: 'signed' };
    const sent = byScoped.hit.headers as Record<string, string>;
    expect(await verifyGatewayAssertion(sent, options)).toMatchObject({ userId: user.id, keyId: scoped.id, scopes: ['reports:read'] });
    const reason = await verifyGatewayAssertion({ ...sent, 'x-user-key-id': String(scoped.id + 1) }, options).catch((err: GatewayAssertionError) => err.reason);
    expect(reason).toBe('mismatch');

    const unscoped = await keyFor(null);
    const byUnscoped = await verified({ 'x-api-key': unscoped.key });
    expect(byUnscoped.claims).toMatchObject({ key_id: String(unscoped.id), scopes: null });

    const byBearer = await verified(bearer(user.access));
    expect(byBearer.claims.auth_method).toBe('bearer');
    expect(byBearer.claims).not.toHaveProperty('key_id');
    expect(byBearer.claims).not.toHaveProperty('scopes');
  });
});
