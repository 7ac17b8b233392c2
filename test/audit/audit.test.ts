// The audit log (issue 31, CONTRACT §17): each event produced by its real trigger over HTTP, with
// actor, IP and user agent, never a secret; none when the change fails; one when two instances race
// on the same change; the admin API's listing (filters, keyset pages); the retention purge; the CLI.
import type { FastifyInstance } from 'fastify';
import { authenticator } from '../helpers/totp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import { parseConfig } from '../../src/config/load.js';
import type { AuditRow } from '../../src/storage/events/audit.js';
import {
  ADMIN_KEY, bearer, closeSql, configProblems, describeWithServices, makeUser, marker, newEmail, newPassword, rawTestConfig, sql, startTestGateway, startTwoGateways, testConfig, type TestGateway,
} from '../helpers/gateway.js';
import { gateway as cli } from '../helpers/cli.js';
import { docsExample } from '../helpers/docs.js';
import { request } from '../helpers/http.js';
import { inTimeZone, ZONES_AROUND_UTC } from '../helpers/timeZone.js';
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** A row as the admin API answers it: the time as text. */
type Row = Omit<AuditRow, 'at'> & { at: string };

/** The UTC time `ms` from now as ISO 8601 without an offset (2026-11-25T08:00:00). */
const utcWall = (ms: number) => new Date(Date.now() + ms).toISOString().slice(0, 19);

