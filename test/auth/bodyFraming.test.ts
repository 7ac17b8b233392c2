// A JSON body is read the same whatever its framing and method (issue 27, CONTRACT §19):
// `Content-Length` or `Transfer-Encoding: chunked`, on every endpoint that reads one.
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import { ADMIN_KEY, bearer, closeSql, describeWithServices, makeUser, newEmail, newPassword, sql, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';
import { streamRequest } from '../helpers/http.js';

describeWithServices('request bodies under both framings', () => {
  let gw: TestGateway;
  let admin: FastifyInstance;
  let adminUrl: string;
  beforeAll(async () => {
    gw = await startTestGateway(testConfig());
    admin = await buildAdminApp(gw.services);
    adminUrl = await admin.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => { await admin?.close(); await gw?.close(); await closeSql(); });

  // The body in two chunks, or in one with its length.
  async function send(base: string, method: string, path: string, json: unknown, framing: 'chunked' | 'length', headers: Record<string, string> = {}) {
    const body = Buffer.from(JSON.stringify(json));
    const chunks = framing === 'chunked' ? [body.subarray(0, 5), body.subarray(5)] : [body];
    // Named explicitly: Node frames a DELETE body only when told to.
    const framingHeader: Record<string, string> = framing === 'length' ? { 'content-length': String(body.length) } : { 'transfer-encoding': 'chunked' };
    const res = await streamRequest(base, method, path, chunks, { 'content-type': 'application/json', ...framingHeader, ...headers });
    const text = res.body.toString('utf8');
    return { status: res.status, json: text ? JSON.parse(text) : undefined };
  }

  it('a DELETE body with no framing at all (no length, not chunked) is no body (RFC 9112 §6.3): the password is missing and the account stays', async () => {
    const user = await makeUser(gw);
    const res = await streamRequest(gw.url, 'DELETE', '/api/v1/user/me', [Buffer.from(JSON.stringify({ password: user.password }))], { 'content-type': 'application/json', ...bearer(user.access) });
    expect(res.status).toBe(401);
    expect(await sql('SELECT id FROM users WHERE id = $1', [user.id])).toEqual([{ id: user.id }]);
  });

  for (const framing of ['chunked', 'length'] as const) {
    it(`DELETE /api/v1/user/me checks the password of a ${framing} body`, async () => {
      const user = await makeUser(gw);
      const wrong = await send(gw.url, 'DELETE', '/api/v1/user/me', { password: `${user.password}x` }, framing, bearer(user.access));
      expect(wrong).toEqual({ status: 401, json: { error: 'Identifiants invalides' } });
      const right = await send(gw.url, 'DELETE', '/api/v1/user/me', { password: user.password }, framing, bearer(user.access));
      expect(right).toEqual({ status: 200, json: { message: 'Compte supprimé' } });
      expect(await sql('SELECT id FROM users WHERE id = $1', [user.id])).toEqual([]);
    });

    it(`login, refresh, logout, register, password change and reset, and the admin API read a ${framing} body`, async () => {
      const user = await makeUser(gw);
      const login = await send(gw.url, 'POST', '/api/v1/auth/login', { email: user.email, password: user.password }, framing);
      expect(login.status).toBe(200);
      expect(login.json.access_token).toEqual(expect.any(String));
      const refresh = await send(gw.url, 'POST', '/api/v1/auth/refresh', { refresh_token: login.json.refresh_token }, framing);
      expect(refresh.status).toBe(200);
      expect((await send(gw.url, 'POST', '/api/v1/auth/logout', { refresh_token: refresh.json.refresh_token }, framing)).status).toBe(200);
      expect((await send(gw.url, 'POST', '/api/v1/auth/refresh', { refresh_token: refresh.json.refresh_token }, 'length')).status).toBe(401);
      const email = newEmail('framed');
      expect((await send(gw.url, 'POST', '/api/v1/auth/register', { email, password: newPassword() }, framing)).status).toBe(201);
      // A field was read: the token is checked (and refused), not reported missing.
      expect(await send(gw.url, 'POST', '/api/v1/auth/password/reset', { token: 'not-a-token', new_password: newPassword() }, framing)).toEqual({ status: 400, json: { error: 'Lien invalide ou expiré' } });
      const change = await send(gw.url, 'POST', '/api/v1/auth/password/change', { current_password: user.password, new_password: `${user.password}-new` }, framing, bearer(login.json.access_token));
      expect(change.status).toBe(200);
      const plan = await send(adminUrl, 'PUT', `/admin/v1/users/${user.id}/plan`, { plan: 'pro' }, framing, bearer(ADMIN_KEY));
      expect(plan.status).toBe(200);
      expect((await sql<{ plan: string }>('SELECT plan FROM users WHERE id = $1', [user.id]))[0]!.plan).toBe('pro');
      const active = await send(adminUrl, 'PUT', `/admin/v1/users/${user.id}/active`, { active: false }, framing, bearer(ADMIN_KEY));
      expect(active.status).toBe(200);
      expect((await sql<{ is_active: number }>('SELECT is_active FROM users WHERE id = $1', [user.id]))[0]!.is_active).toBe(0);
    });
  }
});
