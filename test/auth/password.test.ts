// Password change, forgot and reset (CONTRACT §13), on two instances, with a real SMTP server:
// the links are read out of the messages it received.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../src/credentials/digest.js';
import {
  bearer, closeSql, describeWithServices, makeUser, newEmail, newPassword, sql, startTestGateway, startTwoGateways,
  testClock, testConfig, type TestGateway, type TestUser,
} from '../helpers/gateway.js';
import { holdUserRow } from '../helpers/rowLock.js';
import { mailSettings, startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { alike, compareTimings, visibleAnswer } from '../helpers/timing.js';

const CHANGE = '/api/v1/auth/password/change';
const FORGOT = '/api/v1/auth/password/forgot';
const RESET = '/api/v1/auth/password/reset';
const LINK_INVALID = { error: 'Lien invalide ou expiré' };
const INVALID = { error: 'Identifiants invalides' };
const ACCEPTED = { message: 'Si un compte existe pour cet email, un lien de réinitialisation vient d’être envoyé' };
const MINUTE = 60_000;

describeWithServices('password change, forgot and reset', () => {
  let smtp: SmtpCatcher;
  let a: TestGateway;
  let b: TestGateway;
  const clock = testClock();

  beforeAll(async () => {
    smtp = await startSmtpCatcher();
    [a, b] = await startTwoGateways(testConfig({ mail: mailSettings(smtp) }), { clock });
  });
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await smtp?.close();
    await closeSql();
  });

  const login = (gw: TestGateway, email: string, password: string) => gw.post('/api/v1/auth/login', { email, password });
  const refresh = (gw: TestGateway, token: string) => gw.post('/api/v1/auth/refresh', { refresh_token: token });
  const activeTokens = async (userId: number) =>
    (await sql<{ token_hash: string }>('SELECT token_hash FROM refresh_tokens WHERE user_id = $1 AND revoked = 0', [userId])).map((r) => r.token_hash);
  /** Asks for a reset link and returns the n-th message the user received for it. */
  async function resetMail(user: TestUser, n: number, gw = a) {
    expect((await gw.post(FORGOT, { email: user.email })).status).toBe(202);
    return smtp.waitFor(user.email, n);
  }
  /** The reset messages to the user (registration also sends a verification one). */
  const resetMails = (user: TestUser) => smtp.to(user.email).filter((m) => m.subject === 'Réinitialisation de votre mot de passe');

  describe('POST /password/change', () => {
    it('sets the new password, returns a new pair, and ends every other session on every instance', async () => {
      const user = await makeUser(a);
      const other = await login(b, user.email, user.password);
      const next = newPassword();
      const res = await a.post(CHANGE, { current_password: user.password, new_password: next }, { headers: bearer(user.access) });
      expect(res.status).toBe(200);
      expect(res.json).toEqual({ access_token: expect.any(String), refresh_token: expect.any(String), token_type: 'Bearer', plan: 'free' });
      // The other session and this session's earlier refresh token are refused everywhere.
      for (const gw of [a, b]) {
        expect((await refresh(gw, other.json.refresh_token)).status).toBe(401);
        expect((await refresh(gw, user.refresh)).status).toBe(401);
      }
      expect(await activeTokens(user.id)).toEqual([sha256Hex(res.json.refresh_token)]);
      expect((await refresh(b, res.json.refresh_token)).status).toBe(200);
      expect((await login(b, user.email, user.password)).json).toEqual(INVALID);
      expect((await login(b, user.email, next)).status).toBe(200);
      const [row] = await sql<{ password_changed_at: Date | null }>('SELECT password_changed_at FROM users WHERE id = $1', [user.id]);
      expect(row!.password_changed_at).toBeInstanceOf(Date);
    });

    it('refuses a wrong current password (401) and a too short new one (400), changing nothing', async () => {
      const user = await makeUser(a);
      const headers = bearer(user.access);
      for (const body of [
        { current_password: `${user.password}x`, new_password: newPassword() }, { new_password: newPassword() },
        { current_password: 'a'.repeat(2000), new_password: newPassword() },
      ]) {
        const res = await a.post(CHANGE, body, { headers });
        expect(res.status).toBe(401);
        expect(res.json).toEqual(INVALID);
      }
      const short = await a.post(CHANGE, { current_password: user.password, new_password: 'short' }, { headers });
      expect(short.status).toBe(400);
      expect(short.json).toEqual({ error: 'Mot de passe trop court (min 8 caractères)' });
      const long = await a.post(CHANGE, { current_password: user.password, new_password: 'x'.repeat(1025) }, { headers });
      expect(long.json).toEqual({ error: 'Mot de passe trop long (max 1024 octets)' });
      expect((await login(a, user.email, user.password)).status).toBe(200);
      expect((await refresh(b, user.refresh)).status).toBe(200);
    });

    it('needs a signed-in user', async () => {
      const res = await a.post(CHANGE, { current_password: 'x', new_password: newPassword() });
      expect(res.status).toBe(401);
      expect(res.json).toEqual({ error: 'Token invalide ou expiré' });
    });

    // The race forced both ways round (helpers/rowLock.ts): the dangerous one is the login that
    // checked the old password before the change and reaches the user's row after it.
    it('a login and a refresh queued behind a change on the other instance start no session of the old password', async () => {
      // Tried again (at most three times) only when the queue did not form in time: see HeldRow.queued.
      for (let attempt = 1; ; attempt++) {
        const user = await makeUser(a);
        const other = await login(a, user.email, user.password);
        const held = await holdUserRow(user.id);
        const change = a.post(CHANGE, { current_password: user.password, new_password: newPassword() }, { headers: bearer(user.access) });
        await held.waiters(1);
        const refreshed = refresh(b, other.json.refresh_token);
        const loggedIn = login(b, user.email, user.password);
        const formed = await held.queued(3, 3_500);
        await held.release();
        const changed = await change;
        await Promise.all([refreshed, loggedIn]);
        if (!formed && attempt < 3) continue;
        expect(formed, 'the login and the refresh queued behind the change').toBe(true);
        expect(changed.status).toBe(200);
        expect([(await refreshed).status, (await loggedIn).status]).toEqual([401, 401]);
        expect((await loggedIn).json).toEqual(INVALID);
        expect(await activeTokens(user.id)).toEqual([sha256Hex(changed.json.refresh_token)]);
        return;
      }
    });

    it('a login and a refresh ahead of a change on the other instance are ended by it', async () => {
      const user = await makeUser(a);
      const other = await login(a, user.email, user.password);
      const held = await holdUserRow(user.id);
      const refreshed = refresh(b, other.json.refresh_token);
      const loggedIn = login(b, user.email, user.password);
      await held.waiters(2);
      const change = a.post(CHANGE, { current_password: user.password, new_password: newPassword() }, { headers: bearer(user.access) });
      await held.waiters(3);
      await held.release();
      const [r, l, c] = [await refreshed, await loggedIn, await change];
      expect([r.status, l.status, c.status]).toEqual([200, 200, 200]);
      expect(await activeTokens(user.id)).toEqual([sha256Hex(c.json.refresh_token)]);
      expect((await refresh(a, r.json.refresh_token)).status).toBe(401);
      expect((await refresh(a, l.json.refresh_token)).status).toBe(401);
    });
  });

  describe('forgot and reset', () => {
    it('mails a plain French message with a single-use link that sets the password and ends every session', async () => {
      const user = await makeUser(a);
      const other = await login(b, user.email, user.password);
      const forgot = await b.post(FORGOT, { email: `  ${user.email.toUpperCase()} ` });
      expect(forgot.status).toBe(202);
      expect(forgot.json).toEqual(ACCEPTED);
      const mail = await smtp.waitFor(user.email, 2); // the first is registration's verification link
      expect(mail.subject).toBe('Réinitialisation de votre mot de passe');
      expect(mail.from).toBe('Gateway <no-reply@example.test>');
      expect(mail.html).toBe(false);
      expect(mail.contentType).toBe('text/plain');
      expect(mail.text).toContain('ouvrez ce lien dans les 30 minutes');
      expect(mail.text).toContain(user.email);
      expect(mail.link).toMatch(/^https:\/\/app\.example\.test\/reset-password\?token=[A-Za-z0-9_-]{43}$/);
      // Only the hash is stored.
      const rows = await sql('SELECT token_hash, email, purpose, used_at FROM email_tokens WHERE user_id = $1 AND purpose = $2', [user.id, 'reset']);
      expect(rows).toEqual([{ token_hash: sha256Hex(mail.token!), email: user.email, purpose: 'reset', used_at: null }]);

      const next = newPassword();
      const reset = await a.post(RESET, { token: mail.token, new_password: next });
      expect(reset.status).toBe(200);
      expect(reset.json).toEqual({ message: 'Mot de passe réinitialisé' });
      expect(await activeTokens(user.id)).toEqual([]);
      for (const token of [user.refresh, other.json.refresh_token]) expect((await refresh(b, token)).status).toBe(401);
      expect((await login(b, user.email, user.password)).json).toEqual(INVALID);
      expect((await login(b, user.email, next)).status).toBe(200);
      // The link came back from the address: the address is the user's.
      const [verified] = await sql<{ email_verified_at: Date | null }>('SELECT email_verified_at FROM users WHERE id = $1', [user.id]);
      expect(verified!.email_verified_at).toBeInstanceOf(Date);

      const again = await b.post(RESET, { token: mail.token, new_password: newPassword() });
      expect(again.status).toBe(400);
      expect(again.json).toEqual(LINK_INVALID);
      expect((await login(a, user.email, next)).status).toBe(200);
    });

    it('refuses an expired link, a made-up one, and none at all with 400 "Lien invalide ou expiré"', async () => {
      const user = await makeUser(a);
      const mail = await resetMail(user, 2);
      clock.advance(31 * MINUTE);
      try {
        const bodies = [{ token: mail.token, new_password: newPassword() }, { token: 'made-up', new_password: newPassword() }, { new_password: newPassword() }, { token: 42 }, {}];
        for (const body of bodies) {
          const res = await b.post(RESET, body);
          expect(res.status, JSON.stringify(body)).toBe(400);
          expect(res.json).toEqual(LINK_INVALID);
        }
      } finally {
        clock.advance(-31 * MINUTE);
      }
      expect((await login(a, user.email, user.password)).status).toBe(200);
    });

    it('a too short new password is refused without using the link up', async () => {
      const user = await makeUser(a);
      const mail = await resetMail(user, 2);
      const short = await a.post(RESET, { token: mail.token, new_password: 'short' });
      expect(short.status).toBe(400);
      expect(short.json).toEqual({ error: 'Mot de passe trop court (min 8 caractères)' });
      expect((await a.post(RESET, { token: mail.token, new_password: newPassword() })).status).toBe(200);
    });

    it('one link used ten times at once over two instances resets once', async () => {
      const user = await makeUser(a);
      const mail = await resetMail(user, 2);
      const passwords = Array.from({ length: 10 }, () => newPassword());
      const answers = await Promise.all(passwords.map((password, i) => (i % 2 ? a : b).post(RESET, { token: mail.token, new_password: password })));
      expect(answers.map((r) => r.status).sort()).toEqual([200, ...Array(9).fill(400)]);
      const winner = passwords[answers.findIndex((r) => r.status === 200)]!;
      const logins = await Promise.all(passwords.map((password) => login(a, user.email, password)));
      expect(logins.filter((r) => r.status === 200)).toHaveLength(1);
      expect((await login(b, user.email, winner)).status).toBe(200);
    });

    it('a reset or a change voids the other links sent before it', async () => {
      const user = await makeUser(a);
      const first = await resetMail(user, 2);
      clock.advance(2 * MINUTE); // past the one-mail-a-minute limit
      const second = await resetMail(user, 3);
      expect(second.token).not.toBe(first.token);
      expect((await a.post(RESET, { token: second.token, new_password: newPassword() })).status).toBe(200);
      expect((await a.post(RESET, { token: first.token, new_password: newPassword() })).json).toEqual(LINK_INVALID);

      const other = await makeUser(a);
      const link = await resetMail(other, 2);
      const changed = await a.post(CHANGE, { current_password: other.password, new_password: newPassword() }, { headers: bearer(other.access) });
      expect(changed.status).toBe(200);
      expect((await b.post(RESET, { token: link.token, new_password: newPassword() })).json).toEqual(LINK_INVALID);
    });

    it('sends at most one reset mail a minute to an account, however many requests', async () => {
      const user = await makeUser(a);
      await Promise.all([a, b, a, b].map((gw) => gw.post(FORGOT, { email: user.email })));
      await smtp.waitFor(user.email, 2);
      await Promise.all([a.services.mailer.idle(), b.services.mailer.idle()]);
      // The user's row is locked while a link is made: concurrent requests on two instances make one.
      const sent = resetMails(user).length;
      expect(sent).toBe(1);
      expect((await b.post(FORGOT, { email: user.email })).status).toBe(202);
      await Promise.all([a.services.mailer.idle(), b.services.mailer.idle()]);
      expect(resetMails(user)).toHaveLength(sent);
      clock.advance(2 * MINUTE);
      expect((await b.post(FORGOT, { email: user.email })).status).toBe(202);
      await smtp.waitFor(user.email, sent + 2);
    });

    it('answers 400 "Email invalide" for what cannot be an address', async () => {
      for (const email of ['', '   ', 'no-at-sign', 42, `${'a'.repeat(320)}@x.test`, 'a\u0000@x.test']) {
        const res = await a.post(FORGOT, { email });
        expect(res.status, JSON.stringify(email)).toBe(400);
        expect(res.json).toEqual({ error: 'Email invalide' });
      }
    });
  });

  describe('no account enumeration', () => {
    it('answers an unknown, an inactive and a known address alike, and mails only the known active one', async () => {
      const known = await makeUser(a);
      const inactive = await makeUser(a);
      await sql('UPDATE users SET is_active = 0 WHERE id = $1', [inactive.id]);
      const unknown = newEmail();
      const answers = [await a.post(FORGOT, { email: known.email }), await a.post(FORGOT, { email: unknown }), await a.post(FORGOT, { email: inactive.email })];
      for (const res of answers) expect(visibleAnswer(res)).toEqual(visibleAnswer(answers[0]!));
      await smtp.waitFor(known.email, 2);
      await a.services.mailer.idle();
      expect(smtp.to(unknown)).toEqual([]);
      expect(resetMails(inactive)).toEqual([]);
    });

    it('answers before the mail is sent: a relay that holds the message does not hold the answer', async () => {
      const user = await makeUser(a);
      await smtp.waitFor(user.email, 1);
      smtp.hold();
      try {
        const res = await a.post(FORGOT, { email: user.email });
        expect(res.status).toBe(202);
        // The message is at the relay, waiting, and the client has its answer.
        await expect.poll(() => smtp.held).toBe(1);
        expect(resetMails(user)).toEqual([]);
      } finally {
        smtp.release();
      }
      await smtp.waitFor(user.email, 2);
    });

    it('answers before the account is even looked up: a database that does not answer does not hold it', async () => {
      const user = await makeUser(b);
      await smtp.waitFor(user.email, 1);
      const db = b.services.db;
      const query = db.query.bind(db);
      let open!: () => void;
      const gate = new Promise<void>((resolve) => { open = resolve; });
      // Every statement waits for the gate (a Postgres that hangs), then runs.
      db.query = (async (text: string, params?: unknown[]) => { await gate; return query(text, params); }) as typeof db.query;
      try {
        const res = await b.post(FORGOT, { email: user.email }, { timeout: 3000 });
        expect(res.status).toBe(202);
        expect(res.json).toEqual(ACCEPTED);
      } finally {
        db.query = query;
        open();
      }
      await smtp.waitFor(user.email, 2);
    });

    it('takes as long for a known address as for an unknown one (the login timing test\'s tolerance)', async () => {
      const known = await makeUser(a);
      const timing = await compareTimings(() => a.post(FORGOT, { email: known.email }), () => a.post(FORGOT, { email: newEmail() }), 15, () => a.services.mailer.idle());
      expect(alike(timing), JSON.stringify(timing)).toBe(true);
    });
  });

  it('answers 503 "Envoi d’emails non configuré" to forgot without mail.smtp, and reset still checks links', async () => {
    const bare = await startTestGateway(testConfig());
    try {
      const res = await bare.post(FORGOT, { email: newEmail() });
      expect(res.status).toBe(503);
      expect(res.json).toEqual({ error: 'Envoi d’emails non configuré' });
      expect((await bare.post(RESET, { token: 'x', new_password: newPassword() })).json).toEqual(LINK_INVALID);
    } finally {
      await bare.close();
    }
  });

  it('never writes a link\'s token, or a message, to a log', async () => {
    await Promise.all([a.services.mailer.idle(), b.services.mailer.idle()]);
    const logs = a.logs.join('') + b.logs.join('');
    const tokens = smtp.messages.map((m) => m.token).filter((t) => t !== undefined);
    expect(tokens.length).toBeGreaterThan(10);
    for (const token of tokens) expect(logs).not.toContain(token);
    expect(logs).not.toContain('ouvrez ce lien');
    // The mails were logged as sent, by purpose and user.
    expect(logs).toMatch(/"purpose":"reset".*"msg":"mail sent"/);
  });
});
