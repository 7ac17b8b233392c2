// CONTRACT §24: an operator creates a user (POST /admin/v1/users {email, plan?}); the user receives
// an `account_invitation` mail whose link is mail.resetUrl with a single-use token valid 7 days, and
// redeeming it (POST /api/v1/auth/password/reset) sets the password and verifies the address. On
// two instances; the admin API's plans (GET /admin/v1/plans) are the configuration's; user objects
// carry `active` beside `is_active`.
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import { ADMIN_KEY, bearer, closeSql, describeWithServices, newEmail, newPassword, sql, startTestGateway, startTwoGateways, testClock, testConfig, type TestGateway } from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { mailSettings, startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';

const RESET = '/api/v1/auth/password/reset';
const DAY = 86_400_000;
const PLANS = { limits: { team: { daily: 5000, monthly: 100000 } } };

describeWithServices('admin: creating a user, invited by mail', () => {
  let smtp: SmtpCatcher;
  let a: TestGateway;
  let b: TestGateway;
  let adminApp: FastifyInstance;
  let url: string;
  const clock = testClock();
  const admin = (method: string, path: string, json?: unknown) => request(url, method, path, { headers: bearer(ADMIN_KEY), ...(json === undefined ? {} : { json }) });

  beforeAll(async () => {
    smtp = await startSmtpCatcher();
    [a, b] = await startTwoGateways(testConfig({ mail: mailSettings(smtp), plans: PLANS }), { clock });
    adminApp = await buildAdminApp(a.services);
    url = await adminApp.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await adminApp?.close();
    await Promise.all([a?.close(), b?.close()]);
    await smtp?.close();
    await closeSql();
  });

  /** Creates a user through the admin API and returns it with the token its invitation carries. */
  async function invite(plan?: string) {
    const email = newEmail('invited');
    const res = await admin('POST', '/admin/v1/users', plan === undefined ? { email } : { email, plan });
    expect(res.status).toBe(201);
    const mail = await smtp.waitFor(email);
    return { email, user: res.json, mail, token: mail.token! };
  }

  it('GET /admin/v1/plans lists the configuration\'s plans with their limits', async () => {
    const res = await admin('GET', '/admin/v1/plans');
    expect(res.status).toBe(200);
    expect(res.json.plans).toEqual([
      { name: 'free', daily: 1, monthly: null, per_minute: null },
      { name: 'premium', daily: null, monthly: null, per_minute: null },
      { name: 'pro', daily: null, monthly: null, per_minute: null },
      { name: 'team', daily: 5000, monthly: 100000, per_minute: null },
    ]);
    expect((await request(url, 'GET', '/admin/v1/plans')).status).toBe(401);
  });

  it('creates the user (201, no password, on the plan asked) and mails the invitation; the link sets the password and verifies the address', async () => {
    const { email, user, mail, token } = await invite('team');
    expect(user).toEqual({
      id: expect.any(Number), email, plan: 'team', is_active: 1, active: true, daily_usage: 0, last_usage_date: null, created_at: expect.any(String), email_verified_at: null, external_id: null,
    });
    expect(await sql('SELECT plan, password_hash FROM users WHERE id = $1', [user.id])).toEqual([{ plan: 'team', password_hash: null }]);
    expect(await sql('SELECT plan FROM subscriptions WHERE user_id = $1', [user.id])).toEqual([{ plan: 'team' }]);
    expect(await sql('SELECT type, actor, data FROM audit_events WHERE user_id = $1', [user.id])).toEqual([{ type: 'admin.user_created', actor: 'admin', data: { plan: 'team' } }]);
    expect(mail.subject).toBe('Votre compte a été créé');
    expect(mail.text).toContain(`Un compte a été créé pour vous avec l’adresse ${email}.`);
    expect(mail.text).toContain('dans les 7 jours');
    expect(mail.link).toBe(`https://app.example.test/reset-password?token=${token}`);
    const password = newPassword();
    const redeemed = await b.post(RESET, { token, new_password: password });
    expect(redeemed.status).toBe(200);
    const [row] = await sql<{ email_verified_at: Date | null }>('SELECT email_verified_at FROM users WHERE id = $1', [user.id]);
    expect(row!.email_verified_at).toBeInstanceOf(Date);
    const login = await a.post('/api/v1/auth/login', { email, password });
    expect(login.status).toBe(200);
    expect(login.json.plan).toBe('team');
    // Single use: the same link again is refused.
    expect((await a.post(RESET, { token, new_password: newPassword() })).json).toEqual({ error: 'Lien invalide ou expiré' });
  });

  it('a link redeemed twice at once, on two instances: one 200, one 400', async () => {
    const { email, token } = await invite();
    const passwords = [newPassword(), newPassword()];
    const answers = await Promise.all([a.post(RESET, { token, new_password: passwords[0] }), b.post(RESET, { token, new_password: passwords[1] })]);
    expect(answers.map((r) => r.status).sort()).toEqual([200, 400]);
    const won = passwords[answers.findIndex((r) => r.status === 200)];
    expect((await a.post('/api/v1/auth/login', { email, password: won })).status).toBe(200);
    expect((await a.post('/api/v1/auth/login', { email, password: passwords.find((p) => p !== won) })).status).toBe(401);
  });

  it('a link works 7 days, and not a second more', async () => {
    const early = await invite();
    const late = await invite();
    clock.advance(7 * DAY - 5_000);
    expect((await a.post(RESET, { token: early.token, new_password: newPassword() })).status).toBe(200);
    clock.advance(10_000);
    const refused = await a.post(RESET, { token: late.token, new_password: newPassword() });
    expect(refused.status).toBe(400);
    expect(refused.json).toEqual({ error: 'Lien invalide ou expiré' });
    clock.advance(-7 * DAY - 5_000);
  });

  it('refuses a taken email (409), a malformed one and an unknown plan (400), writing nothing', async () => {
    const { email } = await invite();
    const taken = await admin('POST', '/admin/v1/users', { email: email.toUpperCase() });
    expect(taken.status).toBe(409);
    expect(taken.json).toEqual({ error: 'Email déjà enregistré' });
    expect((await admin('POST', '/admin/v1/users', { email: 'not-an-email' })).json).toEqual({ error: 'Email invalide' });
    expect((await admin('POST', '/admin/v1/users', {})).status).toBe(400);
    const other = newEmail('invited');
    const plan = await admin('POST', '/admin/v1/users', { email: other, plan: 'gold' });
    expect(plan.status).toBe(400);
    expect(plan.json).toEqual({ error: 'Plan inconnu (free, premium, pro ou team)' });
    expect(await sql('SELECT id FROM users WHERE email = $1', [other])).toEqual([]);
    expect(smtp.to(email)).toHaveLength(1);
  });

  describe('without mail', () => {
    let bare: TestGateway;
    let bareAdmin: FastifyInstance;
    beforeAll(async () => {
      bare = await startTestGateway(testConfig());
      bareAdmin = await buildAdminApp(bare.services);
    });
    afterAll(async () => {
      await bareAdmin?.close();
      await bare?.close();
    });

    it('answers 503 mail_unavailable and creates nothing: nobody could be told about the account', async () => {
      const email = newEmail('invited');
      const res = await bareAdmin.inject({ method: 'POST', url: '/admin/v1/users', headers: bearer(ADMIN_KEY), payload: { email } });
      expect(res.statusCode).toBe(503);
      expect(res.json()).toEqual({ error: 'Envoi d’emails non configuré' });
      expect(await sql('SELECT id FROM users WHERE email = $1', [email])).toEqual([]);
    });
  });
});
