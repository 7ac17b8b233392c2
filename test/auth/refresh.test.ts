import { decodeJwt } from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../src/credentials/digest.js';
import {
  closeSql, describeWithServices, makeUser, sql, startTestGateway, startTwoGateways, testClock, testConfig, type TestGateway,
} from '../helpers/gateway.js';

const REFRESH = '/api/v1/auth/refresh';
const MISSING = { error: 'refresh_token manquant' };
const UNDECODABLE = { error: 'Refresh token invalide ou expiré' };
const INACTIVE = { error: 'Refresh token invalide, révoqué ou expiré' };
const USER_NOT_FOUND = { error: 'Utilisateur introuvable' };
const DAY_MS = 86_400_000;

interface TokenRow { id: string; token_hash: string; expires_at: Date; revoked: number }
const tokenRows = (userId: number) => sql<TokenRow>('SELECT id, token_hash, expires_at, revoked FROM refresh_tokens WHERE user_id = $1 ORDER BY id', [userId]);
const rowOf = async (token: string) => (await sql<TokenRow>('SELECT id, token_hash, expires_at, revoked FROM refresh_tokens WHERE token_hash = $1', [sha256Hex(token)]))[0];

describeWithServices('POST /api/v1/auth/refresh', () => {
  const clock = testClock();
  let gw: TestGateway;
  beforeAll(async () => { gw = await startTestGateway(testConfig(), { clock }); });
  afterEach(() => clock.set(new Date()));
  afterAll(async () => { await gw?.close(); await closeSql(); });

  describe('refresh_token empty → 400 "refresh_token manquant"', () => {
    const cases: Array<[string, Record<string, unknown>]> = [
      ['missing', {}],
      ['empty', { refresh_token: '' }],
      ['whitespace only', { refresh_token: ' \t\n ' }],
      ['a number', { refresh_token: 123 }],
      ['null', { refresh_token: null }],
      ['an object', { refresh_token: { token: 'x' } }],
    ];
    for (const [name, body] of cases) {
      it(name, async () => {
        const res = await gw.post(REFRESH, body);
        expect(res.status).toBe(400);
        expect(res.json).toEqual(MISSING);
      });
    }
  });

  it('a garbage token → 401 "Refresh token invalide ou expiré"', async () => {
    for (const token of ['garbage', 'a.b.c', 'eyJhbGciOiJIUzI1NiJ9.e30.', `${'x'.repeat(5000)}`]) {
      const res = await gw.post(REFRESH, { refresh_token: token });
      expect(res.status).toBe(401);
      expect(res.json).toEqual(UNDECODABLE);
    }
  });

  it('rotates: the old row is revoked, a new row holds the new token\'s hash for 30 days, a new pair is returned', async () => {
    const user = await makeUser(gw);
    const before = Date.now();
    const res = await gw.post(REFRESH, { refresh_token: `  ${user.refresh}\n` });
    const after = Date.now();
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ access_token: expect.any(String), refresh_token: expect.any(String), token_type: 'Bearer', plan: 'free' });
    expect(res.json.refresh_token).not.toBe(user.refresh);
    expect(res.json.access_token).not.toBe(user.access);

    const rows = await tokenRows(user.id);
    expect(rows).toHaveLength(2);
    expect(rows[0]).toMatchObject({ token_hash: sha256Hex(user.refresh), revoked: 1 });
    expect(rows[1]).toMatchObject({ token_hash: sha256Hex(res.json.refresh_token), revoked: 0 });
    expect(rows[1]!.expires_at.getTime()).toBeGreaterThanOrEqual(before + 30 * DAY_MS);
    expect(rows[1]!.expires_at.getTime()).toBeLessThanOrEqual(after + 30 * DAY_MS);

    const claims = decodeJwt(res.json.access_token);
    expect(claims).toMatchObject({ sub: String(user.id), plan: 'free', email: user.email });
    // The new refresh token works in turn.
    const again = await gw.post(REFRESH, { refresh_token: res.json.refresh_token });
    expect(again.status).toBe(200);
  });

  it('takes plan and email from the current user record, not from the old tokens', async () => {
    const user = await makeUser(gw);
    const newAddress = `changed-${user.email}`;
    await sql('UPDATE users SET plan = $2, email = $3 WHERE id = $1', [user.id, 'pro', newAddress]);
    const res = await gw.post(REFRESH, { refresh_token: user.refresh });
    expect(res.status).toBe(200);
    expect(res.json.plan).toBe('pro');
    expect(decodeJwt(res.json.access_token)).toMatchObject({ sub: String(user.id), plan: 'pro', email: newAddress });
  });

  it('a token used a second time → 401 "Refresh token invalide, révoqué ou expiré", and nothing new is stored', async () => {
    const user = await makeUser(gw);
    expect((await gw.post(REFRESH, { refresh_token: user.refresh })).status).toBe(200);
    const rowsBefore = await tokenRows(user.id);
    const res = await gw.post(REFRESH, { refresh_token: user.refresh });
    expect(res.status).toBe(401);
    expect(res.json).toEqual(INACTIVE);
    // Under the default refreshReuse: reject, the session that rotated stays alive.
    expect(await tokenRows(user.id)).toEqual(rowsBefore);
  });

  it('a JWT past its expiry (31 days later) → 401 "Refresh token invalide ou expiré"', async () => {
    const user = await makeUser(gw);
    clock.advance(31 * DAY_MS);
    const res = await gw.post(REFRESH, { refresh_token: user.refresh });
    expect(res.status).toBe(401);
    expect(res.json).toEqual(UNDECODABLE);
    expect((await rowOf(user.refresh))!.revoked).toBe(0);
  });

  it('a valid JWT whose stored expires_at is past → 401 "Refresh token invalide, révoqué ou expiré"', async () => {
    const user = await makeUser(gw);
    await sql(`UPDATE refresh_tokens SET expires_at = now() - interval '1 minute' WHERE token_hash = $1`, [sha256Hex(user.refresh)]);
    const res = await gw.post(REFRESH, { refresh_token: user.refresh });
    expect(res.status).toBe(401);
    expect(res.json).toEqual(INACTIVE);
    expect(await tokenRows(user.id)).toHaveLength(1);
  });

  it('a valid JWT with no stored row → 401 "Refresh token invalide, révoqué ou expiré"', async () => {
    const user = await makeUser(gw);
    await sql('DELETE FROM refresh_tokens WHERE user_id = $1', [user.id]);
    const res = await gw.post(REFRESH, { refresh_token: user.refresh });
    expect(res.status).toBe(401);
    expect(res.json).toEqual(INACTIVE);
    expect(await tokenRows(user.id)).toEqual([]);
  });

  it('a deactivated user → 401 "Utilisateur introuvable"; the token stays active and works once the user is back', async () => {
    const user = await makeUser(gw);
    await sql('UPDATE users SET is_active = 0 WHERE id = $1', [user.id]);
    const res = await gw.post(REFRESH, { refresh_token: user.refresh });
    expect(res.status).toBe(401);
    expect(res.json).toEqual(USER_NOT_FOUND);
    const rows = await tokenRows(user.id);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.revoked).toBe(0);

    await sql('UPDATE users SET is_active = 1 WHERE id = $1', [user.id]);
    expect((await gw.post(REFRESH, { refresh_token: user.refresh })).status).toBe(200);
  });

  it('a deleted user → 401 "Refresh token invalide, révoqué ou expiré" (its rows went with it)', async () => {
    const user = await makeUser(gw);
    await sql('DELETE FROM users WHERE id = $1', [user.id]);
    const res = await gw.post(REFRESH, { refresh_token: user.refresh });
    expect(res.status).toBe(401);
    expect(res.json).toEqual(INACTIVE);
  });

  it('20 parallel refreshes of one token over two instances: one 200, nineteen 401, one new active row', async () => {
    const [a, b] = await startTwoGateways(testConfig());
    try {
      const user = await makeUser(a);
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).post(REFRESH, { refresh_token: user.refresh })));
      const ok = results.filter((r) => r.status === 200);
      expect(ok).toHaveLength(1);
      for (const r of results.filter((x) => x.status !== 200)) {
        expect(r.status).toBe(401);
        expect(r.json).toEqual(INACTIVE);
      }
      const rows = await tokenRows(user.id);
      expect(rows).toHaveLength(2);
      expect(rows.filter((r) => r.revoked === 0).map((r) => r.token_hash)).toEqual([sha256Hex(ok[0]!.json.refresh_token)]);
      expect((await rowOf(user.refresh))!.revoked).toBe(1);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});

