// A user's API keys on the console (CONTRACT §21, docs/console.md), over real HTTP: the listing
// the page draws (name, start, scopes, created, expires, last used), and the revoke button's
// request, with the console's session cookie and CSRF token: refused without them, and with them
// the key revoked as DELETE /admin/v1/api-keys/{id} does (api_key.revoked, actor console) and
// refused on both instances within a second.
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import {
  ADMIN_KEY, bearer, closeSql, describeWithServices, everywhereWithin, makeUser, sql, startTwoGateways, testConfig, type TestGateway,
} from '../helpers/gateway.js';
import { request } from '../helpers/http.js';

const ME = '/api/v1/user/me';

describeWithServices('console: a user\'s API keys', () => {
  let a: TestGateway;
  let b: TestGateway;
  let admin: FastifyInstance;
  let url: string;

  beforeAll(async () => {
    const routes = [{ path: '/api/v1/reports', upstream: 'app', scopes: ['reports:read'] }];
    [a, b] = await startTwoGateways(testConfig({ routes, upstreams: { app: { url: 'http://127.0.0.1:9' } } }));
    admin = await buildAdminApp(a.services);
    url = await admin.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await admin?.close();
    await Promise.all([a?.close(), b?.close()]);
    await closeSql();
  });

  it('lists each key with what the page shows, and its revoke button revokes it everywhere within a second', async () => {
    const signIn = await request(url, 'POST', '/console/session', { json: { key: ADMIN_KEY } });
    const cookie = String(signIn.headers['set-cookie']).split(';')[0]!;
    const csrf = signIn.json.csrf as string;
    const user = await makeUser(a, { plan: 'pro' });
    const expires = new Date(Date.now() + 86_400_000).toISOString();
    const wanted = { name: 'reporting', scopes: ['reports:read'], expires_at: expires };
    const created = await a.post('/api/v1/user/api-keys', wanted, { headers: bearer(user.access) });
    expect(created.status, created.text).toBe(201);
    const { id, key, start } = created.json as { id: number; key: string; start: string };

    const listed = await request(url, 'GET', `/console/api/v1/users/${user.id}/api-keys`, { headers: { cookie } });
    expect(listed.json.api_keys).toEqual([{
      id, name: 'reporting', start, scopes: ['reports:read'], active: true, created_at: created.json.created_at, expires_at: expires, last_used_at: null,
    }]);

    // The button's request without the page's CSRF token, or from another origin: refused, the key untouched.
    const revoke = (headers: Record<string, string>) => request(url, 'DELETE', `/console/api/v1/api-keys/${id}`, { headers: { cookie, ...headers } });
    expect((await revoke({})).json).toEqual({ error: 'Jeton CSRF invalide' });
    expect((await revoke({ 'x-csrf-token': csrf, origin: 'http://evil.example' })).status).toBe(403);
    expect((await b.get(ME, { headers: { 'x-api-key': key } })).status).toBe(200);

    const done = await revoke({ 'x-csrf-token': csrf });
    expect(done.status, done.text).toBe(200);
    await everywhereWithin([a, b], async (gw) => (await gw.get(ME, { headers: { 'x-api-key': key } })).status === 401, 1000);
    const events = await sql<{ actor: string; data: Record<string, unknown> }>(
      "SELECT actor, data FROM audit_events WHERE type = 'api_key.revoked' AND user_id = $1", [user.id]);
    expect(events).toEqual([{ actor: 'console', data: { id } }]);
    expect((await request(url, 'GET', `/console/api/v1/users/${user.id}/api-keys`, { headers: { cookie } })).json.api_keys[0].active).toBe(false);
    // A second press finds nothing left to revoke.
    expect((await revoke({ 'x-csrf-token': csrf })).status).toBe(404);
  });
});
