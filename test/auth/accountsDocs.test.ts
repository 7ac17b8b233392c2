// docs/accounts.md's configuration, run as written (with SMTP_URL pointing at a real SMTP server):
// the flows that page describes, end to end, as a reader would see them.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { closeSql, describeWithServices, newEmail, newPassword, startTestGateway, testConfigFromYaml, type TestGateway } from '../helpers/gateway.js';
import { docsExample } from '../helpers/docs.js';
import { startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';

describeWithServices('docs/accounts.md example', () => {
  let smtp: SmtpCatcher;
  let gw: TestGateway;

  beforeAll(async () => {
    smtp = await startSmtpCatcher();
    gw = await startTestGateway(testConfigFromYaml(docsExample('accounts', 'accounts'), { SMTP_URL: smtp.url }));
  });
  afterAll(async () => {
    await gw?.close();
    await smtp?.close();
    await closeSql();
  });

  it('verification required: register, 403 at login, open the mailed link, log in', async () => {
    const email = newEmail();
    const password = newPassword();
    expect((await gw.post('/api/v1/auth/register', { email, password })).status).toBe(201);
    const mail = await smtp.waitFor(email);
    expect(mail.from).toBe('Example <no-reply@example.com>');
    expect(mail.link).toBe(`https://app.example.com/verify-email?token=${mail.token}`);
    expect((await gw.post('/api/v1/auth/login', { email, password })).status).toBe(403);
    expect((await gw.post('/api/v1/auth/email/verify', { token: mail.token })).json).toEqual({ message: 'Email vérifié' });
    expect((await gw.post('/api/v1/auth/login', { email, password })).status).toBe(200);
  });

  it('forgotten password: the answer, the mail, the reset, as the page shows them', async () => {
    const email = newEmail();
    const password = newPassword();
    expect((await gw.post('/api/v1/auth/register', { email, password })).status).toBe(201);
    await smtp.waitFor(email);
    const forgot = await gw.post('/api/v1/auth/password/forgot', { email });
    expect(forgot.json).toEqual({ message: 'Si un compte existe pour cet email, un lien de réinitialisation vient d’être envoyé' });
    const mail = await smtp.waitFor(email, 2);
    expect(mail.link).toBe(`https://app.example.com/reset-password?token=${mail.token}`);
    const next = newPassword();
    expect((await gw.post('/api/v1/auth/password/reset', { token: mail.token, new_password: next })).json).toEqual({ message: 'Mot de passe réinitialisé' });
    // The reset verified the address: login passes requireVerifiedEmail.
    expect((await gw.post('/api/v1/auth/login', { email, password: next })).status).toBe(200);
  });
});
