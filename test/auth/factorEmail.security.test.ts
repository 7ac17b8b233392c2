// Guard `factor` with mail configured (CONTRACT §14, src/auth/factor.ts): no factor is added to an
// account whose email is not verified, so that whoever registers someone else's address first
// cannot pre-install a TOTP or a passkey the owner would inherit (account pre-hijacking). Each of
// the four routes that add a factor refuses; once the owner opens the verification link, they work.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bearer, closeSql, describeWithServices, newEmail, newPassword, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';
import { register as makePasskey } from '../helpers/softAuthenticator.js';
import { mailSettings, startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';

const UNVERIFIED = { error: 'Adresse email non vérifiée' };
const RP = { rpId: 'app.example.test', rpName: 'Example', origins: ['https://app.example.test'] };
const ENROLL = '/api/v1/auth/mfa/totp/enroll';
const CONFIRM = '/api/v1/auth/mfa/totp/confirm';
const PASSKEY_OPTIONS = '/api/v1/auth/passkeys/register/options';
const PASSKEY_REGISTER = '/api/v1/auth/passkeys/register/verify';

describeWithServices('adding a factor needs a verified email when mail is configured', () => {
  let smtp: SmtpCatcher;
  let gw: TestGateway;

  beforeAll(async () => {
    smtp = await startSmtpCatcher();
    gw = await startTestGateway(testConfig({ mail: mailSettings(smtp), auth: { mfa: { issuer: 'Example' }, passkeys: RP } }));
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
});
