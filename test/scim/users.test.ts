// /scim/v2/orgs/{id}/Users at its edges (src/scim/users.ts; issue 69: its mutation room found them
// untested): what each refusal tells the directory's admin (its detail), a user provisioned
// inactive, a replace that changes nothing or only the case of the userName, a deletion of a user
// already deactivated, a deactivation that holds at once on the instance that made it, its
// NOTIFY late, and the user or the organization deleted while a change is under way.
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { bearer, describeWithServices, holdNotifications, marker, type TestGateway } from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import {
  answersOnceGone, createOrg, newScimToken, PATCH_OP, SCIM_ERROR, scimClient, startScimOrganization, USER_SCHEMA, verifiedDomain, verifiedUser,
  type ScimClient, type ScimOrganization, type Sql,
} from './helpers.js';

const DOMAIN_RULE = 'userName (or the primary email) must be an email of a verified domain of the organization';
const refusal = (status: number, detail: string, scimType?: string) => ({ status, json: { schemas: [SCIM_ERROR], status: String(status), ...(scimType ? { scimType } : {}), detail } });
const deactivate = { schemas: [PATCH_OP], Operations: [{ op: 'replace', value: { active: false } }] };

let held: { release(): void } | undefined;
afterEach(() => {
  held?.release();
  held = undefined;
});

