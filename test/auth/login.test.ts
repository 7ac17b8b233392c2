import argon2 from 'argon2';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../src/credentials/digest.js';
import { closeSql, describeWithServices, newEmail, newPassword, sql, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';
import { alike, compareTimings } from '../helpers/timing.js';

const LOGIN = '/api/v1/auth/login';
const REQUIRED = { error: 'Email et mot de passe requis' };
const INVALID = { error: 'Identifiants invalides' };
const DAY_MS = 86_400_000;

describeWithServices('POST /api/v1/auth/login', () => {
  let gw: TestGateway;
  beforeAll(async () => { gw = await startTestGateway(testConfig()); });
  afterAll(async () => { await gw?.close(); await closeSql(); });

  async function registered(): Promise<{ id: number; email: string; password: string }> {
    const email = newEmail();
    const password = newPassword();
    const res = await gw.post('/api/v1/auth/register', { email, password });
    expect(res.status).toBe(201);
    return { id: res.json.user_id, email, password };
  }

  const tokenRows = (userId: number) => sql('SELECT token_hash, expires_at, revoked FROM refresh_tokens WHERE user_id = $1 ORDER BY id', [userId]);

  describe('empty fields → 400 "Email et mot de passe requis"', () => {
    const cases: Array<[string, Record<string, unknown>]> = [
      ['both missing', {}],
      ['email missing', { password: 'whatever-123' }],
      ['password missing', { email: 'a@example.test' }],
      ['email empty', { email: '', password: 'whatever-123' }],
      ['email whitespace only', { email: '   ', password: 'whatever-123' }],
      ['password empty', { email: 'a@example.test', password: '' }],
      ['email not a string', { email: 7, password: 'whatever-123' }],
      ['password not a string', { email: 'a@example.test', password: 12345678 }],
    ];
    for (const [name, body] of cases) {
      it(name, async () => {
        const res = await gw.post(LOGIN, body);
        expect(res.status).toBe(400);
        expect(res.json).toEqual(REQUIRED);
      });
    }
  });

  describe('unknown email, inactive user, wrong password → the same 401 "Identifiants invalides"', () => {
    it('all three give byte-identical answers and issue no token', async () => {
      const user = await registered();
      const inactive = await registered();
      await sql('UPDATE users SET is_active = 0 WHERE id = $1', [inactive.id]);
      const answers = [
        await gw.post(LOGIN, { email: newEmail(), password: newPassword() }),
        await gw.post(LOGIN, { email: inactive.email, password: inactive.password }),
        await gw.post(LOGIN, { email: user.email, password: `${user.password}x` }),
        await gw.post(LOGIN, { email: user.email, password: user.password.toUpperCase() }),
        // No account can have one (Postgres text refuses NUL): without the check this was a 500.
        await gw.post(LOGIN, { email: `${user.email}\u0000`, password: user.password }),
      ];
      for (const res of answers) {
        expect(res.status).toBe(401);
        expect(res.json).toEqual(INVALID);
        expect(res.text).toBe(answers[0]!.text);
      }
      expect(await tokenRows(user.id)).toEqual([]);
      expect(await tokenRows(inactive.id)).toEqual([]);
    });

    it('takes as long for an unknown email as for a known one with a wrong password (no enumeration by timing)', async () => {
      // Without the dummy verification an unknown email answers in ~1 ms against ~20 ms or more
      // for a real one: a factor of 10 at least, far outside the tolerance (half to twice).
      const user = await registered();
      const answered401 = (body: Record<string, string>) => async () => expect((await gw.post(LOGIN, body)).status).toBe(401);
      const timing = await compareTimings(answered401({ email: newEmail(), password: newPassword() }), answered401({ email: user.email, password: `${user.password}x` }));
      expect(alike(timing), JSON.stringify(timing)).toBe(true);
    });

    it('a password over 1024 bytes → 401 (not 400), even for the right email', async () => {
      const user = await registered();
      const res = await gw.post(LOGIN, { email: user.email, password: 'a'.repeat(1025) });
      expect(res.status).toBe(401);
      expect(res.json).toEqual(INVALID);
    });
  });

  it('accepts the email in another case with spaces, and returns the token pair', async () => {
    const user = await registered();
    const res = await gw.post(LOGIN, { email: `  ${user.email.toUpperCase()}  `, password: user.password });
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ access_token: expect.any(String), refresh_token: expect.any(String), token_type: 'Bearer', plan: 'free' });
    expect(Object.keys(res.json).sort()).toEqual(['access_token', 'plan', 'refresh_token', 'token_type']);
  });

  it('issues an access token with sub, plan, email, jti, typ at+jwt and a 15-minute life', async () => {
    const user = await registered();
    await sql('UPDATE users SET plan = $2 WHERE id = $1', [user.id, 'premium']);
    const res = await gw.post(LOGIN, { email: user.email, password: user.password });
    expect(res.status).toBe(200);
    expect(res.json.plan).toBe('premium');
    const header = decodeProtectedHeader(res.json.access_token);
    expect(header).toMatchObject({ alg: 'HS256', typ: 'at+jwt' });
    const claims = decodeJwt(res.json.access_token);
    expect(claims).toMatchObject({ sub: String(user.id), plan: 'premium', email: user.email });
    expect(typeof claims.sub).toBe('string');
    expect(claims.jti).toEqual(expect.any(String));
    expect(claims.exp! - claims.iat!).toBe(15 * 60);

    const refreshHeader = decodeProtectedHeader(res.json.refresh_token);
    expect(refreshHeader.typ).toBe('refresh+jwt');
    const refreshClaims = decodeJwt(res.json.refresh_token);
    expect(refreshClaims.sub).toBe(String(user.id));
    expect(refreshClaims.exp! - refreshClaims.iat!).toBe(30 * 86_400);
    expect(refreshClaims.plan).toBeUndefined();
  });

  it('stores the refresh token as the sha256 hex of the raw token, expiring in 30 days, not revoked', async () => {
    const user = await registered();
    const before = Date.now();
    const res = await gw.post(LOGIN, { email: user.email, password: user.password });
    const after = Date.now();
    expect(res.status).toBe(200);
    const rows = await tokenRows(user.id);
    expect(rows).toHaveLength(1);
    const row = rows[0]!;
    expect(row.token_hash).toBe(sha256Hex(res.json.refresh_token));
    expect(row.token_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(row.revoked).toBe(0);
    const expires = (row.expires_at as Date).getTime();
    expect(expires).toBeGreaterThanOrEqual(before + 30 * DAY_MS);
    expect(expires).toBeLessThanOrEqual(after + 30 * DAY_MS);
    // The raw token is stored nowhere.
    expect(await sql('SELECT id FROM refresh_tokens WHERE token_hash = $1', [res.json.refresh_token])).toEqual([]);
  });

  it('each login is a new session: two logins, two distinct active rows and tokens', async () => {
    const user = await registered();
    const a = await gw.post(LOGIN, { email: user.email, password: user.password });
    const b = await gw.post(LOGIN, { email: user.email, password: user.password });
    expect(a.json.refresh_token).not.toBe(b.json.refresh_token);
    expect(a.json.access_token).not.toBe(b.json.access_token);
    const rows = await tokenRows(user.id);
    expect(rows.map((r) => r.revoked)).toEqual([0, 0]);
  });

  it('a password hashed with other argon2 settings still logs in, and is rehashed to the current ones', async () => {
    const user = await registered();
    const earlier = await argon2.hash(user.password, { type: argon2.argon2id, memoryCost: 4096, timeCost: 3, parallelism: 1 });
    await sql('UPDATE users SET password_hash = $2 WHERE id = $1', [user.id, earlier]);
    const wrong = await gw.post(LOGIN, { email: user.email, password: `${user.password}x` });
    expect(wrong.status).toBe(401);
    expect((await sql('SELECT password_hash FROM users WHERE id = $1', [user.id]))[0]!.password_hash).toBe(earlier);
    const res = await gw.post(LOGIN, { email: user.email, password: user.password });
    expect(res.status).toBe(200);
    const [row] = await sql('SELECT password_hash FROM users WHERE id = $1', [user.id]);
    expect(String(row!.password_hash)).toMatch(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
    expect(await argon2.verify(String(row!.password_hash), user.password)).toBe(true);
    expect((await gw.post(LOGIN, { email: user.email, password: user.password })).status).toBe(200);
  });

  it('the access token is accepted by the gateway: GET /api/v1/user/me', async () => {
    const user = await registered();
    const login = await gw.post(LOGIN, { email: user.email, password: user.password });
    const me = await gw.get('/api/v1/user/me', { headers: { authorization: `Bearer ${login.json.access_token}` } });
    expect(me.status).toBe(200);
    expect(me.json).toMatchObject({ user_id: user.id, email: user.email, plan: 'free' });
  });
});
