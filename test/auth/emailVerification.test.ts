// Email verification (CONTRACT §13): the link registration mails, email/verify, email/resend, and
// auth.requireVerifiedEmail, with a real SMTP server.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bearer, closeSql, describeWithServices, newEmail, newPassword, sql, startTestGateway, startTwoGateways, testClock, testConfig, type TestGateway,
} from '../helpers/gateway.js';
import { mailSettings, startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';

const VERIFY = '/api/v1/auth/email/verify';
const RESEND = '/api/v1/auth/email/resend';
const LINK_INVALID = { error: 'Lien invalide ou expiré' };
const NOT_VERIFIED = { error: 'Email non vérifié : ouvrez le lien de vérification reçu par email' };
const MINUTE = 60_000;

describeWithServices('email verification', () => {
  let smtp: SmtpCatcher;
  const clock = testClock();
  const running: TestGateway[] = [];

  beforeAll(async () => { smtp = await startSmtpCatcher(); });
  afterAll(async () => {
    await Promise.all(running.map((gw) => gw.close()));
    await smtp?.close();
    await closeSql();
  });

  async function register(gw: TestGateway) {
    const email = newEmail();
    const password = newPassword();
    const res = await gw.post('/api/v1/auth/register', { email, password });
    expect(res.status).toBe(201);
    return { id: res.json.user_id as number, email, password };
  }
  const verifiedAt = async (id: number) => (await sql<{ email_verified_at: Date | null }>('SELECT email_verified_at FROM users WHERE id = $1', [id]))[0]!.email_verified_at;

  describe('without auth.requireVerifiedEmail', () => {
    let a: TestGateway;
    let b: TestGateway;
    beforeAll(async () => {
      [a, b] = await startTwoGateways(testConfig({ mail: mailSettings(smtp) }), { clock });
      running.push(a, b);
    });

    it('registration mails a plain French verification link; opening it verifies the address, once', async () => {
      const user = await register(a);
      const mail = await smtp.waitFor(user.email);
      expect(mail.subject).toBe('Confirmez votre adresse email');
      expect(mail.contentType).toBe('text/plain');
      expect(mail.html).toBe(false);
      expect(mail.text).toContain(`l’adresse ${user.email} est bien la vôtre`);
      expect(mail.link).toMatch(/^https:\/\/app\.example\.test\/verify-email\?token=[A-Za-z0-9_-]{43}$/);
      expect(await verifiedAt(user.id)).toBeNull();
      // Login works unverified when verification is not required.
      const login = await b.post('/api/v1/auth/login', { email: user.email, password: user.password });
      expect(login.status).toBe(200);
      expect((await b.get('/api/v1/user/me', { headers: bearer(login.json.access_token) })).json.email_verified_at).toBeNull();

      const res = await b.post(VERIFY, { token: mail.token });
      expect(res.status).toBe(200);
      expect(res.json).toEqual({ message: 'Email vérifié' });
      expect(await verifiedAt(user.id)).toBeInstanceOf(Date);
      // Cached users follow (the verification is announced like a plan change), on both instances.
      for (const gw of [a, b]) {
        await expect.poll(async () => (await gw.get('/api/v1/user/me', { headers: bearer(login.json.access_token) })).json.email_verified_at).toEqual(expect.any(String));
      }
      expect((await a.post(VERIFY, { token: mail.token })).json).toEqual(LINK_INVALID);
    });

    it('refuses made-up, missing and expired (24 h) links with 400', async () => {
      const user = await register(a);
      const mail = await smtp.waitFor(user.email);
      for (const body of [{ token: 'nope' }, { token: '' }, {}, { token: ['x'] }]) {
        const res = await a.post(VERIFY, body);
        expect(res.status).toBe(400);
        expect(res.json).toEqual(LINK_INVALID);
      }
      clock.advance(24 * 60 * MINUTE + MINUTE);
      try {
        expect((await b.post(VERIFY, { token: mail.token })).json).toEqual(LINK_INVALID);
      } finally {
        clock.advance(-(24 * 60 * MINUTE + MINUTE));
      }
      expect(await verifiedAt(user.id)).toBeNull();
    });

    it('a reset link cannot verify, nor a verification link reset', async () => {
      const user = await register(a);
      const verify = await smtp.waitFor(user.email);
      expect((await a.post('/api/v1/auth/password/reset', { token: verify.token, new_password: newPassword() })).json).toEqual(LINK_INVALID);
      await a.post('/api/v1/auth/password/forgot', { email: user.email });
      const reset = await smtp.waitFor(user.email, 2);
      expect((await a.post(VERIFY, { token: reset.token })).json).toEqual(LINK_INVALID);
    });

    it('a link sent to an address the account no longer has does not verify the new one', async () => {
      const user = await register(a);
      const mail = await smtp.waitFor(user.email);
      const changed = newEmail();
      await sql('UPDATE users SET email = $2 WHERE id = $1', [user.id, changed]);
      expect((await a.post(VERIFY, { token: mail.token })).json).toEqual(LINK_INVALID);
      expect(await verifiedAt(user.id)).toBeNull();
    });

    it('email/resend mails a new link (at most one a minute); once verified, says so and mails nothing', async () => {
      const user = await register(a);
      await smtp.waitFor(user.email);
      const access = (await a.post('/api/v1/auth/login', { email: user.email, password: user.password })).json.access_token as string;
      expect((await b.post(RESEND, {})).status).toBe(401);

      const soon = await b.post(RESEND, {}, { headers: bearer(access) });
      expect(soon.status).toBe(202);
      expect(soon.json).toEqual({ message: 'Lien de vérification envoyé' });
      await b.services.mailer.idle();
      expect(smtp.to(user.email)).toHaveLength(1); // registration's link was sent less than a minute ago

      clock.advance(2 * MINUTE);
      expect((await b.post(RESEND, {}, { headers: bearer(access) })).status).toBe(202);
      const second = await smtp.waitFor(user.email, 2);
      expect(second.token).not.toBe(smtp.to(user.email)[0]!.token);
      // Both links work until used (either verifies).
      expect((await a.post(VERIFY, { token: second.token })).status).toBe(200);

      clock.advance(2 * MINUTE);
      expect((await b.post(RESEND, {}, { headers: bearer(access) })).json).toEqual({ message: 'Email déjà vérifié' });
      await b.services.mailer.idle();
      expect(smtp.to(user.email)).toHaveLength(2);
    });
  });

  describe('with auth.requireVerifiedEmail: true', () => {
    let gw: TestGateway;
    beforeAll(async () => {
      gw = await startTestGateway(testConfig({ mail: mailSettings(smtp), auth: { requireVerifiedEmail: true } }), { clock });
      running.push(gw);
    });

    it('refuses login of an unverified account with 403, mails a fresh link, and lets it in once verified', async () => {
      const user = await register(gw);
      const first = await smtp.waitFor(user.email);
      clock.advance(2 * MINUTE);
      const refused = await gw.post('/api/v1/auth/login', { email: user.email, password: user.password });
      expect(refused.status).toBe(403);
      expect(refused.json).toEqual(NOT_VERIFIED);
      expect(await sql('SELECT 1 FROM refresh_tokens WHERE user_id = $1', [user.id])).toEqual([]);
      // A new link, for whoever lost the first one.
      const fresh = await smtp.waitFor(user.email, 2);
      expect(fresh.token).not.toBe(first.token);
      expect((await gw.post(VERIFY, { token: fresh.token })).status).toBe(200);
      expect((await gw.post('/api/v1/auth/login', { email: user.email, password: user.password })).status).toBe(200);
    });

    it('a wrong password still gets 401, and no mail: the 403 is only for whoever knows the password', async () => {
      const user = await register(gw);
      await smtp.waitFor(user.email);
      clock.advance(2 * MINUTE);
      const res = await gw.post('/api/v1/auth/login', { email: user.email, password: `${user.password}x` });
      expect(res.status).toBe(401);
      expect(res.json).toEqual({ error: 'Identifiants invalides' });
      await gw.services.mailer.idle();
      expect(smtp.to(user.email)).toHaveLength(1);
    });

    it('a password reset verifies the address: the link went there and came back', async () => {
      const user = await register(gw);
      await smtp.waitFor(user.email);
      clock.advance(2 * MINUTE);
      await gw.post('/api/v1/auth/password/forgot', { email: user.email });
      const reset = await smtp.waitFor(user.email, 2);
      const next = newPassword();
      expect((await gw.post('/api/v1/auth/password/reset', { token: reset.token, new_password: next })).status).toBe(200);
      expect((await gw.post('/api/v1/auth/login', { email: user.email, password: next })).status).toBe(200);
    });
  });

  it('without mail.smtp, email/resend answers 503', async () => {
    const bare = await startTestGateway(testConfig());
    running.push(bare);
    const user = await register(bare);
    const access = (await bare.post('/api/v1/auth/login', { email: user.email, password: user.password })).json.access_token as string;
    const res = await bare.post(RESEND, {}, { headers: bearer(access) });
    expect(res.status).toBe(503);
    expect(res.json).toEqual({ error: 'Envoi d’emails non configuré' });
  });
});