describeWithServices('audit log', () => {
  let a: TestGateway;
  let b: TestGateway;
  let adminApp: FastifyInstance;
  let adminUrl: string;
  const admin = (method: string, path: string, json?: unknown) => request(adminUrl, method, path, { headers: bearer(ADMIN_KEY), json });
  /** A user agent of the test's own: its rows are found by it. */
  const agent = () => ({ 'user-agent': `audit-test ${marker()}` });
  const eventsOf = async (userId: number): Promise<Row[]> => {
    const res = await admin('GET', `/admin/v1/audit?user_id=${userId}&limit=200`);
    expect(res.status).toBe(200);
    return (res.json.events as Row[]).reverse(); // oldest first, as they happened
  };
  const types = async (userId: number) => (await eventsOf(userId)).map((e) => e.type);

  beforeAll(async () => {
    [a, b] = await startTwoGateways(testConfig({ auth: { mfa: { issuer: 'Example' } } }));
    adminApp = await buildAdminApp(a.services);
    adminUrl = await adminApp.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await adminApp?.close();
    await Promise.all([a?.close(), b?.close()]);
    await closeSql();
  });

  it('registration, logins and logout: one row each, with the actor, the client and no secret', async () => {
    const headers = agent();
    const email = newEmail();
    const password = newPassword();
    const reg = await a.post('/api/v1/auth/register', { email, password }, { headers });
    expect(reg.status).toBe(201);
    const id = reg.json.user_id as number;
    expect((await b.post('/api/v1/auth/login', { email, password: `${password}x` }, { headers })).status).toBe(401);
    const login = await b.post('/api/v1/auth/login', { email, password }, { headers });
    expect(login.status).toBe(200);
    expect((await a.post('/api/v1/auth/logout', { refresh_token: login.json.refresh_token }, { headers })).status).toBe(200);
    // A token already logged out: nothing ends, nothing recorded.
    expect((await a.post('/api/v1/auth/logout', { refresh_token: login.json.refresh_token }, { headers })).status).toBe(200);

    const rows = await eventsOf(id);
    expect(rows.map((r) => r.type)).toEqual(['user.registered', 'login.failed', 'login.succeeded', 'logout']);
    for (const row of rows) expect(row).toMatchObject({ actor: 'user', user_id: id, ip: '127.0.0.1', user_agent: headers['user-agent'] });
    expect(rows[1]!.data).toEqual({ reason: 'wrong_password' });
    expect(rows[2]!.data).toEqual({ amr: ['pwd'] });
    const text = JSON.stringify(rows);
    for (const secret of [password, login.json.refresh_token, login.json.access_token]) expect(text).not.toContain(secret);
  });

  it('a failed login for an unknown email keeps only the client: not what was typed', async () => {
    const headers = agent();
    const typed = `${newPassword()}@not-an-account.test`; // a password typed into the email field
    expect((await a.post('/api/v1/auth/login', { email: typed, password: 'whatever-it-was' }, { headers })).status).toBe(401);
    const rows = await sql<Row>('SELECT * FROM audit_events WHERE user_agent = $1', [headers['user-agent']]);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ type: 'login.failed', actor: 'user', user_id: null, ip: '127.0.0.1', data: { reason: 'unknown_email' } });
    expect(JSON.stringify(rows)).not.toMatch(/not-an-account|whatever-it-was/);
  });

  it('an inactive account, a password change, a refresh token replayed, sessions, API keys, the account deleted', async () => {
    const user = await makeUser(a);
    const headers = { ...bearer(user.access), ...agent() };
    // A second session, ended by its owner.
    expect((await a.post('/api/v1/auth/login', { email: user.email, password: user.password })).status).toBe(200);
    const sessions = await a.get('/api/v1/user/sessions', { headers });
    const otherSession = (sessions.json.sessions as Array<{ id: number; current: boolean }>).find((s) => !s.current)!;
    expect((await b.request('DELETE', `/api/v1/user/sessions/${otherSession.id}`, { headers })).status).toBe(200);
    // A rotated token presented again.
    const rotated = await a.post('/api/v1/auth/refresh', { refresh_token: user.refresh });
    expect(rotated.status).toBe(200);
    expect((await b.post('/api/v1/auth/refresh', { refresh_token: user.refresh })).status).toBe(401);
    const next = newPassword();
    const changed = await a.post('/api/v1/auth/password/change', { current_password: user.password, new_password: next }, { headers: bearer(rotated.json.access_token) });
    expect(changed.status).toBe(200);
    // Pro, by the admin API; then a key made and revoked by its owner.
    expect((await admin('PUT', `/admin/v1/users/${user.id}/plan`, { plan: 'pro' })).status).toBe(200);
    const owner = bearer(changed.json.access_token);
    expect((await a.post('/api/v1/user/api-token', {}, { headers: owner })).status).toBe(201);
    expect((await a.request('DELETE', '/api/v1/user/api-token', { headers: owner })).status).toBe(200);
    // Deactivated: a login with the right password fails as inactive; active again.
    expect((await admin('PUT', `/admin/v1/users/${user.id}/active`, { active: false })).status).toBe(200);
    expect((await a.post('/api/v1/auth/login', { email: user.email, password: next })).status).toBe(401);
    expect((await admin('PUT', `/admin/v1/users/${user.id}/active`, { active: true })).status).toBe(200);
    // A wrong password: nothing deleted, nothing recorded; then the owner deletes the account.
    const fresh = await a.post('/api/v1/auth/login', { email: user.email, password: next });
    expect((await a.request('DELETE', '/api/v1/user/me', { json: { password: user.password }, headers: bearer(fresh.json.access_token) })).status).toBe(401);
    expect((await a.request('DELETE', '/api/v1/user/me', { json: { password: next }, headers: bearer(fresh.json.access_token) })).status).toBe(200);

    const rows = await eventsOf(user.id);
    expect(rows.map((r) => r.type)).toEqual([
      'user.registered', 'login.succeeded', 'login.succeeded', 'session.revoked', 'refresh.reuse_detected', 'password.changed',
      'admin.plan_changed', 'api_key.created', 'api_key.revoked', 'admin.active_changed', 'login.failed', 'admin.active_changed', 'login.succeeded', 'account.deleted',
    ]);
    const by = (type: string) => rows.filter((r) => r.type === type);
    expect(by('session.revoked')[0]).toMatchObject({ actor: 'user', data: { session_id: otherSession.id, current: false }, user_agent: headers['user-agent'] });
    // The gateway's own finding: whoever presented the rotated token may not be its user.
    expect(by('refresh.reuse_detected')[0]).toMatchObject({ actor: 'system', data: { revoked_sessions: 0 } });
    expect(by('admin.plan_changed')[0]).toMatchObject({ actor: 'admin', data: { plan: 'pro' } });
    expect(by('admin.active_changed').map((r) => r.data)).toEqual([{ active: false }, { active: true }]);
    expect(by('login.failed')[0]!.data).toEqual({ reason: 'inactive' });
    expect(by('password.changed')[0]!.data).toMatchObject({ revoked_sessions: expect.any(Number) });
    // The account is gone; its events stay (until audit.retention).
    expect(await sql('SELECT 1 FROM users WHERE id = $1', [user.id])).toEqual([]);
  });

  it('the second factor: enrolled, a wrong code, a recovery code used, removed by an operator', async () => {
    const user = await makeUser(a);
    const enroll = await a.post('/api/v1/auth/mfa/totp/enroll', {}, { headers: bearer(user.access) });
    const secret = enroll.json.secret as string;
    const confirm = await a.post('/api/v1/auth/mfa/totp/confirm', { code: authenticator.generate(secret) }, { headers: bearer(user.access) });
    expect(confirm.status).toBe(200);
    const mfaToken = async () => (await a.post('/api/v1/auth/login', { email: user.email, password: user.password })).json.mfa_token as string;
    expect((await a.post('/api/v1/auth/mfa/verify', { mfa_token: await mfaToken(), code: '000000x' })).status).toBe(401);
    const verified = await b.post('/api/v1/auth/mfa/verify', { mfa_token: await mfaToken(), code: confirm.json.recovery_codes[0] });
    expect(verified.status).toBe(200);
    expect((await admin('DELETE', `/admin/v1/users/${user.id}/mfa`)).status).toBe(200);
    const rows = await eventsOf(user.id);
    expect(rows.map((r) => r.type)).toEqual(['user.registered', 'login.succeeded', 'mfa.enrolled', 'login.failed', 'mfa.recovery_code_used', 'login.succeeded', 'admin.mfa_reset']);
    expect(rows[3]!.data).toEqual({ reason: 'mfa_failed' });
    expect(rows[5]!.data).toEqual({ amr: ['pwd', 'mfa'] });
    expect(JSON.stringify(rows)).not.toContain(confirm.json.recovery_codes[0]);
  });

  it('a second factor for an account deactivated since its password step: login.failed (inactive), and no code used up', async () => {
    const user = await makeUser(a);
    const enroll = await a.post('/api/v1/auth/mfa/totp/enroll', {}, { headers: bearer(user.access) });
    const confirm = await a.post('/api/v1/auth/mfa/totp/confirm', { code: authenticator.generate(enroll.json.secret as string) }, { headers: bearer(user.access) });
    expect(confirm.status).toBe(200);
    const code = confirm.json.recovery_codes[0] as string;
    const mfaToken = (await a.post('/api/v1/auth/login', { email: user.email, password: user.password })).json.mfa_token as string;
    expect((await admin('PUT', `/admin/v1/users/${user.id}/active`, { active: false })).status).toBe(200);
    const refused = await b.post('/api/v1/auth/mfa/verify', { mfa_token: mfaToken, code }, { headers: agent() });
    expect([refused.status, refused.json]).toEqual([401, { error: 'Code invalide' }]);
    expect((await eventsOf(user.id)).filter((r) => r.type === 'login.failed').map((r) => r.data)).toEqual([{ reason: 'inactive' }]);
    // Active again: the same recovery code still signs in (it was not spent on the refused attempt).
    expect((await admin('PUT', `/admin/v1/users/${user.id}/active`, { active: true })).status).toBe(200);
    const fresh = (await a.post('/api/v1/auth/login', { email: user.email, password: user.password })).json.mfa_token as string;
    expect((await a.post('/api/v1/auth/mfa/verify', { mfa_token: fresh, code })).status).toBe(200);
  });

  it('one logout of one token on two instances at once: one row', async () => {
    const user = await makeUser(a);
    const answers = await Promise.all([a, b, a, b].map((gw) => gw.post('/api/v1/auth/logout', { refresh_token: user.refresh })));
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    expect((await types(user.id)).filter((t) => t === 'logout')).toHaveLength(1);
  });

  it('none for a change that did not happen: a taken email, an unknown user, a wrong password', async () => {
    const user = await makeUser(a);
    expect((await a.post('/api/v1/auth/register', { email: user.email, password: newPassword() })).status).toBe(409);
    expect((await admin('PUT', '/admin/v1/users/2147483000/plan', { plan: 'pro' })).status).toBe(404);
    expect((await a.post('/api/v1/auth/password/change', { current_password: 'not-it-at-all', new_password: newPassword() }, { headers: bearer(user.access) })).status).toBe(401);
    expect(await types(user.id)).toEqual(['user.registered', 'login.succeeded']);
    expect(await sql('SELECT 1 FROM audit_events WHERE user_id = 2147483000')).toEqual([]);
  });

  it('lists newest first in keyset pages, by user, type and time; refuses malformed filters', async () => {
    const user = await makeUser(a);
    for (let i = 0; i < 5; i++) await a.post('/api/v1/auth/login', { email: user.email, password: 'wrong-password-here' });
    const pages: Row[][] = [];
    let cursor = '';
    do {
      const res = await admin('GET', `/admin/v1/audit?user_id=${user.id}&type=login.failed&limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      expect(res.status).toBe(200);
      pages.push(res.json.events);
      cursor = res.json.next_cursor ?? '';
    } while (cursor);
    expect(pages.map((p) => p.length)).toEqual([2, 2, 1]);
    const ids = pages.flat().map((r) => r.id);
    expect(ids).toEqual([...ids].sort((x, y) => y - x));
    expect(new Set(ids).size).toBe(5);
    const since = new Date(Date.now() + 60_000).toISOString();
    expect((await admin('GET', `/admin/v1/audit?user_id=${user.id}&since=${since}`)).json).toEqual({ events: [], next_cursor: null });
    // since is ISO 8601 only: what else Date reads (a month by name) it reads in the host's zone.
    for (const bad of ['limit=0', 'limit=201', 'since=yesterday', 'since=2026-13-01', 'since=Nov%2025%202026', 'since=2026-11-25T25:00:00Z', 'user_id=abc', 'cursor=nope']) {
      const res = await admin('GET', `/admin/v1/audit?${bad}`);
      expect(res.status, bad).toBe(400);
      expect(res.json).toEqual({ error: 'Paramètres de liste invalides (limit, cursor, user_id ou since)' });
    }
  });

  it('reads a since without an offset as UTC, whatever the host\'s local time zone', async () => {
    const user = await makeUser(a);
    const count = async (since: string) => (await admin('GET', `/admin/v1/audit?user_id=${user.id}&since=${encodeURIComponent(since)}`)).json.events.length as number;
    const all = await count(utcWall(-3_600_000));
    expect(all).toBeGreaterThan(0);
    for (const zone of ZONES_AROUND_UTC) {
      await inTimeZone(zone, async () => {
        // New York would read an hour ago as four hours ahead, Tokyo an hour ahead as eight ago.
        expect([zone, await count(utcWall(-3_600_000)), await count(utcWall(3_600_000))]).toEqual([zone, all, 0]);
        expect([zone, await count(utcWall(-3_600_000).replace('T', ' ')), await count(`${utcWall(3_600_000)}.5`)]).toEqual([zone, all, 0]);
      });
    }
  });

  it('purges rows past audit.retention in the hourly sweep, keeps the others', async () => {
    const user = await makeUser(a);
    const old = new Date(Date.now() - 91 * 86_400_000);
    await sql('INSERT INTO audit_events (at, type, actor, user_id) VALUES ($1, $2, $3, $4)', [old, 'logout', 'user', user.id]);
    expect((await a.services.housekeeping.sweep()).audit_events).toBeGreaterThanOrEqual(1);
    expect(await types(user.id)).toEqual(['user.registered', 'login.succeeded']);
  });
});

describeWithServices('audit log: the CLI', () => {
  let dir: string;
  let gw: TestGateway;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'gw-audit-'));
    writeFileSync(path.join(dir, 'gateway.yaml'), JSON.stringify(rawTestConfig()));
    gw = await startTestGateway(testConfig());
  });
  afterAll(async () => {
    await gw?.close();
    rmSync(dir, { recursive: true, force: true });
    await closeSql();
  });

  it('records the CLI as the actor of its changes, and lists events with gateway audit', async () => {
    const user = await makeUser(gw);
    const config = path.join(dir, 'gateway.yaml');
    const set = await cli(['users', 'set-plan', user.email, 'premium', '--config', config]);
    expect(set.code, set.stderr).toBe(0);
    const listed = await cli(['audit', '--user', String(user.id), '--json', '--config', config]);
    expect(listed.code, listed.stderr).toBe(0);
    const { events } = JSON.parse(listed.stdout) as { events: Row[] };
    expect(events.map((e) => [e.type, e.actor])).toEqual([['admin.plan_changed', 'cli'], ['login.succeeded', 'user'], ['user.registered', 'user']]);
    expect(events[0]!.data).toEqual({ plan: 'premium' });
    const table = await cli(['audit', '--user', String(user.id), '--type', 'admin.plan_changed', '--config', config]);
    expect(table.stdout.split('\n')[0]).toMatch(/^AT\s+TYPE\s+ACTOR\s+USER\s+IP\s+DATA$/);
    expect(table.stdout).toContain('admin.plan_changed  cli');
    // --since without an offset is UTC under any TZ the operator's shell has.
    const since = async (zone: string, at: string) => {
      const run = await cli(['audit', '--user', String(user.id), '--since', at, '--json', '--config', config], { env: { TZ: zone } });
      expect(run.code, run.stderr).toBe(0);
      return (JSON.parse(run.stdout) as { events: Row[] }).events.length;
    };
    expect([await since('America/New_York', utcWall(-3_600_000)), await since('Asia/Tokyo', utcWall(3_600_000))]).toEqual([3, 0]);
    const refused = await cli(['audit', '--limit', '0', '--config', config]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('--limit: expected a number from 1 to 200');
  });
});

describe('audit log: configuration', () => {
  it('audit.retention is a duration, 90 days by default', () => {
    expect(parseConfig('', 'gateway.yaml').audit.retention).toBe(90 * 86_400_000);
    expect(parseConfig(docsExample('audit', 'audit'), 'docs/audit.md').audit.retention).toBe(90 * 86_400_000);
    expect(parseConfig('audit: { retention: 30d }', 'gateway.yaml').audit.retention).toBe(30 * 86_400_000);
    expect(configProblems('audit: { retention: 30 }')[0]).toMatch(/^audit\.retention: expected a duration/);
  });
});
