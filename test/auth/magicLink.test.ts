// Sign-in links by email (CONTRACT §14), on two instances sharing one database, with a real SMTP
// server: links are read out of the messages it received, TOTP codes computed from the secret.
import { authenticator } from '../helpers/totp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../src/credentials/digest.js';
import {
  bearer, claims, closeSql, describeWithServices, makeUser, newEmail, newPassword, ownRedisPrefix, sql, startTestGateway, startTwoGateways,
  testClock, testConfig, testConfigFromYaml, type TestGateway, type TestUser,
} from '../helpers/gateway.js';
import { docsExample } from '../helpers/docs.js';
import { mailSettings, startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { alike, compareTimings, visibleAnswer } from '../helpers/timing.js';

const REQUEST = '/api/v1/auth/magic-link';
const VERIFY = '/api/v1/auth/magic-link/verify';
const ACCEPTED = { message: 'Si un compte existe pour cet email, un lien de connexion vient d’être envoyé' };
const LINK_INVALID = { error: 'Lien invalide ou expiré' };
const SUBJECT = 'Votre lien de connexion';
const MAGIC_LINK = { url: 'https://app.example.test/magic?token={token}' };
const MINUTE = 60_000;

/** Whether `gw` logged `msg` for the user (the sign-in's own line, CONTRACT §14's way in named). */
const logged = (gw: TestGateway, msg: string, userId: number) =>
  gw.logs.some((line) => { const entry = JSON.parse(line) as { msg?: string; userId?: number }; return entry.msg === msg && entry.userId === userId; });

describeWithServices('magic links', () => {
  let smtp: SmtpCatcher;
  let a: TestGateway;
  let b: TestGateway;
  const clock = testClock();

  beforeAll(async () => {
    smtp = await startSmtpCatcher();
    [a, b] = await startTwoGateways(testConfig({ mail: mailSettings(smtp), auth: { magicLink: MAGIC_LINK } }), { clock });
  });
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await smtp?.close();
    await closeSql();
  });

  /** The sign-in messages to this address (registration sends a verification one first). */
  const magicMails = (email: string) => smtp.to(email).filter((m) => m.subject === SUBJECT);
  /** Asks for a link on `gw` and returns the n-th sign-in message to the user. */
  async function magicMail(user: { email: string }, n = 1, gw = a) {
    const res = await gw.post(REQUEST, { email: user.email });
    expect([res.status, res.json]).toEqual([202, ACCEPTED]);
    await expect.poll(() => magicMails(user.email).length).toBeGreaterThanOrEqual(n);
    return magicMails(user.email)[n - 1]!;
  }
  const idle = () => Promise.all([a.services.mailer.idle(), b.services.mailer.idle()]);

  it('mails a 15-minute single-use link, stored hashed, that signs in with amr ["email"] and verifies the address', async () => {
    const user = await makeUser(a);
    const mail = await magicMail(user, 1, b);
    expect(mail.from).toBe('Gateway <no-reply@example.test>');
    expect(mail.contentType).toBe('text/plain');
    expect(mail.text).toContain('ouvrez ce lien dans les 15 minutes');
    expect(mail.text).toContain(user.email);
    expect(mail.link).toMatch(/^https:\/\/app\.example\.test\/magic\?token=[A-Za-z0-9_-]{43}$/);
    const rows = await sql<{ token_hash: string; used_at: Date | null; ttl: number }>(
      "SELECT token_hash, used_at, EXTRACT(EPOCH FROM expires_at - created_at)::int AS ttl FROM email_tokens WHERE user_id = $1 AND purpose = 'magic'", [user.id]);
    expect(rows).toEqual([{ token_hash: sha256Hex(mail.token!), used_at: null, ttl: 15 * 60 }]);

    const before = Math.floor(clock().getTime() / 1000);
    const signIn = await a.post(VERIFY, { token: mail.token });
    expect(signIn.status).toBe(200);
    expect(logged(a, 'login by magic link', user.id)).toBe(true);
    expect(signIn.json).toEqual({ access_token: expect.any(String), refresh_token: expect.any(String), token_type: 'Bearer', plan: 'free' });
    expect(claims(signIn.json.access_token)).toMatchObject({ sub: String(user.id), amr: ['email'], acr: 'aal1' });
    expect(claims(signIn.json.access_token).auth_time).toBeGreaterThanOrEqual(before);
    expect((await b.get('/api/v1/user/me', { headers: bearer(signIn.json.access_token) })).json).toMatchObject({ user_id: user.id, email: user.email });
    // A refresh keeps the sign-in's assurance.
    const refreshed = await b.post('/api/v1/auth/refresh', { refresh_token: signIn.json.refresh_token });
    expect(claims(refreshed.json.access_token)).toMatchObject({ amr: ['email'], acr: 'aal1' });
    const [row] = await sql<{ email_verified_at: Date | null }>('SELECT email_verified_at FROM users WHERE id = $1', [user.id]);
    expect(row!.email_verified_at).toBeInstanceOf(Date);
    const audit = await sql<{ type: string; data: unknown }>("SELECT type, data FROM audit_events WHERE user_id = $1 AND type IN ('login.succeeded', 'email.verified') ORDER BY id", [user.id]);
    expect(audit).toEqual([
      { type: 'login.succeeded', data: { amr: ['pwd'] } },
      { type: 'email.verified', data: {} },
      { type: 'login.succeeded', data: { amr: ['email'] } },
    ]);

    for (const gw of [a, b]) expect([(await gw.post(VERIFY, { token: mail.token })).status, (await gw.post(VERIFY, { token: mail.token })).json]).toEqual([400, LINK_INVALID]);
  });

  it('refuses an expired link, a made-up one, a reset link, and none at all with 400 "Lien invalide ou expiré"', async () => {
    const user = await makeUser(a);
    const mail = await magicMail(user);
    await a.post('/api/v1/auth/password/forgot', { email: user.email });
    const reset = await smtp.waitFor(user.email, 3);
    clock.advance(16 * MINUTE);
    try {
      for (const body of [{ token: mail.token }, { token: 'made-up' }, { token: reset.token }, { token: 42 }, {}]) {
        const res = await b.post(VERIFY, body);
        expect([res.status, res.json], JSON.stringify(body)).toEqual([400, LINK_INVALID]);
      }
    } finally {
      clock.advance(-16 * MINUTE);
    }
    // The reset link is still good for its own purpose: the sign-in endpoint did not use it up.
    expect((await a.post(VERIFY, { token: reset.token })).json).toEqual(LINK_INVALID);
    expect((await a.post('/api/v1/auth/password/reset', { token: reset.token, new_password: 'another-good-password' })).status).toBe(200);
  });

  it('one link used ten times at once over two instances signs in once', async () => {
    const user = await makeUser(a);
    const mail = await magicMail(user);
    const before = await sql('SELECT id FROM sessions WHERE user_id = $1', [user.id]);
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).post(VERIFY, { token: mail.token })));
    expect(answers.map((r) => r.status).sort()).toEqual([200, ...Array(9).fill(400)]);
    expect(await sql('SELECT id FROM sessions WHERE user_id = $1', [user.id])).toHaveLength(before.length + 1);
  });

  it('a deactivated account, or one whose email changed, cannot use a link it was sent', async () => {
    const user = await makeUser(a);
    const mail = await magicMail(user);
    await sql('UPDATE users SET is_active = 0 WHERE id = $1', [user.id]);
    expect((await a.post(VERIFY, { token: mail.token })).json).toEqual(LINK_INVALID);
    await sql('UPDATE users SET is_active = 1 WHERE id = $1', [user.id]);
    clock.advance(2 * MINUTE);
    try {
      const second = await magicMail(user, 2);
      await sql('UPDATE users SET email = $2 WHERE id = $1', [user.id, newEmail()]);
      expect((await b.post(VERIFY, { token: second.token })).json).toEqual(LINK_INVALID);
    } finally {
      clock.advance(-2 * MINUTE);
    }
  });

  it('a user with TOTP gets the login\'s second-factor answer; the code then signs in at aal2 with ["email","otp","mfa"]', async () => {
    const user = await makeUser(a);
    // The link verifies the address, which adding a factor needs with mail configured.
    const first = await a.post(VERIFY, { token: (await magicMail(user)).token });
    const headers = bearer(first.json.access_token);
    const secret = (await a.post('/api/v1/auth/mfa/totp/enroll', {}, { headers })).json.secret as string;
    const code = (steps = 0) => authenticator.clone({ epoch: clock().getTime() + steps * 30_000 }).generate(secret);
    expect((await b.post('/api/v1/auth/mfa/totp/confirm', { code: code() }, { headers })).status).toBe(200);
    clock.advance(2 * MINUTE);
    try {
      const mail = await magicMail(user, 2);
      const challenge = await b.post(VERIFY, { token: mail.token });
      expect(challenge.status).toBe(403);
      expect(challenge.json).toEqual({ error: 'Code à deux facteurs requis', mfa_token: expect.any(String), methods: ['totp', 'recovery_code'] });
      expect(logged(b, 'magic link: second factor required', user.id)).toBe(true);
      const verified = await a.post('/api/v1/auth/mfa/verify', { mfa_token: challenge.json.mfa_token, code: code() });
      expect(verified.status).toBe(200);
      expect(claims(verified.json.access_token)).toMatchObject({ amr: ['email', 'otp', 'mfa'], acr: 'aal2' });
      // The link was used by the first answer: it gives no second mfa_token.
      expect((await a.post(VERIFY, { token: mail.token })).json).toEqual(LINK_INVALID);
    } finally {
      clock.advance(-2 * MINUTE);
    }
  });

  describe('no account enumeration', () => {
    it('answers an unknown, an inactive and a known address alike; mails only the known active one and creates nothing', async () => {
      const known = await makeUser(a);
      const inactive = await makeUser(a);
      await sql('UPDATE users SET is_active = 0 WHERE id = $1', [inactive.id]);
      const unknown = newEmail();
      const answers = [await a.post(REQUEST, { email: known.email }), await b.post(REQUEST, { email: unknown }), await a.post(REQUEST, { email: inactive.email })];
      for (const res of answers) expect(visibleAnswer(res)).toEqual(visibleAnswer(answers[0]!));
      await expect.poll(() => magicMails(known.email).length).toBe(1);
      await idle();
      expect(smtp.to(unknown)).toEqual([]);
      expect(magicMails(inactive.email)).toEqual([]);
      expect(await sql('SELECT id FROM users WHERE email = $1', [unknown])).toEqual([]);
    });

    it('takes as long for a known address as for an unknown one (the login timing test\'s tolerance)', async () => {
      const known = await makeUser(a);
      const timing = await compareTimings(() => a.post(REQUEST, { email: known.email }), () => a.post(REQUEST, { email: newEmail() }), 15, idle);
      expect(alike(timing), JSON.stringify(timing)).toBe(true);
    });

    it('sends at most one sign-in mail a minute to an account, however many requests on two instances', async () => {
      const user: TestUser = await makeUser(a);
      await Promise.all([a, b, a, b, a, b].map((gw) => gw.post(REQUEST, { email: user.email })));
      await expect.poll(() => magicMails(user.email).length).toBeGreaterThanOrEqual(1);
      await idle();
      expect(magicMails(user.email)).toHaveLength(1);
      expect((await b.post(REQUEST, { email: user.email })).status).toBe(202);
      await idle();
      expect(magicMails(user.email)).toHaveLength(1);
      clock.advance(2 * MINUTE);
      try {
        await magicMail(user, 2, b);
      } finally {
        clock.advance(-2 * MINUTE);
      }
    });

    it('answers 400 "Email invalide" for what cannot be an address', async () => {
      for (const email of ['', 'no-at-sign', 42, `${'a'.repeat(320)}@x.test`]) {
        const res = await a.post(REQUEST, { email });
        expect([res.status, res.json], JSON.stringify(email)).toEqual([400, { error: 'Email invalide' }]);
      }
    });
  });

  it('is under the auth rate limit', async () => {
    const limited = await startTestGateway(testConfig({
      mail: mailSettings(smtp), auth: { magicLink: MAGIC_LINK, rateLimit: { max: 2, window: '1m' } }, storage: { redisKeyPrefix: ownRedisPrefix('ml') },
    }));
    try {
      expect((await limited.post(REQUEST, { email: newEmail() })).status).toBe(202);
      expect((await limited.post(VERIFY, { token: 'x' })).status).toBe(400);
      for (const path of [REQUEST, VERIFY]) {
        const res = await limited.post(path, { email: newEmail(), token: 'x' });
        expect([res.status, res.json]).toEqual([429, { error: 'Trop de tentatives, réessayez plus tard' }]);
      }
    } finally {
      await limited.close();
    }
  });

  it('without auth.magicLink both endpoints answer 404; without mail.smtp the request answers 503', async () => {
    const bare = await startTestGateway(testConfig({ mail: { ...mailSettings(smtp), smtp: '' } }));
    const noSmtp = await startTestGateway(testConfig({ mail: { ...mailSettings(smtp), smtp: '' }, auth: { magicLink: MAGIC_LINK } }));
    try {
      for (const path of [REQUEST, VERIFY]) expect((await bare.post(path, { email: newEmail(), token: 'x' })).status).toBe(404);
      const res = await noSmtp.post(REQUEST, { email: newEmail() });
      expect([res.status, res.json]).toEqual([503, { error: 'Envoi d’emails non configuré' }]);
      expect((await noSmtp.post(VERIFY, { token: 'x' })).json).toEqual(LINK_INVALID);
    } finally {
      await Promise.all([bare.close(), noSmtp.close()]);
    }
  });

  it('docs/second-factor.md\'s example, as written: request, mail, sign in', async () => {
    const docs = await startTestGateway(testConfigFromYaml(docsExample('second-factor', 'magic-links'), { SMTP_URL: smtp.url }));
    try {
      const email = newEmail();
      expect((await docs.post('/api/v1/auth/register', { email, password: newPassword() })).status).toBe(201);
      expect((await docs.post(REQUEST, { email })).json).toEqual(ACCEPTED);
      await expect.poll(() => magicMails(email).length).toBe(1);
      const mail = magicMails(email)[0]!;
      expect(mail.from).toBe('Example <no-reply@example.com>');
      expect(mail.link).toBe(`https://app.example.com/magic?token=${mail.token}`);
      const signIn = await docs.post(VERIFY, { token: mail.token });
      expect(claims(signIn.json.access_token)).toMatchObject({ email, amr: ['email'], acr: 'aal1' });
    } finally {
      await docs.close();
    }
  });
});
