// CONTRACT §24: with admin.passkeys, an operator's second factor at the console's sign-in may be a
// passkey instead of a TOTP code. An operator adds one from a console session with a recent second
// factor; it is offered only to the console's pages on admin.passkeys.origins (reached by its IP,
// the console offers TOTP only); a wrong origin, an unknown or another operator's credential and a
// replayed answer are refused and audited as operator.login_failed; a reset of the operator's
// factors removes its passkeys. A software authenticator (test/helpers/softAuthenticator.ts)
// answers the ceremonies; test/browser/operatorPasskeys.test.ts runs them in Chromium.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { sha256Hex } from '../../src/credentials/digest.js';
import { createEnrolment, insertOperator, type OperatorRole } from '../../src/storage/operators/operators.js';
import {
  ADMIN_KEY, bearer, closeSql, describeWithServices, loggedLines, marker, startTestGateway, testClock, testConfig, throwawayDatabase, type TestGateway, type ThrowawayDatabase,
} from '../helpers/gateway.js';
import { logLines } from '../helpers/cli.js';
import { request } from '../helpers/http.js';
import { sparePort } from '../helpers/ports.js';
import { authenticate, register, type SoftCredential } from '../helpers/softAuthenticator.js';
import { totpCode } from '../helpers/totp.js';

