// CONTRACT §24: an operator enrols with the link the CLI printed (password and TOTP), signs in to
// the console with email, password and a code, and acts there with their role as it is now; a
// console session with a recent second factor mints a personal token. Refusals are audited as
// operator.login_failed; wrong codes lock codes per operator (§14).
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import { sha256Hex } from '../../src/credentials/digest.js';
import { createEnrolment, insertOperator, type OperatorRole } from '../../src/storage/operators/operators.js';
import {
  bearer, describeWithServices, loggedLines, makeUser, marker, ownRedisPrefix, startTwoGateways, testClock, testConfig, type TestGateway,
  type ThrowawayDatabase,
} from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { adminOnOwnDatabase, type AdminOnOwnDatabase } from '../helpers/adminApi.js';
import { totpCode } from '../helpers/totp.js';

describeWithServices('console: operators sign in as themselves', () => {
  let setup: AdminOnOwnDatabase;
  let db: ThrowawayDatabase;
  let gw: TestGateway;
  let url: string;
  let origin: string;
  const clock = testClock();
  const post = (path: string, json: unknown, headers: Record<string, string> = {}) => request(url, 'POST', path, { headers: { origin, ...headers }, json });
  const cookieOf = (res: { headers: Record<string, unknown> }) => String(res.headers['set-cookie']).split(';')[0]!;

  /** An operator as `gateway operators add` makes one: the link's token. */
  async function invited(role: OperatorRole): Promise<{ id: number; email: string; token: string }> {
    const email = `op-${marker()}@example.test`;
    const operator = (await insertOperator(gw.services.db, email, role, new Date()))!;
    const token = randomBytes(32).toString('base64url');
    await createEnrolment(gw.services.db, operator.id, sha256Hex(token), new Date(Date.now() + 86_400_000));
    return { id: operator.id, email, token };
  }

  /** Enrolled through the link: the secret, and the signed-in session. */
  async function enrolled(role: OperatorRole, password = 'operator-password-1') {
    const op = await invited(role);
    const start = await post('/console/operator/enrolment', { token: op.token });
    expect([start.status, start.json.email]).toEqual([200, op.email]);
    const secret = start.json.secret as string;
    const done = await post('/console/operator/enrolment/complete', { token: op.token, password, code: totpCode(secret, clock().getTime()) });
    expect(done.status).toBe(200);
    return { ...op, secret, password, cookie: cookieOf(done), csrf: done.json.csrf as string };
  }

  beforeAll(async () => {
    setup = await adminOnOwnDatabase(({ storage }) => testConfig({ storage, auth: { rateLimit: { max: 0 } } }), { clock });
    ({ db, gw, url } = setup);
    origin = new URL(url).origin;
  });
  afterAll(() => setup?.close());

  it('serves the operator page the enrolment link opens, under the console\'s CSP', async () => {
    const page = await request(url, 'GET', '/console/operator.html');
    expect([page.status, page.headers['content-type'], page.headers['content-security-policy']]).toEqual([200, 'text/html; charset=utf-8', expect.stringContaining("script-src 'self'")]);
    expect(page.text).toContain('<script type="module" src="operator.js"></script>');
    const script = await request(url, 'GET', '/console/operator.js');
    expect([script.status, script.text]).toEqual([200, expect.stringContaining("'/console/operator/enrolment/complete'")]);
  });

  it('enrols once with the link, then signs in with email, password and a code; acts with its role; the audit names it', async () => {
    const op = await enrolled('support');
    // The link is spent.
    expect((await post('/console/operator/enrolment', { token: op.token })).status).toBe(401);
    const user = await makeUser(gw);
    const session = { cookie: op.cookie, 'x-csrf-token': op.csrf };
    expect((await request(url, 'DELETE', `/console/api/v1/users/${user.id}/sessions`, { headers: { origin, ...session } })).status).toBe(200);
    const plan = await request(url, 'PUT', `/console/api/v1/users/${user.id}/plan`, { headers: { origin, ...session }, json: { plan: 'pro' } });
    expect([plan.status, plan.json]).toEqual([403, { error: 'Rôle insuffisant', required_roles: ['admin'], current_role: 'support' }]);
    const [event] = await db.sql<{ actor: string; actor_id: number; data: Record<string, unknown> }>(
      "SELECT actor, actor_id, data FROM audit_events WHERE user_id = $1 AND type = 'admin.sessions_revoked'", [user.id],
    );
    expect(event).toEqual({ actor: 'operator', actor_id: op.id, data: expect.objectContaining({ operator_email: op.email }) });

    clock.advance(30_000);
    // One code, computed once: computed again, a 30-second step could turn between the two
    // requests and the second would send a fresh code.
    const code = totpCode(op.secret, clock().getTime());
    const again = await post('/console/operator/session', { email: op.email.toUpperCase(), password: op.password, code });
    expect(again.status).toBe(200);
    // The same code twice is refused (a step is used once), and audited.
    const replay = await post('/console/operator/session', { email: op.email, password: op.password, code });
    expect([replay.status, replay.json]).toEqual([401, { error: 'Identifiants invalides' }]);
    const failures = await db.sql<{ actor_id: number; data: Record<string, unknown> }>("SELECT actor_id, data FROM audit_events WHERE type = 'operator.login_failed' AND actor_id = $1", [op.id]);
    expect(failures).toEqual([{ actor_id: op.id, data: { reason: 'mfa_failed', operator_email: op.email } }]);
    const unknown = await post('/console/operator/session', { email: 'nobody@example.test', password: 'x', code: '000000' });
    expect(unknown.status).toBe(401);
  });

  it('enrolment: a link refused from another origin or unknown, a short password, a wrong code leave the link unspent; the audit names the method', async () => {
    const op = await invited('viewer');
    const TICKET = { error: 'Lien de connexion invalide, déjà utilisé ou expiré' };
    const foreign = { origin: 'https://evil.example' };
    expect(await post('/console/operator/enrolment', { token: op.token }, foreign).then((r) => [r.status, r.json])).toEqual([401, TICKET]);
    expect(await post('/console/operator/enrolment', { token: 'not-a-link' }).then((r) => [r.status, r.json])).toEqual([401, TICKET]);
    const start = await post('/console/operator/enrolment', { token: op.token });
    expect(start.json.otpauth_url).toContain(`${encodeURIComponent('auth-gateway console')}:`);
    const secret = start.json.secret as string;
    const complete = (body: Record<string, unknown>, headers: Record<string, string> = {}) => post('/console/operator/enrolment/complete', { token: op.token, ...body }, headers);
    // auth.passwordMinLength (8) characters, not fewer.
    expect(await complete({ password: 'seven77', code: '000000' }).then((r) => [r.status, r.json])).toEqual([400, { error: 'Mot de passe trop court (min 8 caractères)' }]);
    expect(await complete({ password: 'eight888', code: '000000' }).then((r) => [r.status, r.json])).toEqual([401, { error: 'Code invalide' }]);
    const code = totpCode(secret, clock().getTime());
    expect(await complete({ password: 'eight888', code }, foreign).then((r) => [r.status, r.json])).toEqual([401, TICKET]);
    expect(await post('/console/operator/enrolment/complete', { token: 'not-a-link', password: 'eight888', code }).then((r) => [r.status, r.json])).toEqual([401, TICKET]);
    // The code as an app shows it, spaces around it.
    expect((await complete({ password: 'eight888', code: ` ${code} ` })).status).toBe(200);
    const [enrolledRow] = await db.sql("SELECT data FROM audit_events WHERE type = 'operator.enrolled' AND actor_id = $1", [op.id]);
    expect(enrolledRow).toEqual({ data: { operator_id: op.id, method: 'totp', operator_email: op.email } });
  });

  it('sign-in: each refusal audited and logged with its reason, none from another origin; a body-less request refused as such', async () => {
    const op = await enrolled('viewer');
    const pending = await invited('viewer');
    const reasons = async (id: number | null) => (await db.sql<{ reason: string }>(
      `SELECT data->>'reason' AS reason FROM audit_events WHERE type = 'operator.login_failed' AND actor_id ${id === null ? 'IS NULL' : '= $1'} ORDER BY id`, id === null ? [] : [id],
    )).map((r) => r.reason);
    const anonymous = (await reasons(null)).length;
    const INVALID = [401, { error: 'Identifiants invalides' }];
    const code = () => totpCode(op.secret, clock().getTime());
    expect(await post('/console/operator/session', { email: 'nobody@example.test', password: 'x' }).then((r) => [r.status, r.json])).toEqual(INVALID);
    expect(await post('/console/operator/session', { email: pending.email, password: 'x' }).then((r) => [r.status, r.json])).toEqual(INVALID);
    expect(await post('/console/operator/session', { email: op.email, password: 'not-the-password', code: code() }).then((r) => [r.status, r.json])).toEqual(INVALID);
    expect((await reasons(null)).slice(anonymous)).toEqual(['unknown_email']);
    expect(await reasons(pending.id)).toEqual(['not_enrolled']);
    expect(await reasons(op.id)).toEqual(['wrong_password']);
    expect(loggedLines(gw, 'console: operator sign-in refused').slice(-3).map((l) => l.reason)).toEqual(['unknown_email', 'not_enrolled', 'wrong_password']);
    // Another page's origin gets nothing, not even with every credential right.
    clock.advance(30_000);
    const foreign = await post('/console/operator/session', { email: op.email, password: op.password, code: code() }, { origin: 'https://evil.example' });
    expect([foreign.status, foreign.json, foreign.headers['set-cookie']]).toEqual([401, { error: 'Clé d’administration invalide' }, undefined]);
    const bodiless = await request(url, 'POST', '/console/operator/session', { headers: { origin } });
    expect([bodiless.status, bodiless.json]).toEqual(INVALID);
    const spaced = await post('/console/operator/session', { email: `  ${op.email.toUpperCase()} `, password: op.password, code: code() });
    expect(spaced.status).toBe(200);
    expect(loggedLines(gw, 'console: operator signed in').at(-1)).toMatchObject({ operatorId: op.id });
    // Without admin.passkeys there is no passkey route.
    expect((await post('/console/operator/passkey/login/options', {})).status).toBe(404);
  });

  it('without admin.passkeys, a passkey sent beside the code is no second factor: the code decides', async () => {
    const op = await enrolled('viewer');
    clock.advance(30_000);
    const code = totpCode(op.secret, clock().getTime());
    const res = await post('/console/operator/session', { email: op.email, password: op.password, passkey: { id: 'x' }, code });
    expect(res.status).toBe(200);
  });

  it('a session with a recent second factor mints a personal token (not after 5 minutes, never without CSRF)', async () => {
    const op = await enrolled('viewer');
    const mint = (csrf: string) => request(url, 'POST', '/console/api/v1/operator/tokens', { headers: { origin, cookie: op.cookie, 'x-csrf-token': csrf }, json: { name: 'ci' } });
    expect((await mint('wrong')).status).toBe(403);
    const minted = await mint(op.csrf);
    expect([minted.status, minted.json.token]).toEqual([201, expect.stringMatching(/^gwop_[\w-]{43}$/)]);
    expect((await request(url, 'GET', '/admin/v1/users?limit=1', { headers: bearer(minted.json.token) })).status).toBe(200);
    clock.advance(5 * 60_000 + 1000);
    expect((await mint(op.csrf)).json).toEqual({ error: 'Authentification récente requise' });
  });

  it('mints with a name of 1 to 100 characters (trimmed) for 1 to 365 days (90 by default), audited; until exactly 5 minutes after the second factor', async () => {
    // The clock still: the sign-in's instant and the expiry dates are then known to the millisecond.
    clock.freeze();
    try {
      const signedInAt = clock().getTime();
      const op = await enrolled('viewer');
      const mint = (json: unknown) => request(url, 'POST', '/console/api/v1/operator/tokens', { headers: { origin, cookie: op.cookie, 'x-csrf-token': op.csrf }, json });
      const BAD = [400, { error: 'Requête invalide' }];
      for (const body of [{}, { name: '   ' }, { name: 42 }, { name: 'x'.repeat(101) }, { name: 'ci', expires_in_days: 0 }, { name: 'ci', expires_in_days: 366 },
        { name: 'ci', expires_in_days: 1.5 }, { name: 'ci', expires_in_days: '30' }]) {
        expect(await mint(body).then((r) => [JSON.stringify(body), r.status, r.json])).toEqual([JSON.stringify(body), ...BAD]);
      }
      const longest = await mint({ name: ` ${'x'.repeat(100)} `, expires_in_days: 365 });
      expect([longest.status, longest.json.expires_at]).toEqual([201, new Date(signedInAt + 365 * 86_400_000).toISOString()]);
      expect((await mint({ name: 'one day', expires_in_days: 1 })).status).toBe(201);
      const usual = await mint({ name: ' ci ' });
      expect([usual.status, usual.json.expires_at]).toEqual([201, new Date(signedInAt + 90 * 86_400_000).toISOString()]);
      const events = await db.sql<{ data: Record<string, unknown> }>("SELECT data FROM audit_events WHERE type = 'operator.token_created' AND actor_id = $1 ORDER BY id", [op.id]);
      expect(events.map((e) => e.data)).toEqual([
        { token_id: longest.json.id, name: 'x'.repeat(100), operator_email: op.email },
        { token_id: expect.any(Number), name: 'one day', operator_email: op.email },
        { token_id: usual.json.id, name: 'ci', operator_email: op.email },
      ]);
      clock.advance(5 * 60_000);
      expect((await mint({ name: 'at five minutes' })).status).toBe(201);
      clock.advance(1);
      expect((await mint({ name: 'past them' })).json).toEqual({ error: 'Authentification récente requise' });
    } finally {
      clock.thaw();
    }
  });

  it('ten wrong codes lock the operator\'s codes for 15 minutes (429), even with the right one', async () => {
    const op = await enrolled('viewer');
    const wrong = () => post('/console/operator/session', { email: op.email, password: op.password, code: '000000' });
    for (let i = 0; i < 9; i++) expect((await wrong()).status).toBe(401);
    // The lock runs 15 minutes from the tenth wrong code: Retry-After is what is left of them, to
    // the second, between the earliest and the latest instants each request could have been read at.
    const tenth = clock().getTime();
    expect((await wrong()).status).toBe(401);
    const tenthAnswered = clock().getTime();
    clock.advance(30_000);
    const asked = clock().getTime();
    const locked = await post('/console/operator/session', { email: op.email, password: op.password, code: totpCode(op.secret, asked) });
    const answered = clock().getTime();
    expect([locked.status, locked.json]).toEqual([429, { error: 'Trop de tentatives, réessayez plus tard' }]);
    const left = (from: number, at: number) => Math.ceil((from + 15 * 60_000 - at) / 1000);
    const retryAfter = Number(locked.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(left(tenth, answered));
    expect(retryAfter).toBeLessThanOrEqual(left(tenthAnswered, asked));
  });

  it('is under the auth rate limit (auth.rateLimit, per client address), counted across instances through Redis: the attempt past it is 429 for the window', async () => {
    // A Redis prefix of its own: other files' sign-ins from 127.0.0.1 are not counted here.
    const config = testConfig({ storage: { ...db.storage, redisKeyPrefix: ownRedisPrefix('operator-sign-in') }, auth: { rateLimit: { max: 3, window: '10m' } } });
    const instances = await startTwoGateways(config);
    const apps = await Promise.all(instances.map((instance) => buildAdminApp(instance.services)));
    try {
      const at = await Promise.all(apps.map((app) => app.listen({ host: '127.0.0.1', port: 0 })));
      const attempt = (i: number) => request(at[i % 2]!, 'POST', '/console/operator/session', { json: { email: 'nobody@example.test', password: 'x', code: '000000' } });
      const answers = [];
      for (let i = 0; i < 4; i++) answers.push(await attempt(i));
      expect(answers.map((r) => r.status)).toEqual([401, 401, 401, 429]);
      // The window is auth.rateLimit.window's ten minutes, not the plugin's default minute.
      expect(Number(answers[3]!.headers['retry-after'])).toBeGreaterThan(590);
    } finally {
      await Promise.all(apps.map((app) => app.close()));
      await Promise.all(instances.map((instance) => instance.close()));
    }
  });

  it('enrolment: a body-less completion is a password too short; one before the link was opened, or with a second link of an enrolled operator, is refused with its reason logged', async () => {
    const TOO_SHORT = [400, { error: 'Mot de passe trop court (min 8 caractères)' }];
    const bodiless = await request(url, 'POST', '/console/operator/enrolment/complete', { headers: { origin } });
    expect([bodiless.status, bodiless.json]).toEqual(TOO_SHORT);
    const op = await invited('viewer');
    expect(await post('/console/operator/enrolment/complete', { token: op.token, password: 1234567890 }).then((r) => [r.status, r.json])).toEqual(TOO_SHORT);
    // No secret was made yet (the link's first step): no code can be right.
    const early = await post('/console/operator/enrolment/complete', { token: op.token, password: 'eight888', code: '000000' });
    expect([early.status, early.json]).toEqual([401, { error: 'Code invalide' }]);
    expect(loggedLines(gw, 'console: operator enrolment refused').at(-1)).toMatchObject({ reason: 'not_enrolling' });
    // An operator enrolled already, given a second link: its confirmed secret is not replaced, and
    // a code of it does not enrol again.
    const done = await enrolled('viewer');
    const again = randomBytes(32).toString('base64url');
    await createEnrolment(gw.services.db, done.id, sha256Hex(again), new Date(Date.now() + 86_400_000));
    expect(await post('/console/operator/enrolment', { token: again }).then((r) => [r.status, r.json])).toEqual([401, { error: 'Lien de connexion invalide, déjà utilisé ou expiré' }]);
    clock.advance(30_000);
    const code = totpCode(done.secret, clock().getTime());
    expect((await post('/console/operator/enrolment/complete', { token: again, password: 'another-password', code })).status).toBe(401);
    expect(loggedLines(gw, 'console: operator enrolment refused').at(-1)).toMatchObject({ reason: 'not_enrolling' });
    // The operator's password and code are still the first ones.
    expect((await post('/console/operator/session', { email: done.email, password: done.password, code })).status).toBe(200);
  });

  it('enrolment: ten wrong codes lock the link\'s codes for 15 minutes (429), even with the right one; the link stays unspent', async () => {
    const op = await invited('viewer');
    const secret = (await post('/console/operator/enrolment', { token: op.token })).json.secret as string;
    const complete = (code: string) => post('/console/operator/enrolment/complete', { token: op.token, password: 'eight888', code });
    for (let i = 0; i < 10; i++) expect((await complete('000000')).status).toBe(401);
    const locked = await complete(totpCode(secret, clock().getTime()));
    expect([locked.status, locked.json]).toEqual([429, { error: 'Trop de tentatives, réessayez plus tard' }]);
    expect(Number(locked.headers['retry-after'])).toBeGreaterThan(15 * 60 - 10);
    clock.advance(15 * 60_000 + 30_000);
    expect((await complete(totpCode(secret, clock().getTime()))).status).toBe(200);
  });
});
