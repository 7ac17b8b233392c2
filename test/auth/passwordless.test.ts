// Users without a password (CONTRACT §14): an account an identity provider made has no password
// until its user sets one. Login refuses it as a wrong password; where an endpoint asks for the
// password, a bearer sign-in at most 5 minutes old stands in; password/change sets a first one
// without current_password. The accounts here lose their password by SQL, as a provider's would
// have none.
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  bearer, closeSql, describeWithServices, makeUser, newPassword, sql, startTwoGateways, testClock, testConfig, type TestGateway, type TestUser,
} from '../helpers/gateway.js';

const INVALID = { error: 'Identifiants invalides' };

describeWithServices('users without a password', () => {
  let a: TestGateway;
  let b: TestGateway;
  const clock = testClock();

  beforeAll(async () => {
    [a, b] = await startTwoGateways(testConfig(), { clock });
  });
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await closeSql();
  });

  /** A signed-in user whose account then has no password. */
  async function passwordless(options: { plan?: string } = {}): Promise<TestUser> {
    const user = await makeUser(a, options);
    await sql('UPDATE users SET password_hash = NULL WHERE id = $1', [user.id]);
    return user;
  }

  it('login refuses the account as a wrong password, whatever is typed, and records it so', async () => {
    const user = await passwordless();
    for (const password of [user.password, 'anything-at-all']) {
      const res = await b.post('/api/v1/auth/login', { email: user.email, password });
      expect([res.status, res.json]).toEqual([401, INVALID]);
    }
    const failed = await sql<{ data: unknown }>("SELECT data FROM audit_events WHERE user_id = $1 AND type = 'login.failed'", [user.id]);
    expect(failed.map((r) => r.data)).toEqual([{ reason: 'wrong_password' }, { reason: 'wrong_password' }]);
  });

  it('password/change sets a first password from a recent sign-in, without current_password; then login works', async () => {
    const user = await passwordless();
    const next = newPassword();
    const res = await a.post('/api/v1/auth/password/change', { new_password: next }, { headers: bearer(user.access) });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ access_token: expect.any(String), refresh_token: expect.any(String) });
    expect((await b.post('/api/v1/auth/login', { email: user.email, password: next })).status).toBe(200);
    // Now it has one: current_password is asked for again.
    const again = await a.post('/api/v1/auth/password/change', { new_password: newPassword() }, { headers: bearer(res.json.access_token) });
    expect([again.status, again.json]).toEqual([401, INVALID]);
  });

  it('a sign-in older than 5 minutes, or an API key, does not stand in for the password', async () => {
    const user = await passwordless({ plan: 'pro' });
    const key = { 'x-api-key': (await a.post('/api/v1/user/api-token', {}, { headers: bearer(user.access) })).json.api_token as string };
    expect((await a.post('/api/v1/auth/password/change', { new_password: newPassword() }, { headers: key })).json).toEqual(INVALID);
    expect((await a.request('DELETE', '/api/v1/user/me', { json: {}, headers: key })).json).toEqual(INVALID);
    clock.advance(6 * 60_000);
    try {
      for (const gw of [a, b]) {
        expect((await gw.post('/api/v1/auth/password/change', { new_password: newPassword() }, { headers: bearer(user.access) })).json).toEqual(INVALID);
        expect((await gw.request('DELETE', '/api/v1/user/me', { json: {}, headers: bearer(user.access) })).json).toEqual(INVALID);
      }
    } finally {
      clock.advance(-6 * 60_000);
    }
    expect(await sql('SELECT password_hash FROM users WHERE id = $1', [user.id])).toEqual([{ password_hash: null }]);
  });

  it('DELETE /api/v1/user/me from a recent sign-in deletes the account', async () => {
    const user = await passwordless();
    const res = await b.request('DELETE', '/api/v1/user/me', { json: {}, headers: bearer(user.access) });
    expect([res.status, res.json]).toEqual([200, { message: 'Compte supprimé' }]);
    expect(await sql('SELECT 1 FROM users WHERE id = $1', [user.id])).toEqual([]);
  });
});
