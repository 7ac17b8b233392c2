// Guard `factor` (CONTRACT §14, src/auth/mfa/factor.ts). With mail configured, no factor is added to
// an account whose email is not verified, so that whoever registers someone else's address first
// cannot pre-install a TOTP or a passkey the owner would inherit (account pre-hijacking): each of
// the four routes that add a factor refuses; once the owner opens the verification link, they
// work. And a factor is added only from a sign-in at most 5 minutes old (a stolen or forgotten
// session cannot add one later), on both sides of that edge.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bearer, closeSql, describeWithServices, newEmail, newPassword, startTestGateway, testClock, testConfig, type TestGateway } from '../helpers/gateway.js';
import { register as makePasskey } from '../helpers/softAuthenticator.js';
import { authenticator } from '../helpers/totp.js';
import { mailSettings, startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';

const UNVERIFIED = { error: 'Adresse email non vérifiée' };
const RECENT = { error: 'Authentification récente requise' };
const RP = { rpId: 'app.example.test', rpName: 'Example', origins: ['https://app.example.test'] };
const ENROLL = '/api/v1/auth/mfa/totp/enroll';
const CONFIRM = '/api/v1/auth/mfa/totp/confirm';
const PASSKEY_OPTIONS = '/api/v1/auth/passkeys/register/options';
const PASSKEY_REGISTER = '/api/v1/auth/passkeys/register/verify';

describeWithServices('guard factor: a verified email when mail is configured, a recent sign-in', () => {
  let smtp: SmtpCatcher;
  let gw: TestGateway;
  const clock = testClock();

  beforeAll(async () => {
    smtp = await startSmtpCatcher();
    gw = await startTestGateway(testConfig({ mail: mailSettings(smtp), auth: { mfa: { issuer: 'Example' }, passkeys: RP } }), { clock });
  });
  afterAll(async () => {
    await gw?.close();
    await smtp?.close();
    await closeSql();
  });

  it('an unverified account gets 403 on TOTP enrolment and passkey registration; once verified, both work', async () => {
    const email = newEmail('factor');
    const password = newPassword();
    expect((await gw.post('/api/v1/auth/register', { email, password })).status).toBe(201);
    const login = await gw.post('/api/v1/auth/login', { email, password });
    expect(login.status, login.text).toBe(200);
    const headers = bearer(login.json.access_token);

    for (const path of [ENROLL, CONFIRM, PASSKEY_OPTIONS, PASSKEY_REGISTER]) {
      const res = await gw.post(path, path === CONFIRM ? { code: '123456' } : {}, { headers });
      expect([res.status, res.json], path).toEqual([403, UNVERIFIED]);
    }

    const link = await smtp.waitFor(email);
    expect((await gw.post('/api/v1/auth/email/verify', { token: link.token })).status).toBe(200);
    // The same access token: the guard reads the account as it is now, not as the token was issued.
    await expect.poll(async () => (await gw.post(ENROLL, {}, { headers })).status).toBe(200);
    const enroll = await gw.post(ENROLL, {}, { headers });
    expect(enroll.json.secret).toMatch(/^[A-Z2-7]+$/);
    const options = await gw.post(PASSKEY_OPTIONS, {}, { headers });
    expect(options.status, options.text).toBe(200);
    const { response } = makePasskey(options.json, { origin: 'https://app.example.test' });
    const added = await gw.post(PASSKEY_REGISTER, response, { headers });
    expect(added.status, added.text).toBe(201);
  });

  it('a sign-in 4 min 40 s old may still add a factor; one 5 min 10 s old may not, with either route', async () => {
    const email = newEmail('recent');
    const password = newPassword();
    await gw.post('/api/v1/auth/register', { email, password });
    expect((await gw.post('/api/v1/auth/email/verify', { token: (await smtp.waitFor(email)).token })).status).toBe(200);
    const headers = bearer((await gw.post('/api/v1/auth/login', { email, password })).json.access_token);
    await expect.poll(async () => (await gw.post(ENROLL, {}, { headers })).status).toBe(200);
    clock.advance(4 * 60_000 + 40_000);
    expect((await gw.post(ENROLL, {}, { headers })).status).toBe(200);
    expect((await gw.post(PASSKEY_OPTIONS, {}, { headers })).status).toBe(200);
    clock.advance(30_000);
    for (const path of [ENROLL, PASSKEY_OPTIONS]) {
      const res = await gw.post(path, {}, { headers });
      expect([res.status, res.json], path).toEqual([403, RECENT]);
    }
  });

  it('a user with a second factor adds another only from a sign-in that gave it (aal2), not from the password alone', async () => {
    const email = newEmail('aal2');
    const password = newPassword();
    await gw.post('/api/v1/auth/register', { email, password });
    expect((await gw.post('/api/v1/auth/email/verify', { token: (await smtp.waitFor(email)).token })).status).toBe(200);
    const headers = bearer((await gw.post('/api/v1/auth/login', { email, password })).json.access_token);
    await expect.poll(async () => (await gw.post(ENROLL, {}, { headers })).status).toBe(200);
    const secret = (await gw.post(ENROLL, {}, { headers })).json.secret as string;
    const code = () => authenticator.clone({ epoch: clock().getTime() }).generate(secret);
    const confirm = await gw.post(CONFIRM, { code: code() }, { headers });
    expect(confirm.status).toBe(200);
    // The confirming session's new pair (CONTRACT §33), still of the password-only (aal1) sign-in:
    // the user now has a factor, so no other is added with it.
    const refused = await gw.post(PASSKEY_OPTIONS, {}, { headers: bearer(confirm.json.access_token) });
    expect([refused.status, refused.json]).toEqual([403, RECENT]);
    clock.advance(30_000); // the next step's code: the confirming one is spent
    const challenge = await gw.post('/api/v1/auth/login', { email, password });
    expect(challenge.status, challenge.text).toBe(403);
    const verified = await gw.post('/api/v1/auth/mfa/verify', { mfa_token: challenge.json.mfa_token, code: code() });
    expect(verified.status, verified.text).toBe(200);
    const options = await gw.post(PASSKEY_OPTIONS, {}, { headers: bearer(verified.json.access_token) });
    expect(options.status, options.text).toBe(200);
  });
});
