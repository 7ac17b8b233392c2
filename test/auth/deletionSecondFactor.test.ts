// DELETE /api/v1/user/me of a user with a second factor (CONTRACT §13 amended by §30): the
// password and a sign-in at aal2 at most 5 minutes old, else 403 `Authentification récente
// requise`, whatever the password; a user without a second factor deletes with the password alone,
// however old the sign-in.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bearer, closeSql, describeWithServices, makeUser, sql, startTwoGateways, testClock, testConfig, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { authenticator } from '../helpers/totp.js';

const ME = '/api/v1/user/me';
const RECENT = '{"error":"Authentification récente requise","code":"recent_auth_required"}';
const MINUTE = 60_000;

describeWithServices('account deletion with a second factor', () => {
  let a: TestGateway;
  let b: TestGateway;
  const clock = testClock();

  beforeAll(async () => {
    [a, b] = await startTwoGateways(testConfig({ errors: { codes: true }, auth: { mfa: { issuer: 'Example' } } }), { clock });
  });
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await closeSql();
  });

  const code = (secret: string) => authenticator.clone({ epoch: clock().getTime() }).generate(secret);
  const remove = (gw: TestGateway, access: string, password: string) => gw.request('DELETE', ME, { json: { password }, headers: bearer(access) });

  /** A user with TOTP confirmed: its secret, and the aal1 pair the confirmation answered. */
  async function withTotp(): Promise<{ user: TestUser; secret: string; aal1: string }> {
    const user = await makeUser(a);
    const secret = (await a.post('/api/v1/auth/mfa/totp/enroll', {}, { headers: bearer(user.access) })).json.secret as string;
    const confirmed = await a.post('/api/v1/auth/mfa/totp/confirm', { code: code(secret) }, { headers: bearer(user.access) });
    expect(confirmed.status, confirmed.text).toBe(200);
    // The next sign-in's code is the next step's: a code is taken once.
    clock.advance(30_000);
    return { user, secret, aal1: confirmed.json.access_token as string };
  }
  /** A sign-in with the password and a TOTP code: an aal2 access token. */
  async function aal2(user: TestUser, secret: string): Promise<string> {
    const first = await b.post('/api/v1/auth/login', { email: user.email, password: user.password });
    const verified = await b.post('/api/v1/auth/mfa/verify', { mfa_token: first.json.mfa_token, code: code(secret) });
    expect(verified.status, verified.text).toBe(200);
    return verified.json.access_token as string;
  }
  const exists = async (id: number) => (await sql('SELECT 1 FROM users WHERE id = $1', [id])).length === 1;

  it('refuses a password-only (aal1) sign-in, and an aal2 one over 5 minutes old; takes a fresh aal2 one', async () => {
    const { user, secret, aal1 } = await withTotp();
    const refused = await remove(a, aal1, user.password);
    expect([refused.status, refused.text]).toEqual([403, RECENT]);
    const stale = await aal2(user, secret);
    clock.advance(5 * MINUTE + 2000);
    try {
      const late = await remove(b, stale, user.password);
      expect([late.status, late.text]).toEqual([403, RECENT]);
      // A wrong password changes nothing: the sign-in is refused first, and no password is tried.
      expect((await remove(a, stale, 'wrong')).text).toBe(RECENT);
      expect(await exists(user.id)).toBe(true);
      const fresh = await aal2(user, secret);
      const done = await remove(a, fresh, user.password);
      expect([done.status, done.text]).toEqual([200, '{"message":"Compte supprimé"}']);
    } finally {
      clock.advance(-(5 * MINUTE + 2000));
    }
    expect(await exists(user.id)).toBe(false);
  });

  it('a user without a second factor deletes with the password, however old the sign-in', async () => {
    const user = await makeUser(a);
    clock.advance(30 * MINUTE);
    try {
      // An access token lives 15 minutes: sign in is refreshed, its auth_time kept.
      const refreshed = await a.post('/api/v1/auth/refresh', { refresh_token: user.refresh });
      const done = await remove(b, refreshed.json.access_token as string, user.password);
      expect(done.status, done.text).toBe(200);
    } finally {
      clock.advance(-30 * MINUTE);
    }
  });
});