describeWithServices('console: operators sign in with a passkey (admin.passkeys)', () => {
  let db: ThrowawayDatabase;
  let gw: TestGateway;
  let port: number;
  // The console by its host name (a passkey's origin), and by its IP (TOTP only).
  let origin: string;
  let byIp: string;
  const clock = testClock();
  const post = (from: string, path: string, json: unknown, headers: Record<string, string> = {}) => request(from, 'POST', path, { headers: { origin: from, ...headers }, json });
  const cookieOf = (res: { headers: Record<string, unknown> }) => String(res.headers['set-cookie']).split(';')[0]!;

  /** An operator enrolled with TOTP through its link (by IP, as the CLI prints it), signed in: its session. */
  async function enrolled(role: OperatorRole = 'viewer', password = 'operator-password-1') {
    const email = `op-${marker()}@example.test`;
    const operator = (await insertOperator(gw.services.db, email, role, new Date()))!;
    const token = randomBytes(32).toString('base64url');
    await createEnrolment(gw.services.db, operator.id, sha256Hex(token), new Date(Date.now() + 86_400_000));
    const secret = (await post(origin, '/console/operator/enrolment', { token })).json.secret as string;
    const done = await post(origin, '/console/operator/enrolment/complete', { token, password, code: totpCode(secret, clock().getTime()) });
    expect(done.status).toBe(200);
    return { id: operator.id, email, password, secret, session: { cookie: cookieOf(done), 'x-csrf-token': done.json.csrf as string } };
  }

  /** The operator adds a passkey from its session: the software authenticator's credential. */
  async function withPasskey(op: Awaited<ReturnType<typeof enrolled>>): Promise<SoftCredential> {
    const options = await post(origin, '/console/operator/passkey/register/options', {}, op.session);
    expect(options.status).toBe(200);
    const { response, credential } = register(options.json as never, { origin });
    const added = await post(origin, '/console/operator/passkey/register/verify', { ...response, name: 'Laptop' }, op.session);
    expect([added.status, added.json.name]).toEqual([201, 'Laptop']);
    return credential;
  }

  /** A sign-in with the passkey's answer as the second factor. */
  async function signIn(op: { email: string; password: string }, credential: SoftCredential, ceremony: { origin?: string; userHandle?: unknown } = {}) {
    const options = await post(origin, '/console/operator/passkey/login/options', {});
    expect(options.status).toBe(200);
    const passkey = authenticate(options.json as never, credential, { origin, ...ceremony });
    return { passkey, answer: await post(origin, '/console/operator/session', { email: op.email, password: op.password, passkey }) };
  }

  const failures = (id: number) => db.sql<{ data: Record<string, unknown> }>("SELECT data FROM audit_events WHERE type = 'operator.login_failed' AND actor_id = $1 ORDER BY id", [id]);

  beforeAll(async () => {
    db = await throwawayDatabase({ migrated: true });
    port = await sparePort();
    origin = `http://localhost:${port}`;
    byIp = `http://127.0.0.1:${port}`;
    const config = testConfig({ storage: db.storage, auth: { rateLimit: { max: 0 } }, admin: { port, apiKey: ADMIN_KEY, passkeys: { rpId: 'localhost', origins: [origin] } } });
    // The gateway's own admin listener, on that port.
    gw = await startTestGateway(config, { clock });
  });
  afterAll(async () => {
    await gw?.close();
    await db?.drop();
    await closeSql();
  });

  it('adds a passkey from a recent session, then signs in with password and passkey; the passkey counts as the operator\'s factor', async () => {
    const op = await enrolled('admin');
    const credential = await withPasskey(op);
    const [added] = await db.sql<{ actor: string; actor_id: number; data: Record<string, unknown> }>(
      "SELECT actor, actor_id, data FROM audit_events WHERE type = 'operator.passkey_added' AND actor_id = $1", [op.id],
    );
    expect(added).toEqual({ actor: 'operator', actor_id: op.id, data: { passkey_id: expect.any(Number), operator_email: op.email } });
    const { answer } = await signIn(op, credential);
    expect([answer.status, answer.json.csrf]).toEqual([200, expect.any(String)]);
    // The session acts as the operator.
    const who = await request(origin, 'GET', '/console/api/v1/operator', { headers: { origin, cookie: cookieOf(answer) } });
    expect(who.json).toEqual({ operator: { id: op.id, email: op.email }, role: 'admin' });
    const [row] = await db.sql<{ last_used_at: Date | null; counter: string }>('SELECT last_used_at, counter FROM operator_passkeys WHERE operator_id = $1', [op.id]);
    expect([row!.last_used_at, Number(row!.counter)]).toEqual([expect.any(Date), 1]);
  });

  it('refuses a replayed answer, a wrong origin, an unknown credential, another\'s passkey (with this one\'s handle too), no userHandle, non-answers; each audited', async () => {
    const op = await enrolled();
    const credential = await withPasskey(op);
    const first = await signIn(op, credential);
    expect(first.answer.status).toBe(200);
    const replayed = await post(origin, '/console/operator/session', { email: op.email, password: op.password, passkey: first.passkey });
    expect([replayed.status, replayed.json]).toEqual([401, { error: 'Identifiants invalides' }]);
    expect((await signIn(op, credential, { origin: 'https://evil.example' })).answer.status).toBe(401);
    const stranger = register({ challenge: 'x', rp: { id: 'localhost' }, user: { id: Buffer.from(`operator:${op.id}`).toString('base64url') } }, { origin }).credential;
    expect((await signIn(op, stranger)).answer.status).toBe(401);
    const other = await enrolled();
    const othersKey = await withPasskey(other);
    expect((await signIn(op, othersKey)).answer.status).toBe(401);
    // The handle is outside the signature: another's answer relayed with this operator's handle is still theirs.
    expect((await signIn(op, othersKey, { userHandle: Buffer.from(`operator:${op.id}`).toString('base64url') })).answer.status).toBe(401);
    expect((await signIn(op, credential, { userHandle: undefined })).answer.status).toBe(401);
    for (const passkey of [null, 42, 'x', { id: 42 }, { id: credential.id }]) {
      const res = await post(origin, '/console/operator/session', { email: op.email, password: op.password, passkey });
      expect([res.status, res.json], JSON.stringify(passkey)).toEqual([401, { error: 'Identifiants invalides' }]);
    }
    expect(await failures(op.id)).toEqual(Array(11).fill({ data: { reason: 'passkey_failed', operator_email: op.email } }));
    // A wrong password with a good passkey says nothing more.
    const wrong = await signIn({ ...op, password: 'not-the-password' }, credential);
    expect([wrong.answer.status, wrong.answer.json]).toEqual([401, { error: 'Identifiants invalides' }]);
  });

  it('is offered only on admin.passkeys.origins: the console reached by its IP offers TOTP only', async () => {
    expect((await request(origin, 'GET', '/console/operator/passkey', { headers: { origin } })).json).toEqual({ rp_id: 'localhost' });
    expect((await request(byIp, 'GET', '/console/operator/passkey', { headers: { origin: byIp } })).status).toBe(404);
    expect((await post(byIp, '/console/operator/passkey/login/options', {})).status).toBe(404);
    const op = await enrolled();
    expect((await post(byIp, '/console/operator/passkey/register/options', {}, op.session)).status).toBe(404);
    const credential = await withPasskey(op);
    // From the IP, a passkey's answer is no second factor: the code is asked for, and missing.
    const options = await post(origin, '/console/operator/passkey/login/options', {});
    const passkey = authenticate(options.json as never, credential, { origin });
    expect((await post(byIp, '/console/operator/session', { email: op.email, password: op.password, passkey })).status).toBe(401);
    expect((await post(byIp, '/console/operator/session', { email: op.email, password: op.password, code: totpCode(op.secret, clock().getTime() + 30_000) })).status).toBe(200);
  });

  it('adds a passkey only from the operator\'s own session, with its CSRF token, within 5 minutes of its second factor', async () => {
    const op = await enrolled();
    expect((await post(origin, '/console/operator/passkey/register/options', {})).status).toBe(401);
    expect((await post(origin, '/console/operator/passkey/register/options', {}, { cookie: op.session.cookie, 'x-csrf-token': 'forged' })).status).toBe(401);
    // The shared key's console session is nobody's: no passkey for it.
    const keySession = await post(origin, '/console/session', { key: ADMIN_KEY });
    expect((await post(origin, '/console/operator/passkey/register/options', {}, { cookie: cookieOf(keySession), 'x-csrf-token': keySession.json.csrf as string })).status).toBe(401);
    const options = await post(origin, '/console/operator/passkey/register/options', {}, op.session);
    clock.advance(5 * 60_000 + 1000);
    const { response } = register(options.json as never, { origin });
    const late = await post(origin, '/console/operator/passkey/register/verify', response, op.session);
    expect([late.status, late.json.error]).toEqual([403, 'Authentification récente requise']);
    // An answer that does not verify (no user verification) adds nothing.
    const fresh = await enrolled();
    const again = await post(origin, '/console/operator/passkey/register/options', {}, fresh.session);
    const unverified = register(again.json as never, { origin, verified: false }).response;
    const refused = await post(origin, '/console/operator/passkey/register/verify', unverified, fresh.session);
    expect([refused.status, refused.json]).toEqual([400, { error: 'Clé d\'accès invalide' }]);
    expect(await db.sql('SELECT 1 FROM operator_passkeys WHERE operator_id = $1', [fresh.id])).toEqual([]);
  });

  it('enrols with a passkey instead of TOTP through the link: the passkey is then its only second factor', async () => {
    const email = `op-${marker()}@example.test`;
    const operator = (await insertOperator(gw.services.db, email, 'viewer', new Date()))!;
    const token = randomBytes(32).toString('base64url');
    await createEnrolment(gw.services.db, operator.id, sha256Hex(token), new Date(Date.now() + 86_400_000));
    expect((await post(byIp, '/console/operator/enrolment/passkey/options', { token })).status).toBe(404);
    expect((await post(origin, '/console/operator/enrolment/passkey/options', { token: 'not-a-link' })).status).toBe(401);
    const password = 'operator-password-2';
    // An answer that does not verify is the passkey's fault, not the link's, which stays unspent.
    const first = await post(origin, '/console/operator/enrolment/passkey/options', { token });
    const unverified = register(first.json as never, { origin, verified: false }).response;
    const refused = await post(origin, '/console/operator/enrolment/complete', { token, password, passkey: unverified });
    expect([refused.status, refused.json]).toEqual([400, { error: 'Clé d\'accès invalide' }]);
    const options = await post(origin, '/console/operator/enrolment/passkey/options', { token });
    expect(options.status).toBe(200);
    const { response, credential } = register(options.json as never, { origin });
    const done = await post(origin, '/console/operator/enrolment/complete', { token, password, passkey: response });
    expect([done.status, done.json.csrf]).toEqual([200, expect.any(String)]);
    expect((await post(origin, '/console/operator/enrolment/complete', { token, password, passkey: response })).status).toBe(401);
    const [enrolledEvent] = await db.sql<{ data: Record<string, unknown> }>("SELECT data FROM audit_events WHERE type = 'operator.enrolled' AND actor_id = $1", [operator.id]);
    expect(enrolledEvent!.data).toMatchObject({ method: 'passkey' });
    const listed = await request(origin, 'GET', '/admin/v1/operators', { headers: bearer(ADMIN_KEY) });
    expect((listed.json.operators as Array<Record<string, unknown>>).find((o) => o.id === operator.id)).toMatchObject({ enrolled: true, mfa: true });
    expect((await signIn({ email, password }, credential)).answer.status).toBe(200);
    // No TOTP was confirmed: a code is no second factor for this operator, and the audit says so.
    expect((await post(origin, '/console/operator/session', { email, password, code: '000000' })).status).toBe(401);
    expect(await failures(operator.id)).toEqual([{ data: { reason: 'no_second_factor', operator_email: email } }]);
  });

  it('a reset of the operator\'s factors removes its passkeys: its passkey signs nobody in any more', async () => {
    const op = await enrolled();
    const credential = await withPasskey(op);
    const reset = await request(origin, 'DELETE', `/admin/v1/operators/${op.id}/mfa`, { headers: bearer(ADMIN_KEY) });
    expect([reset.status, reset.json.mfa]).toEqual([200, false]);
    expect(await db.sql('SELECT 1 FROM operator_passkeys WHERE operator_id = $1', [op.id])).toEqual([]);
    expect((await signIn(op, credential)).answer.status).toBe(401);
  });

  it('offers passkeys by the page\'s Origin, else (a same-origin GET sends none) by the address asked for; elsewhere each route is 404', async () => {
    expect((await request(origin, 'GET', '/console/operator/passkey')).json).toEqual({ rp_id: 'localhost' });
    expect((await request(byIp, 'GET', '/console/operator/passkey')).status).toBe(404);
    // A page of the passkeys' origin calling the console by its IP: the Origin decides, not the address.
    expect((await request(byIp, 'GET', '/console/operator/passkey', { headers: { origin } })).json).toEqual({ rp_id: 'localhost' });
    const op = await enrolled();
    const options = await post(origin, '/console/operator/passkey/register/options', {}, op.session);
    expect(options.json.user).toMatchObject({ id: Buffer.from(`operator:${op.id}`).toString('base64url'), name: op.email });
    const { response } = register(options.json as never, { origin });
    expect((await post(byIp, '/console/operator/passkey/register/verify', response, op.session)).status).toBe(404);
    expect(await db.sql('SELECT 1 FROM operator_passkeys WHERE operator_id = $1', [op.id])).toEqual([]);
  });

  it('adds a passkey up to 5 minutes after the second factor to the millisecond, not one more; a refusal logs no error', async () => {
    clock.freeze();
    try {
      const op = await enrolled();
      clock.advance(5 * 60_000);
      expect((await post(origin, '/console/operator/passkey/register/options', {}, op.session)).status).toBe(200);
      clock.advance(1);
      const late = await post(origin, '/console/operator/passkey/register/options', {}, op.session);
      expect([late.status, late.json.error]).toEqual([403, 'Authentification récente requise']);
    } finally {
      clock.thaw();
    }
    expect((await post(origin, '/console/operator/passkey/register/verify', {}, {})).status).toBe(401);
    expect(logLines(gw.logs.join('')).filter((line) => Number(line.level) >= 50)).toEqual([]);
  });

  it('a credential registered already is refused the second time: added, audited and logged once', async () => {
    const op = await enrolled();
    const credential = await withPasskey(op);
    const options = await post(origin, '/console/operator/passkey/register/options', {}, op.session);
    const again = await post(origin, '/console/operator/passkey/register/verify', register(options.json as never, { origin, again: credential }).response, op.session);
    expect([again.status, again.json]).toEqual([400, { error: 'Clé d\'accès invalide' }]);
    const rows = await db.sql<{ id: number }>('SELECT id FROM operator_passkeys WHERE operator_id = $1', [op.id]);
    expect(rows).toHaveLength(1);
    expect(await db.sql("SELECT 1 FROM audit_events WHERE type = 'operator.passkey_added' AND actor_id = $1", [op.id])).toHaveLength(1);
    expect(loggedLines(gw, 'console: operator passkey registered').filter((line) => line.operatorId === op.id).map((line) => line.passkeyId)).toEqual([rows[0]!.id]);
  });

  it('an operator removed while signed in adds no passkey', async () => {
    const op = await enrolled();
    await db.sql('DELETE FROM operators WHERE id = $1', [op.id]);
    const res = await post(origin, '/console/operator/passkey/register/options', {}, op.session);
    expect(res.status).toBe(401);
  });
});
