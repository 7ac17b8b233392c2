// The audit log (issue 31, CONTRACT §17), second part: the events audit.test.ts did not yet produce
// by their real trigger (password.reset and email.verified from the mailed links, mfa.removed,
// admin.sessions_revoked, admin.user_deleted, the CLI on the database and through --admin), and a
// change and its event committing together or not at all, shown with a transaction that really
// fails: a Postgres trigger of the test's own refuses the event (the change must go too), or
// refuses the change at COMMIT, after its event was written (the event must go too).
import type { FastifyInstance } from 'fastify';
import { authenticator } from '../helpers/totp.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import type { AuditRow } from '../../src/storage/events/audit.js';
import { ensureBuilt, gateway as cli } from '../helpers/cli.js';
import {
  ADMIN_KEY, bearer, closeSql, describeWithServices, makeUser, marker, newPassword, rawTestConfig, sql, startTestGateway, testConfig, type TestGateway, type TestUser,
} from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { mailSettings, startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';

const VERIFY = '/api/v1/auth/email/verify';
const FORGOT = '/api/v1/auth/password/forgot';
const RESET = '/api/v1/auth/password/reset';
const TOTP = '/api/v1/auth/mfa/totp';
const LINK_INVALID = { error: 'Lien invalide ou expiré' };
const INTERNAL = { error: 'Erreur interne' };

describeWithServices('audit log: each remaining event by its real trigger', () => {
  let smtp: SmtpCatcher;
  let gw: TestGateway;
  let adminApp: FastifyInstance;
  let adminUrl: string;
  let dir: string;
  let configFile: string;

  const admin = (method: string, path: string, options: { json?: unknown; headers?: Record<string, string> } = {}) =>
    request(adminUrl, method, path, { headers: { ...bearer(ADMIN_KEY), ...options.headers }, json: options.json });
  /** A user agent of the test's own. */
  const agent = () => ({ 'user-agent': `audit-trigger-test ${marker()}` });
  /** The user's rows, oldest first, straight from the table. */
  const rowsOf = (userId: number) => sql<AuditRow>('SELECT * FROM audit_events WHERE user_id = $1 ORDER BY id', [userId]);
  const typesOf = async (userId: number) => (await rowsOf(userId)).map((r) => r.type);
  /** No secret anywhere in the rows: every column, the data included. */
  const expectNoSecret = (rows: unknown, secrets: Array<string | undefined>) => {
    const text = JSON.stringify(rows);
    for (const secret of secrets) {
      expect(secret, 'a secret to look for').toBeTruthy();
      expect(text).not.toContain(secret);
    }
  };
  const run = (...args: string[]) => cli([...args, '--config', configFile], { cwd: dir });
  const login = (user: Pick<TestUser, 'email' | 'password'>, headers: Record<string, string> = {}) =>
    gw.post('/api/v1/auth/login', { email: user.email, password: user.password }, { headers });
  /** The verification link registration mailed, used: the address is proven (factorGuard asks for it with mail on). */
  const verifyEmail = async (user: TestUser) => {
    const mail = await smtp.waitFor(user.email, 1);
    expect((await gw.post(VERIFY, { token: mail.token })).status).toBe(200);
    return mail.token!;
  };

  beforeAll(async () => {
    ensureBuilt();
    smtp = await startSmtpCatcher();
    gw = await startTestGateway(testConfig({ mail: mailSettings(smtp), auth: { mfa: { issuer: 'Example' } } }));
    adminApp = await buildAdminApp(gw.services);
    adminUrl = await adminApp.listen({ host: '127.0.0.1', port: 0 });
    dir = mkdtempSync(path.join(tmpdir(), 'gw-audit-triggers-'));
    configFile = path.join(dir, 'gateway.yaml');
    writeFileSync(configFile, JSON.stringify(rawTestConfig()));
  });
  afterAll(async () => {
    await adminApp?.close();
    await gw?.close();
    await smtp?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
    await closeSql();
  });

  it('email.verified: the link registration mailed, through POST /email/verify, once', async () => {
    const user = await makeUser(gw);
    const headers = agent();
    const mail = await smtp.waitFor(user.email, 1);
    expect((await gw.post(VERIFY, { token: mail.token }, { headers })).status).toBe(200);
    // Used up: refused, nothing recorded again.
    expect((await gw.post(VERIFY, { token: mail.token }, { headers })).json).toEqual(LINK_INVALID);

    const rows = await rowsOf(user.id);
    expect(rows.map((r) => r.type)).toEqual(['user.registered', 'login.succeeded', 'email.verified']);
    expect(rows[2]).toMatchObject({ type: 'email.verified', actor: 'user', user_id: user.id, ip: '127.0.0.1', user_agent: headers['user-agent'], data: {} });
    expectNoSecret(rows, [mail.token, user.password, user.access, user.refresh]);
  });

  it('password.reset: the token from the mail sets the password, ends the sessions, proves the mailbox', async () => {
    const user = await makeUser(gw);
    const headers = agent();
    expect((await gw.post(FORGOT, { email: user.email })).status).toBe(202);
    const mail = await smtp.waitFor(user.email, 2); // the first is registration's verification link
    expect(mail.subject).toBe('Réinitialisation de votre mot de passe');
    const next = newPassword();
    expect((await gw.post(RESET, { token: mail.token, new_password: next }, { headers })).status).toBe(200);
    expect((await gw.post(RESET, { token: mail.token, new_password: newPassword() }, { headers })).json).toEqual(LINK_INVALID);
    expect((await login({ email: user.email, password: next })).status).toBe(200);

    const rows = await rowsOf(user.id);
    // The address was never verified: the reset link coming back proves it (links.ts mailboxTakesOver).
    expect(rows.map((r) => r.type)).toEqual(['user.registered', 'login.succeeded', 'password.reset', 'email.verified', 'login.succeeded']);
    for (const row of rows.slice(2, 4)) expect(row).toMatchObject({ actor: 'user', user_id: user.id, ip: '127.0.0.1', user_agent: headers['user-agent'] });
    expect(rows[2]!.data).toEqual({ revoked_sessions: 1 });
    expect(rows[3]!.data).toEqual({});
    expectNoSecret(rows, [mail.token, user.password, next, user.access, user.refresh]);
  });

  it('mfa.removed: DELETE /auth/mfa/totp with the password, from a sign-in with the factor; none when there is nothing to remove', async () => {
    const user = await makeUser(gw);
    await verifyEmail(user);
    const enroll = await gw.post(`${TOTP}/enroll`, {}, { headers: bearer(user.access) });
    expect(enroll.status).toBe(200);
    const secret = enroll.json.secret as string;
    const confirm = await gw.post(`${TOTP}/confirm`, { code: authenticator.generate(secret) }, { headers: bearer(user.access) });
    expect(confirm.status).toBe(200);
    const recovery = confirm.json.recovery_codes as string[];
    const mfaToken = (await login(user)).json.mfa_token as string;
    const signedIn = await gw.post('/api/v1/auth/mfa/verify', { mfa_token: mfaToken, code: recovery[0] });
    expect(signedIn.status).toBe(200);
    const headers = { ...bearer(signedIn.json.access_token), ...agent() };
    const removed = await gw.request('DELETE', TOTP, { json: { password: user.password }, headers });
    expect(removed.status, removed.text).toBe(200);
    // Nothing left to remove: the same answer, no event. (The removal ended the session's older
    // tokens, CONTRACT §33: the pair it answered asks.)
    const renewed = { ...bearer(removed.json.access_token), ...agent() };
    expect((await gw.request('DELETE', TOTP, { json: { password: user.password }, headers: renewed })).status).toBe(200);
    // The first session (before the factor) ended with it.
    expect((await gw.post('/api/v1/auth/refresh', { refresh_token: user.refresh })).status).toBe(401);

    const rows = await rowsOf(user.id);
    expect(rows.map((r) => r.type)).toEqual(['user.registered', 'login.succeeded', 'email.verified', 'mfa.enrolled', 'mfa.recovery_code_used', 'login.succeeded', 'mfa.removed']);
    expect(rows.at(-1)).toMatchObject({ actor: 'user', user_id: user.id, ip: '127.0.0.1', user_agent: headers['user-agent'], data: { method: 'totp', revoked_sessions: 1 } });
    expectNoSecret(rows, [secret, ...recovery, mfaToken, user.password, signedIn.json.access_token, signedIn.json.refresh_token]);
  });

  it('admin.sessions_revoked: one session, then all of them, through the admin API; none for a session or user not found', async () => {
    const user = await makeUser(gw);
    const other = await makeUser(gw);
    const second = await login(user, { 'user-agent': 'second-device' });
    expect(second.status).toBe(200);
    const listed = await admin('GET', `/admin/v1/users/${user.id}/sessions`);
    const sessions = listed.json.sessions as Array<{ id: number; user_agent: string | null }>;
    expect(sessions).toHaveLength(2);
    const first = sessions.find((s) => s.user_agent !== 'second-device')!;
    const headers = agent();

    // Another user's session, an unknown user: 404, nothing recorded.
    const othersSession = (await admin('GET', `/admin/v1/users/${other.id}/sessions`)).json.sessions[0].id as number;
    expect((await admin('DELETE', `/admin/v1/users/${user.id}/sessions/${othersSession}`, { headers })).status).toBe(404);
    expect((await admin('DELETE', '/admin/v1/users/2147483001/sessions', { headers })).status).toBe(404);

    const one = await admin('DELETE', `/admin/v1/users/${user.id}/sessions/${first.id}`, { headers });
    expect(one.json).toEqual({ message: 'Sessions révoquées', revoked: 1 });
    expect((await gw.post('/api/v1/auth/refresh', { refresh_token: user.refresh })).status).toBe(401);
    expect((await gw.post('/api/v1/auth/refresh', { refresh_token: second.json.refresh_token })).status).toBe(200);
    const all = await admin('DELETE', `/admin/v1/users/${user.id}/sessions`, { headers });
    expect(all.json).toEqual({ message: 'Sessions révoquées', revoked: 1 });

    const rows = (await rowsOf(user.id)).filter((r) => r.type.startsWith('admin.'));
    expect(rows).toHaveLength(2);
    for (const row of rows) expect(row).toMatchObject({ type: 'admin.sessions_revoked', actor: 'admin', user_id: user.id, ip: '127.0.0.1', user_agent: headers['user-agent'] });
    expect(rows.map((r) => r.data)).toEqual([{ session_id: first.id, revoked: 1 }, { session_id: null, revoked: 1 }]);
    expect(await typesOf(other.id)).toEqual(['user.registered', 'login.succeeded']);
    expect(await sql('SELECT 1 FROM audit_events WHERE user_id = 2147483001')).toEqual([]);
    expectNoSecret(rows, [ADMIN_KEY, user.refresh, second.json.refresh_token, user.access]);
  });

  it('admin.user_deleted: the admin API deletes the account; the row stays, once', async () => {
    const user = await makeUser(gw);
    const headers = agent();
    const deleted = await admin('DELETE', `/admin/v1/users/${user.id}`, { headers });
    expect(deleted.status).toBe(200);
    expect((await admin('DELETE', `/admin/v1/users/${user.id}`, { headers })).status).toBe(404);
    expect(await sql('SELECT 1 FROM users WHERE id = $1', [user.id])).toEqual([]);

    const rows = await rowsOf(user.id);
    expect(rows.map((r) => r.type)).toEqual(['user.registered', 'login.succeeded', 'admin.user_deleted']);
    expect(rows[2]).toMatchObject({ actor: 'admin', user_id: user.id, ip: '127.0.0.1', user_agent: headers['user-agent'], data: {} });
    expectNoSecret(rows, [ADMIN_KEY, user.password, user.access, user.refresh]);
  });

  it('the CLI on the database: users deactivate, activate and delete, with actor cli', async () => {
    const user = await makeUser(gw);
    for (const [command, active] of [['deactivate', 0], ['activate', 1]] as const) {
      const done = await run('users', command, user.email);
      expect(done.code, done.stderr).toBe(0);
      expect((await sql<{ is_active: number }>('SELECT is_active FROM users WHERE id = $1', [user.id]))[0]!.is_active).toBe(active);
    }
    const deleted = await run('users', 'delete', user.email);
    expect(deleted.code, deleted.stderr).toBe(0);
    expect(await sql('SELECT 1 FROM users WHERE id = $1', [user.id])).toEqual([]);

    const rows = await rowsOf(user.id);
    expect(rows.map((r) => r.type)).toEqual(['user.registered', 'login.succeeded', 'admin.active_changed', 'admin.active_changed', 'admin.user_deleted']);
    // Run on the operator's machine: no client address or agent to record.
    for (const row of rows.slice(2)) expect(row).toMatchObject({ actor: 'cli', user_id: user.id, ip: null, user_agent: null });
    expect(rows.slice(2).map((r) => r.data)).toEqual([{ active: false }, { active: true }, {}]);
    expectNoSecret(rows, [ADMIN_KEY, user.password, user.access, user.refresh]);
  });

  it('the CLI through --admin with the shared key: its changes are recorded as actor admin, what authenticated (CONTRACT §33)', async () => {
    const user = await makeUser(gw, { plan: 'free' });
    for (const args of [['set-plan', user.email, 'pro'], ['deactivate', user.email], ['activate', user.email], ['delete', user.email]]) {
      const done = await run('users', ...args, '--admin', adminUrl);
      expect(done.code, `${args[0]}: ${done.stderr}`).toBe(0);
    }
    expect(await sql('SELECT 1 FROM users WHERE id = $1', [user.id])).toEqual([]);

    const rows = await rowsOf(user.id);
    expect(rows.map((r) => r.type)).toEqual(['user.registered', 'login.succeeded', 'admin.plan_changed', 'admin.active_changed', 'admin.active_changed', 'admin.user_deleted']);
    // Through the admin listener: the CLI's address and its HTTP client's agent.
    for (const row of rows.slice(2)) expect(row).toMatchObject({ actor: 'admin', user_id: user.id, ip: '127.0.0.1', user_agent: expect.any(String) });
    expect(rows.slice(2).map((r) => r.data)).toEqual([{ plan: 'pro' }, { active: false }, { active: true }, {}]);
    expectNoSecret(rows, [ADMIN_KEY, user.password, user.access, user.refresh]);
  });

  it('the admin API ignores x-gateway-actor: the shared key is admin whatever it says (every credential: auditActors.security.test.ts)', async () => {
    const user = await makeUser(gw);
    for (const word of ['cli', 'console', 'system']) {
      expect((await admin('PUT', `/admin/v1/users/${user.id}/plan`, { json: { plan: 'pro' }, headers: { 'x-gateway-actor': word } })).status).toBe(200);
    }
    const rows = (await rowsOf(user.id)).filter((r) => r.type === 'admin.plan_changed');
    expect(rows.map((r) => r.actor)).toEqual(['admin', 'admin', 'admin']);
  });

  describeWithServices('a change and its event: both or neither, with a transaction that really fails', () => {
    /**
     * Runs fn with a trigger of this test installed (through the test's own connection to the run's
     * database), limited to one user's rows so nothing else of the run is touched; dropped after.
     */
    async function withTrigger<T>(table: 'audit_events' | 'users', userId: number, kind: 'refuse event' | 'refuse change' | 'refuse at commit', fn: () => Promise<T>, eventType?: string): Promise<T> {
      const name = `audit_test_${marker()}`;
      const condition = table === 'audit_events' ? `NEW.user_id = ${userId} AND NEW.type = '${eventType}'` : `NEW.id = ${userId}`;
      await sql(`CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF ${condition} THEN RAISE EXCEPTION 'refused by the audit test (%)', TG_TABLE_NAME; END IF;
          RETURN NEW;
        END $$`);
      try {
        if (kind === 'refuse at commit') {
          // Fires at COMMIT: after every statement of the transaction, the audit row's insert included.
          await sql(`CREATE CONSTRAINT TRIGGER ${name} AFTER UPDATE ON ${table} DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ${name}()`);
        } else {
          await sql(`CREATE TRIGGER ${name} BEFORE ${table === 'audit_events' ? 'INSERT' : 'UPDATE'} ON ${table} FOR EACH ROW EXECUTE FUNCTION ${name}()`);
        }
        return await fn();
      } finally {
        await sql(`DROP TRIGGER IF EXISTS ${name} ON ${table}`);
        await sql(`DROP FUNCTION IF EXISTS ${name}()`);
      }
    }
    const planOf = async (id: number) => ({
      user: (await sql<{ plan: string }>('SELECT plan FROM users WHERE id = $1', [id]))[0]?.plan,
      subscription: (await sql<{ plan: string }>('SELECT plan FROM subscriptions WHERE user_id = $1', [id]))[0]?.plan ?? 'free',
    });

    it('admin.plan_changed: the event refused, the plan stays; the plan refused (at once or at COMMIT, after the event was written), no event', async () => {
      const user = await makeUser(gw);
      const headers = agent();
      const setPro = () => admin('PUT', `/admin/v1/users/${user.id}/plan`, { json: { plan: 'pro' }, headers });
      const cases = [['audit_events', 'refuse event'], ['users', 'refuse change'], ['users', 'refuse at commit']] as const;
      for (const [table, kind] of cases) {
        const failed = await withTrigger(table, user.id, kind, setPro, 'admin.plan_changed');
        expect(failed.status, `${table} ${kind}`).toBe(500);
        expect(failed.json).toEqual(INTERNAL);
        expect(await planOf(user.id), `${table} ${kind}`).toEqual({ user: 'free', subscription: 'free' });
        expect(await typesOf(user.id), `${table} ${kind}`).toEqual(['user.registered', 'login.succeeded']);
      }
      // The same request with nothing in the way: the change and exactly one row.
      expect((await setPro()).status).toBe(200);
      expect(await planOf(user.id)).toEqual({ user: 'pro', subscription: 'pro' });
      const rows = await rowsOf(user.id);
      expect(rows.map((r) => r.type)).toEqual(['user.registered', 'login.succeeded', 'admin.plan_changed']);
      expect(rows[2]).toMatchObject({ actor: 'admin', user_id: user.id, ip: '127.0.0.1', user_agent: headers['user-agent'], data: { plan: 'pro' } });
      expectNoSecret(rows, [ADMIN_KEY, user.password, user.access, user.refresh]);
    });

    it('password.changed: the event refused, the password and sessions stay; the change refused at COMMIT, no event', async () => {
      const user = await makeUser(gw);
      const headers = { ...bearer(user.access), ...agent() };
      const cases = [['audit_events', 'refuse event'], ['users', 'refuse change'], ['users', 'refuse at commit']] as const;
      const tried: string[] = [];
      for (const [table, kind] of cases) {
        const next = newPassword();
        tried.push(next);
        const change = () => gw.post('/api/v1/auth/password/change', { current_password: user.password, new_password: next }, { headers });
        const failed = await withTrigger(table, user.id, kind, change, 'password.changed');
        expect(failed.status, `${table} ${kind}`).toBe(500);
        expect(failed.json).toEqual(INTERNAL);
        expect((await login({ email: user.email, password: next })).status, `${table} ${kind}`).toBe(401);
        expect((await sql('SELECT 1 FROM refresh_tokens WHERE user_id = $1 AND revoked = 1', [user.id])), `${table} ${kind}`).toEqual([]);
      }
      // The failed logins above with the passwords that were refused: login.failed rows only.
      expect((await typesOf(user.id)).filter((t) => t !== 'login.failed')).toEqual(['user.registered', 'login.succeeded']);
      const next = newPassword();
      const changed = await gw.post('/api/v1/auth/password/change', { current_password: user.password, new_password: next }, { headers });
      expect(changed.status).toBe(200);
      expect((await login({ email: user.email, password: next })).status).toBe(200);
      const rows = (await rowsOf(user.id)).filter((r) => r.type !== 'login.failed');
      expect(rows.map((r) => r.type)).toEqual(['user.registered', 'login.succeeded', 'password.changed', 'login.succeeded']);
      expect(rows[2]).toMatchObject({ actor: 'user', user_id: user.id, ip: '127.0.0.1', user_agent: headers['user-agent'], data: { revoked_sessions: 0 } });
      expectNoSecret(await rowsOf(user.id), [user.password, next, ...tried, user.access, user.refresh, changed.json.access_token, changed.json.refresh_token]);
    });
  });
});
