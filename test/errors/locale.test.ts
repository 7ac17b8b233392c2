// Issue 49, second half (CONTRACT §20): a user's locale, set at register from a `locale` field or
// Accept-Language (an unsupported one ignored, the spec's answer unchanged), changed with
// PATCH /api/v1/user/me, and the mails that follow it, with a real SMTP server.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bearer, closeSql, describeWithServices, makeUser, newEmail, newPassword, startTestGateway, testClock, testConfig, type TestGateway, type TestUser,
} from '../helpers/gateway.js';
import type { RequestOptions } from '../helpers/http.js';
import { mailSettings, startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';

const ME = '/api/v1/user/me';
const FORGOT = '/api/v1/auth/password/forgot';
const MAGIC = '/api/v1/auth/magic-link';
const MINUTE = 60_000;
/** The spec's keys of GET /api/v1/user/me (CONTRACT §4, §12, §13, §23). */
const SPEC_ME_KEYS = ['user_id', 'email', 'plan', 'daily_usage', 'last_usage_date', 'limits', 'daily_remaining', 'monthly_usage', 'monthly_remaining', 'email_verified_at'];
const SUBJECTS = {
  fr: { verify: 'Confirmez votre adresse email', reset: 'Réinitialisation de votre mot de passe', magic: 'Votre lien de connexion' },
  en: { verify: 'Confirm your email address', reset: 'Reset your password', magic: 'Your sign-in link' },
};

describeWithServices('a user\'s locale and the language of their mails (issue 49)', () => {
  let smtp: SmtpCatcher;
  let plain: TestGateway;
  let negotiating: TestGateway;
  let english: TestGateway;
  let dir: string;
  const clock = testClock();

  beforeAll(async () => {
    smtp = await startSmtpCatcher();
    dir = mkdtempSync(path.join(os.tmpdir(), 'gateway-locale-'));
    // An operator's language: German error texts, no German mail texts.
    writeFileSync(path.join(dir, 'de.json'), JSON.stringify({ locale_changed: 'Sprache geändert' }));
    const mail = { mail: mailSettings(smtp), auth: { magicLink: { url: 'https://app.example.test/magic?token={token}' } } };
    plain = await startTestGateway(testConfig(mail), { clock });
    negotiating = await startTestGateway(testConfig({ ...mail, errors: { codes: true, language: 'negotiate', messages: dir } }), { clock });
    english = await startTestGateway(testConfig({ ...mail, errors: { language: 'en' } }), { clock });
  });
  afterAll(async () => {
    await Promise.all([plain, negotiating, english].map((gw) => gw?.close()));
    await smtp?.close();
    rmSync(dir, { recursive: true, force: true });
    await closeSql();
  });

  async function register(gw: TestGateway, body: Record<string, unknown> = {}, headers: Record<string, string> = {}) {
    const email = newEmail();
    const password = newPassword();
    const res = await gw.post('/api/v1/auth/register', { email, password, ...body }, { headers });
    expect(res.status, res.text).toBe(201);
    const login = await gw.post('/api/v1/auth/login', { email, password });
    return { id: res.json.user_id as number, email, password, access: login.json.access_token as string, refresh: '', answer: res.text };
  }
  const me = async (gw: TestGateway, user: TestUser) => (await gw.get(ME, { headers: bearer(user.access) })).json;
  const patch = (gw: TestGateway, user: TestUser, json: unknown, headers: Record<string, string> = {}, options: RequestOptions = {}) =>
    gw.request('PATCH', ME, { ...options, headers: { ...bearer(user.access), ...headers }, json });

  describe('at register', () => {
    it('takes a `locale` field the gateway has texts for (en-GB reads as en): the verification mail is in it, /me shows it', async () => {
      const user = await register(plain, { locale: 'en-GB' });
      expect(user.answer).toBe(`{"message":"Utilisateur créé","user_id":${user.id}}`);
      const mail = await smtp.waitFor(user.email);
      expect(mail.subject).toBe(SUBJECTS.en.verify);
      expect(mail.text).toContain(`To confirm that the address ${user.email} is yours, open this link within 24 hours:`);
      expect(await me(plain, user)).toMatchObject({ locale: 'en' });
    });

    it('else the language Accept-Language names among those with texts', async () => {
      const english = await register(plain, {}, { 'accept-language': 'tlh, de-CH;q=0.9, en;q=0.8, fr;q=0.5' });
      expect((await smtp.waitFor(english.email)).subject).toBe(SUBJECTS.en.verify);
      expect((await me(plain, english)).locale).toBe('en');
      const french = await register(plain, { locale: 'tlh' }, { 'accept-language': 'fr-CA' });
      expect((await smtp.waitFor(french.email)).subject).toBe(SUBJECTS.fr.verify);
      expect((await me(plain, french)).locale).toBe('fr');
    });

    it('ignores an unsupported or malformed locale: the spec\'s answer byte for byte, no locale, the French mail', async () => {
      for (const locale of ['tlh', 'xx-YY', 'en\u202e', 'e'.repeat(40), '', 42, null, ['en'], { en: true }]) {
        const user = await register(plain, { locale }, { 'accept-language': '*' });
        expect(user.answer).toBe(`{"message":"Utilisateur créé","user_id":${user.id}}`);
        const body = await me(plain, user);
        expect(Object.keys(body)).toEqual(SPEC_ME_KEYS);
        expect((await smtp.waitFor(user.email)).subject).toBe(SUBJECTS.fr.verify);
      }
      // And the spec's refusals stay the spec's, locale or not.
      const refused = await plain.post('/api/v1/auth/register', { email: 'nope', password: newPassword(), locale: 'en' });
      expect(refused.text).toBe('{"error":"Email invalide"}');
    });
  });

  describe('PATCH /api/v1/user/me {locale}', () => {
    it('200 with a success message in the answer\'s language; null forgets the locale', async () => {
      const user = await makeUser(plain);
      expect(Object.keys(await me(plain, user))).toEqual(SPEC_ME_KEYS);
      const res = await patch(plain, user, { locale: 'EN-gb' });
      expect(res.status).toBe(200);
      expect(res.json).toEqual({ message: 'Langue modifiée', locale: 'en' });
      expect(await me(plain, user)).toEqual(expect.objectContaining({ locale: 'en' }));
      expect((await patch(plain, user, { locale: null })).json).toEqual({ message: 'Langue modifiée', locale: null });
      expect(Object.keys(await me(plain, user))).toEqual(SPEC_ME_KEYS);

      const other = await makeUser(negotiating);
      const en = await patch(negotiating, other, { locale: 'fr' }, { 'accept-language': 'en' });
      expect(en.json).toEqual({ message: 'Language changed', locale: 'fr' });
      // A language of the operator's files is one the gateway has texts for.
      const de = await patch(negotiating, other, { locale: 'de-AT' }, { 'accept-language': 'de' });
      expect(de.json).toEqual({ message: 'Sprache geändert', locale: 'de' });
    });

    it('400 locale_unsupported for a language without texts, in French, English and problem details', async () => {
      const user = await makeUser(plain);
      for (const json of [{ locale: 'tlh' }, { locale: 'de' }, { locale: 42 }, { locale: '' }, {}]) {
        const res = await patch(plain, user, json);
        expect(res.status).toBe(400);
        expect(res.text).toBe('{"error":"Langue non prise en charge"}');
      }
      const other = await makeUser(negotiating);
      const en = await patch(negotiating, other, { locale: 'tlh' }, { 'accept-language': 'en' });
      expect(en.json).toEqual({ error: 'Language not supported', code: 'locale_unsupported' });
      const problem = await patch(negotiating, other, { locale: 'tlh' }, { 'accept-language': 'en', accept: 'application/problem+json' });
      expect(problem.headers['content-type']).toBe('application/problem+json; charset=utf-8');
      expect(problem.json).toEqual({
        type: 'urn:gateway:error:locale_unsupported', title: 'Language not supported', status: 400, code: 'locale_unsupported',
        detail: 'Language not supported', error: 'Language not supported',
      });
      expect((await me(plain, user)).locale).toBeUndefined();
    });

    it('needs a signed-in user', async () => {
      const res = await plain.request('PATCH', ME, { json: { locale: 'en' } });
      expect(res.status).toBe(401);
      expect(res.json).toEqual({ error: 'Token invalide ou expiré' });
    });
  });

  describe('the mails', () => {
    it('follow the locale: a reset in English, then, the locale changed, a sign-in link in French', async () => {
      const user = await register(plain, { locale: 'en' });
      await smtp.waitFor(user.email);
      expect((await plain.post(FORGOT, { email: user.email })).json).toEqual({ message: 'Si un compte existe pour cet email, un lien de réinitialisation vient d’être envoyé' });
      const reset = await smtp.waitFor(user.email, 2);
      expect(reset.subject).toBe(SUBJECTS.en.reset);
      expect(reset.text).toContain('open this link within 30 minutes');
      expect(reset.link).toMatch(/^https:\/\/app\.example\.test\/reset-password\?token=/);
      expect((await patch(plain, user, { locale: 'fr' })).status).toBe(200);
      await plain.post(MAGIC, { email: user.email }, { headers: { 'accept-language': 'en' } });
      const magic = await smtp.waitFor(user.email, 3);
      expect(magic.subject).toBe(SUBJECTS.fr.magic);
      expect(magic.text).toContain('ouvrez ce lien dans les 15 minutes');
    });

    it('without a locale: errors.language when it is fr or en, whatever the request says', async () => {
      const user = await register(english, {}, { 'accept-language': '*' });
      expect((await smtp.waitFor(user.email)).subject).toBe(SUBJECTS.en.verify);
      const french = await register(plain, {}, { 'accept-language': '*' });
      expect((await smtp.waitFor(french.email)).subject).toBe(SUBJECTS.fr.verify);
      await plain.post(FORGOT, { email: french.email }, { headers: { 'accept-language': 'en' } });
      expect((await smtp.waitFor(french.email, 2)).subject).toBe(SUBJECTS.fr.reset);
    });

    it('without a locale, under negotiate: the language of the request that asked for the mail, else French', async () => {
      const user = await register(negotiating, {}, { 'accept-language': '*' });
      expect((await smtp.waitFor(user.email)).subject).toBe(SUBJECTS.fr.verify);
      await negotiating.post(FORGOT, { email: user.email }, { headers: { 'accept-language': 'en-US,en;q=0.9' } });
      expect((await smtp.waitFor(user.email, 2)).subject).toBe(SUBJECTS.en.reset);
      // One mail per purpose a minute: the clock moves on before the next reset link.
      clock.advance(2 * MINUTE);
      await negotiating.post(FORGOT, { email: user.email }, { headers: { 'accept-language': 'tlh' } });
      expect((await smtp.waitFor(user.email, 3)).subject).toBe(SUBJECTS.fr.reset);
    });

    it('a locale without mail texts (an operator\'s error language) falls back as if none were set', async () => {
      const user = await register(negotiating, { locale: 'de' });
      expect((await me(negotiating, user)).locale).toBe('de');
      expect((await smtp.waitFor(user.email)).subject).toBe(SUBJECTS.fr.verify);
      await negotiating.post(MAGIC, { email: user.email }, { headers: { 'accept-language': 'de, en;q=0.5' } });
      expect((await smtp.waitFor(user.email, 2)).subject).toBe(SUBJECTS.en.magic);
    });
  });
});
