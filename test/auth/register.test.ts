import { afterAll, beforeAll, expect, it } from 'vitest';
import { closeSql, describeWithServices, newEmail, newPassword, sql, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';

describeWithServices('POST /api/v1/auth/register', () => {
  let gw: TestGateway;
  beforeAll(async () => { gw = await startTestGateway(testConfig()); });
  afterAll(async () => { await gw?.close(); await closeSql(); });

  it('creates the user and its subscription, lower-casing the email', async () => {
    const email = newEmail();
    const res = await gw.post('/api/v1/auth/register', { email: `  ${email.toUpperCase()} `, password: newPassword() });
    expect(res.status).toBe(201);
    expect(res.json).toEqual({ message: expect.any(String), user_id: expect.any(Number) });
    const [user] = await sql('SELECT email, plan, is_active, daily_usage, last_usage_date, password_hash FROM users WHERE id = $1', [res.json.user_id]);
    expect(user).toMatchObject({ email, plan: 'free', is_active: 1, daily_usage: 0, last_usage_date: null });
    expect(String(user!.password_hash)).toMatch(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
    expect(await sql('SELECT plan FROM subscriptions WHERE user_id = $1', [res.json.user_id])).toEqual([{ plan: 'free' }]);
  });

  it('answers 409 to ten parallel registrations of one email but one', async () => {
    const email = newEmail();
    const results = await Promise.all(Array.from({ length: 10 }, () => gw.post('/api/v1/auth/register', { email, password: newPassword() })));
    expect(results.map((r) => r.status).sort()).toEqual([201, ...Array(9).fill(409)]);
    for (const r of results.filter((x) => x.status === 409)) expect(r.json).toEqual({ error: 'Email déjà enregistré' });
    expect(await sql('SELECT count(*)::int AS n FROM users WHERE email = $1', [email])).toEqual([{ n: 1 }]);
  });
});