describeWithServices('auth.refreshReuse', () => {
  let reject: TestGateway;
  let revokeAll: TestGateway;
  beforeAll(async () => {
    [reject, revokeAll] = await Promise.all([
      startTestGateway(testConfig({ auth: { refreshReuse: 'reject' } })),
      startTestGateway(testConfig({ auth: { refreshReuse: 'revoke-all' } })),
    ]);
  });
  afterAll(async () => { await Promise.all([reject?.close(), revokeAll?.close()]); await closeSql(); });

  /** Two sessions (two logins); session one is rotated once; returns the user and its tokens. */
  async function twoSessionsOneRotated(gw: TestGateway) {
    const user = await makeUser(gw);
    const second = await gw.post('/api/v1/auth/login', { email: user.email, password: user.password });
    const rotated = await gw.post(REFRESH, { refresh_token: user.refresh });
    expect(rotated.status).toBe(200);
    return { user, otherSession: second.json.refresh_token as string, current: rotated.json.refresh_token as string };
  }

  it('revoke-all: presenting a rotated-away token again revokes every active refresh token of the user', async () => {
    const { user, otherSession, current } = await twoSessionsOneRotated(revokeAll);
    const other = await makeUser(revokeAll);
    const res = await revokeAll.post(REFRESH, { refresh_token: user.refresh });
    expect(res.status).toBe(401);
    expect(res.json).toEqual(INACTIVE);
    const rows = await tokenRows(user.id);
    expect(rows).toHaveLength(3);
    expect(rows.every((r) => r.revoked === 1)).toBe(true);
    for (const token of [current, otherSession]) {
      const r = await revokeAll.post(REFRESH, { refresh_token: token });
      expect(r.status).toBe(401);
      expect(r.json).toEqual(INACTIVE);
    }
    // Other users are untouched.
    expect((await rowOf(other.refresh))!.revoked).toBe(0);
  });

  it('revoke-all: a logged-out token presented again revokes nothing else (it was not stolen by rotation)', async () => {
    const user = await makeUser(revokeAll);
    const second = await revokeAll.post('/api/v1/auth/login', { email: user.email, password: user.password });
    expect((await revokeAll.post('/api/v1/auth/logout', { refresh_token: user.refresh })).status).toBe(200);
    const res = await revokeAll.post(REFRESH, { refresh_token: user.refresh });
    expect(res.status).toBe(401);
    expect(res.json).toEqual(INACTIVE);
    expect((await rowOf(second.json.refresh_token))!.revoked).toBe(0);
  });

  it('reject: the rotated-away token is refused and the other sessions stay active', async () => {
    const { user, otherSession, current } = await twoSessionsOneRotated(reject);
    const res = await reject.post(REFRESH, { refresh_token: user.refresh });
    expect(res.status).toBe(401);
    expect(res.json).toEqual(INACTIVE);
    expect((await rowOf(current))!.revoked).toBe(0);
    expect((await rowOf(otherSession))!.revoked).toBe(0);
    expect((await reject.post(REFRESH, { refresh_token: current })).status).toBe(200);
  });
});
