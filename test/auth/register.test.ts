import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeSql, describeWithServices, newEmail, newPassword, sql, startTestGateway, startTwoGateways, testConfig, type TestGateway } from '../helpers/gateway.js';

const REGISTER = '/api/v1/auth/register';
const EMAIL_INVALID = { error: 'Email invalide' };
const TOO_SHORT = { error: 'Mot de passe trop court (min 8 caractères)' };
const TOO_LONG = { error: 'Mot de passe trop long (max 1024 octets)' };
const TAKEN = { error: 'Email déjà enregistré' };

describeWithServices('POST /api/v1/auth/register', () => {
  let gw: TestGateway;
  beforeAll(async () => { gw = await startTestGateway(testConfig()); });
  afterAll(async () => { await gw?.close(); await closeSql(); });

  const usersWith = async (email: string) => (await sql<{ n: number }>('SELECT count(*)::int AS n FROM users WHERE email = $1', [email]))[0]!.n;

  it('creates the user and its subscription, lower-casing the email', async () => {
    const email = newEmail();
    const res = await gw.post(REGISTER, { email: `  ${email.toUpperCase()} `, password: newPassword() });
    expect(res.status).toBe(201);
    expect(res.json).toEqual({ message: expect.any(String), user_id: expect.any(Number) });
    expect(Number.isInteger(res.json.user_id)).toBe(true);
    const [user] = await sql('SELECT email, plan, is_active, daily_usage, last_usage_date, password_hash FROM users WHERE id = $1', [res.json.user_id]);
    expect(user).toMatchObject({ email, plan: 'free', is_active: 1, daily_usage: 0, last_usage_date: null });
    expect(String(user!.password_hash)).toMatch(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
    expect(await sql('SELECT plan FROM subscriptions WHERE user_id = $1', [res.json.user_id])).toEqual([{ plan: 'free' }]);
  });

  describe('invalid email → 400 "Email invalide", nothing stored', () => {
    const cases: Array<[string, unknown]> = [
      ['empty', ''],
      ['whitespace only', '   \t '],
      ['without @', 'no-at-sign.example.test'],
      // Postgres text refuses NUL: without the check this was a 500 "Erreur interne".
      ['with a NUL character', 'nul\u0000@example.test'],
      ['a number', 42],
      ['null', null],
      ['an array', ['a@example.test']],
      ['an object', { email: 'a@example.test' }],
      ['missing', undefined],
    ];
    for (const [name, email] of cases) {
      it(name, async () => {
        const body: Record<string, unknown> = { password: newPassword() };
        if (email !== undefined) body.email = email;
        const res = await gw.post(REGISTER, body);
        expect(res.status).toBe(400);
        expect(res.json).toEqual(EMAIL_INVALID);
      });
    }

    it('is checked before the password', async () => {
      const res = await gw.post(REGISTER, { email: 'nope', password: 'x' });
      expect(res.status).toBe(400);
      expect(res.json).toEqual(EMAIL_INVALID);
    });
  });

  describe('password', () => {
    it('of 7 characters → 400, nothing stored', async () => {
      const email = newEmail();
      const res = await gw.post(REGISTER, { email, password: '1234567' });
      expect(res.status).toBe(400);
      expect(res.json).toEqual(TOO_SHORT);
      expect(res.text).toBe('{"error":"Mot de passe trop court (min 8 caractères)"}');
      expect(await usersWith(email)).toBe(0);
    });

    it('missing, empty or not a string → too short', async () => {
      for (const password of [undefined, '', 12345678, null, ['12345678'], true]) {
        const body: Record<string, unknown> = { email: newEmail() };
        if (password !== undefined) body.password = password;
        const res = await gw.post(REGISTER, body);
        expect(res.status).toBe(400);
        expect(res.json).toEqual(TOO_SHORT);
      }
    });

    it('is counted in characters: 8 multi-byte characters pass, 7 emoji (14 UTF-16 units) do not', async () => {
      const ok = await gw.post(REGISTER, { email: newEmail(), password: 'éàçüöñßø' });
      expect(ok.status).toBe(201);
      const short = await gw.post(REGISTER, { email: newEmail(), password: '😀😀😀😀😀😀😀' });
      expect(short.status).toBe(400);
      expect(short.json).toEqual(TOO_SHORT);
    });

    it('is not trimmed: 8 spaces are a valid password', async () => {
      const email = newEmail();
      expect((await gw.post(REGISTER, { email, password: '        ' })).status).toBe(201);
      const login = await gw.post('/api/v1/auth/login', { email, password: '        ' });
      expect(login.status).toBe(200);
    });

    it('of exactly 1024 bytes passes; over 1024 bytes → 400 "Mot de passe trop long (max 1024 octets)", nothing stored', async () => {
      expect((await gw.post(REGISTER, { email: newEmail(), password: 'a'.repeat(1024) })).status).toBe(201);
      const email = newEmail();
      // 513 characters, 1026 bytes: the limit is in bytes.
      const res = await gw.post(REGISTER, { email, password: 'é'.repeat(513) });
      expect(res.status).toBe(400);
      expect(res.json).toEqual(TOO_LONG);
      expect(await usersWith(email)).toBe(0);
    });
  });

  it('with auth.passwordMinLength 12, the message names 12', async () => {
    const strict = await startTestGateway(testConfig({ auth: { passwordMinLength: 12 } }));
    try {
      const res = await strict.post(REGISTER, { email: newEmail(), password: '12345678901' });
      expect(res.status).toBe(400);
      expect(res.json).toEqual({ error: 'Mot de passe trop court (min 12 caractères)' });
      expect((await strict.post(REGISTER, { email: newEmail(), password: '123456789012' })).status).toBe(201);
    } finally {
      await strict.close();
    }
  });

  describe('duplicate email → 409 "Email déjà enregistré"', () => {
    it('same email, other case and spaces; the first account is untouched', async () => {
      const email = newEmail();
      const first = await gw.post(REGISTER, { email, password: newPassword() });
      expect(first.status).toBe(201);
      const [before] = await sql('SELECT password_hash FROM users WHERE id = $1', [first.json.user_id]);
      const res = await gw.post(REGISTER, { email: ` ${email.toUpperCase()}`, password: newPassword() });
      expect(res.status).toBe(409);
      expect(res.json).toEqual(TAKEN);
      expect(await usersWith(email)).toBe(1);
      expect(await sql('SELECT password_hash FROM users WHERE id = $1', [first.json.user_id])).toEqual([before]);
    });

    it('also when the existing user is inactive', async () => {
      const email = newEmail();
      const first = await gw.post(REGISTER, { email, password: newPassword() });
      await sql('UPDATE users SET is_active = 0 WHERE id = $1', [first.json.user_id]);
      const res = await gw.post(REGISTER, { email, password: newPassword() });
      expect(res.status).toBe(409);
      expect(res.json).toEqual(TAKEN);
      expect(await sql('SELECT is_active FROM users WHERE email = $1', [email])).toEqual([{ is_active: 0 }]);
    });
  });

  it('answers 409 to ten parallel registrations of one email but one', async () => {
    const email = newEmail();
    const results = await Promise.all(Array.from({ length: 10 }, () => gw.post(REGISTER, { email, password: newPassword() })));
    expect(results.map((r) => r.status).sort()).toEqual([201, ...Array(9).fill(409)]);
    for (const r of results.filter((x) => x.status === 409)) expect(r.json).toEqual(TAKEN);
    expect(await usersWith(email)).toBe(1);
    expect(await sql('SELECT count(*)::int AS n FROM subscriptions s JOIN users u ON u.id = s.user_id WHERE u.email = $1', [email])).toEqual([{ n: 1 }]);
  });

  it('answers 409 to ten parallel registrations of one email spread over two instances but one', async () => {
    const [a, b] = await startTwoGateways(testConfig());
    try {
      const email = newEmail();
      const results = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).post(REGISTER, { email, password: newPassword() })));
      expect(results.map((r) => r.status).sort()).toEqual([201, ...Array(9).fill(409)]);
      for (const r of results.filter((x) => x.status === 409)) expect(r.json).toEqual(TAKEN);
      expect(await usersWith(email)).toBe(1);
      expect(await sql('SELECT count(*)::int AS n FROM subscriptions s JOIN users u ON u.id = s.user_id WHERE u.email = $1', [email])).toEqual([{ n: 1 }]);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});
