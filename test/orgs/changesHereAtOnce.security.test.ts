// A change that takes access away holds at once on the instance that made it, before any NOTIFY
// arrives (docs/architecture.md, "the change feed": "local changes take effect at once here").
// The other instances drop what they cached on the rows' NOTIFY, usually within a millisecond; the
// instance that answered the change must not wait for it: a client told "removed" whose next
// request, on the same instance, still passes has been lied to. Each case holds the gateway's
// notifications (holdNotifications: a loaded machine delivers them late), warms its caches with
// the credential, makes the change through the API, and asks again.
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import { request } from '../helpers/http.js';
import { ADMIN_KEY, bearer, closeSql, describeWithServices, holdNotifications, makeUser, marker, sql, startTestGateway, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { newScimToken, PATCH_OP, scimClient, USER_SCHEMA, verifiedDomain, type ScimClient } from '../scim/helpers.js';
import { connect, fragmentOf, signIn, ssoConfig } from '../sso/samlHelpers.js';
import { actingConfig, createOrg, verifiedUser } from './helpers.js';

const INVALID = { status: 401, json: { code: 'token_invalid' } };
const DENIED = { status: 403, json: { code: 'org_access_denied' } };

let held: { release(): void } | undefined;
afterEach(() => {
  held?.release();
  held = undefined;
});

describeWithServices('a change that takes access away holds at once on its instance, its NOTIFY late', () => {
  let smtp: SmtpCatcher;
  let echo: EchoUpstream;
  let gw: TestGateway;
  let owner: TestUser;
  let orgId: number;
  let adminApp: FastifyInstance;
  let adminUrl: string;

  const as = (user: TestUser) => ({ headers: bearer(user.access) });
  const acting = (user: TestUser, org = orgId) => ({ headers: { ...bearer(user.access), 'gateway-org': String(org) } });
  const withKey = (key: string) => ({ headers: { 'x-api-key': key } });
  const reports = () => `/api/v1/team-reports/${marker()}`;

  /** A new admin of `org` (or `member`, a member already) with an organization key of their own, both already seen (cached) by the gateway. */
  async function adminWithKey(org = orgId, member?: TestUser): Promise<{ user: TestUser; key: string }> {
    const user = member ?? await makeUser(gw);
    if (!member) await sql('INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, $3)', [org, user.id, 'admin']);
    const created = await gw.post(`/api/v1/orgs/${org}/api-keys`, { name: 'ci', role: 'admin' }, as(user));
    expect(created.status, created.text).toBe(201);
    const key = created.json.key as string;
    expect((await gw.get(reports(), withKey(key))).status).toBe(200);
    expect((await gw.get(reports(), acting(user, org))).status).toBe(200);
    return { user, key };
  }

  beforeAll(async () => {
    [smtp, echo] = await Promise.all([startSmtpCatcher(), startEchoUpstream()]);
    gw = await startTestGateway(actingConfig(smtp, echo.url, { sso: true }));
    owner = await verifiedUser(gw, smtp);
    orgId = await createOrg(gw, owner);
    await sql("UPDATE organizations SET plan = 'pro' WHERE id = $1", [orgId]);
    adminApp = await buildAdminApp(gw.services);
    adminUrl = await adminApp.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await adminApp?.close();
    await gw?.close();
    await Promise.all([smtp?.close(), echo?.close()]);
    await closeSql();
  });

  it('a member removed: their organization key and their acting for it are refused at once', async () => {
    const { user, key } = await adminWithKey();
    held = holdNotifications(gw);
    expect((await gw.request('DELETE', `/api/v1/orgs/${orgId}/members/${user.id}`, as(owner))).status).toBe(200);
    expect(await gw.get(reports(), withKey(key))).toMatchObject(INVALID);
    expect(await gw.get(reports(), acting(user))).toMatchObject(DENIED);
    // Back in the organization (by SQL, then any change of it here forgets its memberships): the
    // member is, the key they made stays revoked (its hash forgotten too, not only the membership).
    await sql('INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, $3)', [orgId, user.id, 'admin']);
    expect((await gw.request('PATCH', `/api/v1/orgs/${orgId}`, { ...as(owner), json: { name: 'Acme' } })).status).toBe(200);
    expect((await gw.get(reports(), acting(user))).status).toBe(200);
    expect(await gw.get(reports(), withKey(key))).toMatchObject(INVALID);
  });

  it('an admin made a member: acting where owners and admins only may go is refused at once', async () => {
    const { user } = await adminWithKey();
    held = holdNotifications(gw);
    expect((await gw.request('PUT', `/api/v1/orgs/${orgId}/members/${user.id}`, { ...as(owner), json: { role: 'member' } })).status).toBe(200);
    expect(await gw.get(reports(), acting(user))).toMatchObject({ status: 403, json: { code: 'role_insufficient', current_role: 'member' } });
  });

  it('an organization deleted: its keys and acting for it are refused at once', async () => {
    const doomed = await createOrg(gw, owner, 'Doomed');
    await sql("UPDATE organizations SET plan = 'pro' WHERE id = $1", [doomed]);
    const { key } = await adminWithKey(doomed, owner);
    held = holdNotifications(gw);
    expect((await gw.request('DELETE', `/api/v1/orgs/${doomed}`, as(owner))).status).toBe(200);
    expect(await gw.get(reports(), withKey(key))).toMatchObject(INVALID);
    expect(await gw.get(reports(), acting(owner, doomed))).toMatchObject(DENIED);
  });

  it('an account deleted while this instance still trusts its token (the NOTIFY late): creating or renaming an organization is 401 user_not_found, never a 500', async () => {
    const gone = await verifiedUser(gw, smtp);
    const theirs = await createOrg(gw, gone, 'Theirs');
    held = holdNotifications(gw);
    await sql('DELETE FROM users WHERE id = $1', [gone.id]);
    const refused = { status: 401, json: { code: 'user_not_found' } };
    expect(await gw.post('/api/v1/orgs', { name: 'Another' }, as(gone))).toMatchObject(refused);
    expect(await gw.request('PATCH', `/api/v1/orgs/${theirs}`, { ...as(gone), json: { name: 'Renamed' } })).toMatchObject(refused);
  });

  it('an operator moves an organization to the free plan: acting for it where pro is asked is refused at once', async () => {
    const downgraded = await createOrg(gw, owner, 'Downgraded');
    await sql("UPDATE organizations SET plan = 'pro' WHERE id = $1", [downgraded]);
    expect((await gw.get(`/api/v1/exports/${marker()}`, acting(owner, downgraded))).status).toBe(200);
    held = holdNotifications(gw);
    const set = await request(adminUrl, 'PUT', `/admin/v1/orgs/${downgraded}/plan`, { headers: bearer(ADMIN_KEY), json: { plan: 'free' } });
    expect(set.status, set.text).toBe(200);
    expect(await gw.get(`/api/v1/exports/${marker()}`, acting(owner, downgraded))).toMatchObject({ status: 403, json: { code: 'plan_insufficient' } });
  });

  it('a directory deprovisions a member whose account it did not make: their organization key and acting are refused at once, their own access stays', async () => {
    const domain = await verifiedDomain(sql, orgId);
    const directory: ScimClient = scimClient(gw, orgId, (await newScimToken(gw, owner, orgId)).token);
    const person = await makeUser(gw);
    const email = `own-${randomUUID().slice(0, 8)}@${domain}`;
    await sql('UPDATE users SET email = $2, email_verified_at = now() WHERE id = $1', [person.id, email]);
    const linked = await directory.post('/Users', { schemas: [USER_SCHEMA], userName: email });
    expect(linked.status, linked.text).toBe(201);
    await sql("UPDATE memberships SET role = 'admin' WHERE org_id = $1 AND user_id = $2", [orgId, person.id]);
    const created = await gw.post(`/api/v1/orgs/${orgId}/api-keys`, { name: 'ci', role: 'admin' }, as(person));
    expect(created.status, created.text).toBe(201);
    const key = created.json.key as string;
    expect((await gw.get(reports(), withKey(key))).status).toBe(200);
    expect((await gw.get(reports(), acting(person))).status).toBe(200);

    held = holdNotifications(gw);
    const off = await directory.patch(`/Users/${linked.json.id}`, { schemas: [PATCH_OP], Operations: [{ op: 'replace', value: { active: false } }] });
    expect(off.status, off.text).toBe(200);
    expect(await gw.get(reports(), withKey(key))).toMatchObject(INVALID);
    expect(await gw.get(reports(), acting(person))).toMatchObject(DENIED);
    expect((await gw.get('/api/v1/profile', as(person))).status).toBe(200);
    // Provisioned again (a member, as no group maps): acting for the organization is back, the key
    // stays revoked (its hash forgotten too, not only the membership).
    const on = await directory.patch(`/Users/${linked.json.id}`, { schemas: [PATCH_OP], Operations: [{ op: 'replace', value: { active: true } }] });
    expect(on.status, on.text).toBe(200);
    const projects = () => `/api/v1/projects/${marker()}`;
    expect((await gw.get(projects(), acting(person))).status).toBe(200);
    expect(await gw.get(projects(), withKey(key))).toMatchObject(INVALID);
  });
});

describeWithServices('a role a SAML sign-in lowers holds at once on its instance, its NOTIFY late', () => {
  let echo: EchoUpstream;
  let gw: TestGateway;

  beforeAll(async () => {
    echo = await startEchoUpstream();
    gw = await startTestGateway(ssoConfig(undefined, {}, {
      upstreams: { app: { url: echo.url } },
      routes: [{ path: '/api/v1/team-reports', upstream: 'app', roles: ['owner', 'admin'] }],
    }));
  });
  afterAll(async () => {
    await gw?.close();
    await echo?.close();
    await closeSql();
  });

  it('signed in again with only the members\' group: acting where owners and admins only may go is refused at once', async () => {
    const c = await connect(gw, { attributes: { groups: 'groups' }, roleMapping: { staff: 'member', admins: 'admin' } });
    const nameId = `pat-${randomUUID().slice(0, 8)}@${c.domain}`;
    const first = await signIn(gw, c, { nameId, attributes: { groups: ['admins'] } });
    const pair = await gw.post('/api/v1/auth/oidc/exchange', { login_code: fragmentOf(first.res.headers.location).login_code, code_verifier: first.started.verifier });
    expect(pair.status, pair.text).toBe(200);
    const asAdmin = { headers: { ...bearer(pair.json.access_token as string), 'gateway-org': String(c.orgId) } };
    expect((await gw.get(`/api/v1/team-reports/${marker()}`, asAdmin)).status).toBe(200);

    held = holdNotifications(gw);
    const again = await signIn(gw, c, { nameId, attributes: { groups: ['staff'] } });
    expect(again.res.status, again.res.text).toBe(302);
    expect(await gw.get(`/api/v1/team-reports/${marker()}`, asAdmin)).toMatchObject({ status: 403, json: { code: 'role_insufficient', current_role: 'member' } });
  });
});