describeWithServices('SCIM Users: refusals, inactive users, changes that change nothing', () => {
  let org: ScimOrganization;
  let gw: TestGateway;
  let upstream: EchoUpstream;
  let q: Sql;
  let domain: string;
  let scim: ScimClient;

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    org = await startScimOrganization({ upstreams: { app: { url: upstream.url } }, routes: [{ path: '/data', upstream: 'app', auth: 'required' }] });
    ({ gw, q, domain, scim } = org);
  });
  afterAll(async () => {
    await org?.setup.close();
    await upstream?.close();
  });

  const address = (who = 'ada') => `${who}-${randomUUID().slice(0, 8)}@${domain}`;
  const provision = async (userName: string, more: Record<string, unknown> = {}) => {
    const created = await scim.post('/Users', { schemas: [USER_SCHEMA], userName, ...more });
    expect(created.status, created.text).toBe(201);
    return created.json as { id: string; active: boolean };
  };
  const accountOf = async (email: string) => (await q<{ id: number; is_active: number }>('SELECT id, is_active FROM users WHERE email = $1', [email]))[0];
  const roleOf = async (userId: number) => (await q<{ role: string }>('SELECT role FROM memberships WHERE org_id = $1 AND user_id = $2', [org.orgId, userId]))[0]?.role;
  const audits = async (userId: number) => (await q<{ type: string }>("SELECT type FROM audit_events WHERE user_id = $1 AND type LIKE 'scim.%' ORDER BY id", [userId])).map((r) => r.type);
  const hookCount = async (userId: number) => Number((await q<{ n: string }>(
    "SELECT count(*) AS n FROM webhook_deliveries WHERE type = 'user.active_changed' AND (body::jsonb)->'data'->>'user_id' = $1", [String(userId)]))[0]!.n);

  it('each refusal of a create tells the admin why: outside the domains, a userName taken, the account already a user, the account deactivated', async () => {
    expect(await scim.post('/Users', { schemas: [USER_SCHEMA], userName: `x@elsewhere-${marker()}.test` })).toMatchObject(refusal(400, DOMAIN_RULE, 'invalidValue'));
    const email = address();
    await provision(email);
    expect(await scim.post('/Users', { schemas: [USER_SCHEMA], userName: email.toUpperCase() }))
      .toMatchObject(refusal(409, 'A user with this userName exists in the organization', 'uniqueness'));
    // Another userName, but its primary email is the same account's.
    expect(await scim.post('/Users', { schemas: [USER_SCHEMA], userName: `handle-${marker()}`, emails: [{ value: email, primary: true }] }))
      .toMatchObject(refusal(409, 'The account holding this email is already a user of the organization\'s directory', 'uniqueness'));
    const stopped = address('stopped');
    await q("INSERT INTO users (email, password_hash, email_verified_at, is_active) VALUES ($1, NULL, now(), 0)", [stopped]);
    expect(await scim.post('/Users', { schemas: [USER_SCHEMA], userName: stopped })).toMatchObject(refusal(400, 'The account holding this email is deactivated', 'invalidValue'));
    expect(await q('SELECT 1 FROM scim_users WHERE user_name = $1', [stopped])).toEqual([]);
  });

  it('an id no user has: 404 "User not found" to a GET, PUT, PATCH and DELETE', async () => {
    const nobody = `/Users/${randomUUID()}`;
    const notFound = refusal(404, 'User not found');
    expect(await scim.get(nobody)).toMatchObject(notFound);
    expect(await scim.put(nobody, { schemas: [USER_SCHEMA], userName: address() })).toMatchObject(notFound);
    expect(await scim.patch(nobody, deactivate)).toMatchObject(notFound);
    expect(await scim.delete(nobody)).toMatchObject(notFound);
  });

  it('a PUT renaming the userName: to another user\'s is 409, to its own in capitals is its own (stored lowercase), to a free one is done', async () => {
    const [first, second] = [address('first'), address('second')];
    await provision(first);
    const user = await provision(second);
    expect(await scim.put(`/Users/${user.id}`, { schemas: [USER_SCHEMA], userName: first }))
      .toMatchObject(refusal(409, 'Another user of the organization has this userName', 'uniqueness'));
    expect((await scim.get(`/Users/${user.id}`)).json.userName).toBe(second);
    const same = await scim.put(`/Users/${user.id}`, { schemas: [USER_SCHEMA], userName: second.toUpperCase() });
    expect([same.status, same.json.userName]).toEqual([200, second]);
    const third = address('third');
    const renamed = await scim.put(`/Users/${user.id}`, { schemas: [USER_SCHEMA], userName: third });
    expect([renamed.status, renamed.json.userName]).toEqual([200, third]);
    expect(await scim.put(`/Users/${user.id}`, { schemas: [USER_SCHEMA], userName: `y@elsewhere-${marker()}.test` })).toMatchObject(refusal(400, DOMAIN_RULE, 'invalidValue'));
  });

  it('provisioned inactive (as Okta can): the account is made, its access ended at once, no membership', async () => {
    const email = address('later');
    const user = await provision(email, { active: false });
    expect(user.active).toBe(false);
    const account = (await accountOf(email))!;
    expect(account.is_active).toBe(0);
    expect(await roleOf(account.id)).toBeUndefined();
    expect((await scim.get(`/Users/${user.id}`)).json.active).toBe(false);
    expect(await audits(account.id)).toEqual(['scim.user_deactivated']);
  });

  it('a PUT of an active user as active reactivates nothing; a DELETE of a deactivated user deactivates nothing again', async () => {
    const email = address('steady');
    const user = await provision(email);
    const account = (await accountOf(email))!;
    expect((await scim.put(`/Users/${user.id}`, { schemas: [USER_SCHEMA], userName: email, active: true })).status).toBe(200);
    expect(await audits(account.id)).toEqual([]);
    expect(await hookCount(account.id)).toBe(0);
    expect((await scim.patch(`/Users/${user.id}`, deactivate)).status).toBe(200);
    expect((await scim.delete(`/Users/${user.id}`)).status).toBe(204);
    expect(await audits(account.id)).toEqual(['scim.user_deactivated']);
    expect(await hookCount(account.id)).toBe(1);
  });

  it('a deactivation holds at once on its instance: the account\'s token is refused before any NOTIFY arrives', async () => {
    const email = address('leaver');
    const user = await provision(email);
    const account = (await accountOf(email))!;
    const password = `Pw-${randomUUID()}`;
    await q('UPDATE users SET password_hash = $2 WHERE id = $1', [account.id, await gw.services.passwords.hash(password)]);
    const login = await gw.post('/api/v1/auth/login', { email, password });
    expect(login.status, login.text).toBe(200);
    const auth = { headers: bearer(login.json.access_token as string) };
    expect((await gw.get(`/data/${marker()}`, auth)).status).toBe(200);
    held = holdNotifications(gw);
    expect((await scim.patch(`/Users/${user.id}`, deactivate)).status).toBe(200);
    expect((await gw.get(`/data/${marker()}`, auth)).status).toBe(401);
  });

  it('the SCIM user deleted (by SQL) while a PATCH waits for the account\'s lock: 404 "User not found", never a 500', async () => {
    const email = address('racer');
    const user = await provision(email);
    const account = (await accountOf(email))!;
    const answers = await answersOnceGone(org.setup.db.url, 'SELECT 1 FROM users WHERE id = $1 FOR UPDATE', account.id,
      [() => scim.patch(`/Users/${user.id}`, deactivate)], 'DELETE FROM scim_users WHERE id = $1', user.id);
    expect(answers).toMatchObject([refusal(404, 'User not found')]);
    expect((await accountOf(email))!.is_active).toBe(1);
  });

  it('the organization deleted while a create waits for its lock: 404 "Organization not found", no account made', async () => {
    const doomedOwner = await verifiedUser(gw, q);
    const doomed = await createOrg(gw, doomedOwner, 'Doomed');
    const doomedDomain = await verifiedDomain(q, doomed);
    const directory = scimClient(gw, doomed, (await newScimToken(gw, doomedOwner, doomed)).token);
    const email = `late-${randomUUID().slice(0, 8)}@${doomedDomain}`;
    const answers = await answersOnceGone(org.setup.db.url, 'SELECT 1 FROM organizations WHERE id = $1 FOR UPDATE', doomed,
      [() => directory.post('/Users', { schemas: [USER_SCHEMA], userName: email })], 'DELETE FROM organizations WHERE id = $1');
    expect(answers).toMatchObject([refusal(404, 'Organization not found')]);
    expect(await accountOf(email)).toBeUndefined();
  });

  it('the organization deleted after its token was accepted, before the create\'s transaction: 404 "Organization not found"', async () => {
    const doomedOwner = await verifiedUser(gw, q);
    const doomed = await createOrg(gw, doomedOwner, 'Doomed');
    const directory = scimClient(gw, doomed, (await newScimToken(gw, doomedOwner, doomed)).token);
    const email = `late-${randomUUID().slice(0, 8)}@${await verifiedDomain(q, doomed)}`;
    const { db } = gw.services;
    const { transaction } = db;
    // The create's own transaction (scim/provisioning.ts), not one of the instance's background
    // jobs (the outbox, the usage flush) that may open one first: that one would see the token's
    // organization deleted before the token was checked (a 401, seen once in CI).
    db.transaction = (async (work: Parameters<typeof transaction>[0]) => {
      if (!new Error().stack?.includes('provisioning')) return transaction.call(db, work);
      db.transaction = transaction;
      await q('DELETE FROM organizations WHERE id = $1', [doomed]);
      return transaction.call(db, work);
    }) as typeof transaction;
    try {
      expect(await directory.post('/Users', { schemas: [USER_SCHEMA], userName: email })).toMatchObject(refusal(404, 'Organization not found'));
    } finally {
      db.transaction = transaction;
    }
    expect(await accountOf(email)).toBeUndefined();
  });
});
