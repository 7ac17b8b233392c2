// SCIM provisioning as Okta and Entra ID send it (CONTRACT §31): their request sequences replayed
// from the vendors' documented request shapes (Okta's "SCIM 2.0 protocol reference", Microsoft's
// "Tutorial: Develop and plan provisioning for a SCIM endpoint"), then every refusal: SCIM's error
// shapes, the verified-domain rule, an account the organization did not make, the owner. Against
// two instances on a database of their own, with hooks (CONTRACT §24) written to the outbox.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bearer, describeWithServices, makeUser, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { startHookSetup, type HookSetup } from '../helpers/hookReceiver.js';
import { answersOnceGone, createOrg, GROUP_SCHEMA, newScimToken, PATCH_OP, SCIM_ERROR, scimClient, USER_SCHEMA, verifiedDomain, verifiedUser, type ScimClient, type Sql } from './helpers.js';

const LIST = 'urn:ietf:params:scim:api:messages:2.0:ListResponse';
const ENTERPRISE = 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User';

describeWithServices('SCIM provisioning, as Okta and Entra ID send it (CONTRACT §31)', () => {
  let setup: HookSetup;
  let gws: TestGateway[];
  let q: Sql;
  let owner: TestUser;
  let orgId: number;
  let domain: string;
  let tokenId: number;
  let okta: ScimClient;
  let entra: ScimClient;

  beforeAll(async () => {
    setup = await startHookSetup({ organizations: 'sso', instances: 2, config: { errors: { codes: true } } });
    gws = setup.gateways;
    q = (text, params = []) => setup.db.sql(text, params);
    owner = await verifiedUser(gws[0]!, q);
    orgId = await createOrg(gws[0]!, owner);
    domain = await verifiedDomain(q, orgId);
    const token = await newScimToken(gws[0]!, owner, orgId);
    tokenId = token.id;
    // Okta sends application/scim+json; Entra ID application/json; each on its own instance.
    okta = scimClient(gws[0]!, orgId, token.token);
    entra = scimClient(gws[1]!, orgId, token.token, 'application/json');
  });
  afterAll(async () => {
    await setup?.close();
  });

  const roleOf = async (userId: number) => (await q<{ role: string }>('SELECT role FROM memberships WHERE org_id = $1 AND user_id = $2', [orgId, userId]))[0]?.role;
  const accountOf = async (email: string) => (await q<{ id: number; is_active: number; email_verified_at: Date | null; password_hash: string | null }>(
    'SELECT id, is_active, email_verified_at, password_hash FROM users WHERE email = $1', [email]))[0];
  const audited = (userId: number, type: string) => q<{ actor: string; actor_id: number | null; data: Record<string, unknown> }>(
    'SELECT actor, actor_id, data FROM audit_events WHERE user_id = $1 AND type = $2 ORDER BY id', [userId, type]);
  const hooks = async (type: string, userId: number) => (await q<{ body: string }>('SELECT body FROM webhook_deliveries WHERE type = $1 AND subject IS NOT NULL ORDER BY seq', [type]))
    .map((r) => JSON.parse(r.body).data as Record<string, unknown>).filter((d) => d.user_id === userId);

  it('Okta: look up by userName, create, read, deactivate, reactivate, update by PUT, push a group and its members', async () => {
    const email = `ada-${randomUUID().slice(0, 8)}@${domain}`;
    const looked = await okta.get(`/Users?filter=${encodeURIComponent(`userName eq "${email}"`)}&startIndex=1&count=100`);
    expect(looked).toMatchObject({ status: 200, json: { schemas: [LIST], totalResults: 0, Resources: [] } });
    expect(looked.headers['content-type']).toMatch(/^application\/scim\+json/);
    const created = await okta.post('/Users', {
      schemas: [USER_SCHEMA], userName: email, name: { givenName: 'Ada', familyName: 'Lovelace' }, emails: [{ primary: true, value: email, type: 'work' }],
      displayName: 'Ada Lovelace', locale: 'en-US', externalId: '00u1abcd', groups: [], password: 'never-kept-1', active: true,
    });
    expect(created.status, created.text).toBe(201);
    expect(created.json).toMatchObject({ schemas: [USER_SCHEMA], userName: email, externalId: '00u1abcd', active: true, name: { givenName: 'Ada', familyName: 'Lovelace' } });
    expect(created.headers.location).toBe(`/scim/v2/orgs/${orgId}/Users/${created.json.id}`);
    const account = (await accountOf(email))!;
    expect(account).toMatchObject({ is_active: 1, password_hash: null });
    expect(account.email_verified_at).not.toBeNull();
    expect(await roleOf(account.id)).toBe('member');
    expect(await audited(account.id, 'user.registered')).toEqual([{ actor: 'scim', actor_id: tokenId, data: { via: 'scim', org_id: orgId } }]);
    const id = created.json.id as string;
    expect((await okta.get(`/Users/${id}`)).json).toMatchObject({ id, userName: email, active: true, groups: [] });
    expect((await okta.get(`/Users?filter=${encodeURIComponent(`userName eq "${email.toUpperCase()}"`)}`)).json).toMatchObject({ totalResults: 1, Resources: [{ id }] });

    // Deactivation: the SCIM user stays (active false), the membership and the account's access go.
    const off = await okta.patch(`/Users/${id}`, { schemas: [PATCH_OP], Operations: [{ op: 'replace', value: { active: false } }] });
    expect(off).toMatchObject({ status: 200, json: { id, active: false } });
    expect(await roleOf(account.id)).toBeUndefined();
    expect((await accountOf(email))!.is_active).toBe(0);
    expect((await okta.get(`/Users/${id}`)).json).toMatchObject({ active: false });
    expect(await audited(account.id, 'scim.user_deactivated')).toEqual([{ actor: 'scim', actor_id: tokenId, data: { org_id: orgId, via: 'scim', scim_id: id, account_active: false } }]);
    expect(await hooks('user.active_changed', account.id)).toEqual([{ user_id: account.id, active: false }]);
    expect(await hooks('org.member_removed', account.id)).toEqual([{ org_id: orgId, user_id: account.id }]);
    const on = await okta.patch(`/Users/${id}`, { schemas: [PATCH_OP], Operations: [{ op: 'replace', value: { active: true } }] });
    expect(on).toMatchObject({ status: 200, json: { active: true } });
    expect(await roleOf(account.id)).toBe('member');
    expect((await accountOf(email))!.is_active).toBe(1);
    expect(await audited(account.id, 'scim.user_reactivated')).toEqual([{ actor: 'scim', actor_id: tokenId, data: { org_id: orgId, via: 'scim', scim_id: id, account_active: true } }]);
    expect(await hooks('user.active_changed', account.id)).toEqual([{ user_id: account.id, active: false }, { user_id: account.id, active: true }]);

    // A profile update is a PUT of the whole user.
    const put = await okta.put(`/Users/${id}`, {
      schemas: [USER_SCHEMA], id, userName: email, name: { givenName: 'Augusta Ada', familyName: 'King' }, emails: [{ primary: true, value: email, type: 'work' }],
      active: true, externalId: '00u1abcd',
    });
    expect(put).toMatchObject({ status: 200, json: { name: { givenName: 'Augusta Ada', familyName: 'King' }, active: true } });

    // Push groups: create, find by name, rename, add and remove a member (Okta's filter form), delete.
    const group = await okta.post('/Groups', { schemas: [GROUP_SCHEMA], displayName: `Engineering ${randomUUID().slice(0, 6)}`, members: [] });
    expect(group.status, group.text).toBe(201);
    const gid = group.json.id as string;
    const byName = await okta.get(`/Groups?filter=${encodeURIComponent(`displayName eq "${group.json.displayName}"`)}&startIndex=1&count=100`);
    expect(byName.json).toMatchObject({ totalResults: 1, Resources: [{ id: gid }] });
    const renamed = await okta.patch(`/Groups/${gid}`, { schemas: [PATCH_OP], Operations: [{ op: 'replace', value: { id: gid, displayName: `${group.json.displayName} (renamed)` } }] });
    expect(renamed.json.displayName).toBe(`${group.json.displayName} (renamed)`);
    const added = await okta.patch(`/Groups/${gid}`, { schemas: [PATCH_OP], Operations: [{ op: 'add', path: 'members', value: [{ value: id, display: email }] }] });
    expect(added.json.members).toEqual([{ value: id, display: email, $ref: `/scim/v2/orgs/${orgId}/Users/${id}` }]);
    expect((await okta.get(`/Users/${id}`)).json.groups).toEqual([{ value: gid, display: renamed.json.displayName, $ref: `/scim/v2/orgs/${orgId}/Groups/${gid}` }]);
    const removed = await okta.patch(`/Groups/${gid}`, { schemas: [PATCH_OP], Operations: [{ op: 'remove', path: `members[value eq "${id}"]` }] });
    expect(removed.json.members).toEqual([]);
    expect((await okta.delete(`/Groups/${gid}`)).status).toBe(204);
    expect((await okta.get(`/Groups/${gid}`)).status).toBe(404);
  });

  it('Entra ID: create with the enterprise extension, PATCH forms with capitalised ops and "False"/"True", groups with excludedAttributes, delete', async () => {
    const email = `grace-${randomUUID().slice(0, 8)}@${domain}`;
    expect((await entra.get(`/Users?filter=${encodeURIComponent(`userName eq "${email}"`)}`)).json).toMatchObject({ totalResults: 0 });
    const created = await entra.post('/Users', {
      schemas: [USER_SCHEMA, ENTERPRISE], externalId: 'a1b2c3', userName: email, active: true, emails: [{ primary: true, type: 'work', value: email }],
      meta: { resourceType: 'User' }, name: { formatted: 'Grace Hopper', familyName: 'Hopper', givenName: 'Grace' }, roles: [], [ENTERPRISE]: { department: 'Navy' },
    });
    expect(created.status, created.text).toBe(201);
    const id = created.json.id as string;
    const userId = (await accountOf(email))!.id;
    expect((await entra.get(`/Users?filter=${encodeURIComponent('externalId eq "a1b2c3"')}`)).json).toMatchObject({ totalResults: 1, Resources: [{ id }] });
    const patched = await entra.patch(`/Users/${id}`, {
      schemas: [PATCH_OP],
      Operations: [
        { op: 'Replace', path: 'emails[type eq "work"].value', value: email },
        { op: 'Replace', path: 'name.familyName', value: 'Murray Hopper' },
        { op: 'Add', path: 'title', value: 'Rear Admiral' },
        { op: 'Replace', path: `${ENTERPRISE}:department`, value: 'Navy' },
      ],
    });
    expect(patched).toMatchObject({ status: 200, json: { name: { familyName: 'Murray Hopper', givenName: 'Grace' } } });
    expect((await entra.patch(`/Users/${id}`, { schemas: [PATCH_OP], Operations: [{ op: 'Replace', path: 'active', value: 'False' }] })).json.active).toBe(false);
    expect(await roleOf(userId)).toBeUndefined();
    expect((await entra.patch(`/Users/${id}`, { schemas: [PATCH_OP], Operations: [{ op: 'Replace', path: 'active', value: 'True' }] })).json.active).toBe(true);
    expect(await roleOf(userId)).toBe('member');

    const name = `Sales ${randomUUID().slice(0, 6)}`;
    expect((await entra.get(`/Groups?excludedAttributes=members&filter=${encodeURIComponent(`displayName eq "${name}"`)}`)).json).toMatchObject({ totalResults: 0 });
    const group = await entra.post('/Groups', { schemas: [GROUP_SCHEMA], externalId: '8aa1a0c0', displayName: name, members: [], meta: { resourceType: 'Group' } });
    expect(group.status, group.text).toBe(201);
    const gid = group.json.id as string;
    await entra.patch(`/Groups/${gid}`, { schemas: [PATCH_OP], Operations: [{ op: 'Add', path: 'members', value: [{ value: id }] }] });
    const listed = await entra.get(`/Groups?excludedAttributes=members&filter=${encodeURIComponent(`displayName eq "${name}"`)}`);
    expect(listed.json.Resources).toEqual([expect.not.objectContaining({ members: expect.anything() })]);
    expect((await entra.get(`/Groups/${gid}`)).json.members).toEqual([expect.objectContaining({ value: id })]);
    await entra.patch(`/Groups/${gid}`, { schemas: [PATCH_OP], Operations: [{ op: 'Remove', path: 'members', value: [{ value: id }] }] });
    expect((await entra.get(`/Groups/${gid}`)).json.members).toEqual([]);
    expect((await entra.patch(`/Groups/${gid}`, { schemas: [PATCH_OP], Operations: [{ op: 'Replace', path: 'displayName', value: `${name}!` }] })).json.displayName).toBe(`${name}!`);
    expect((await entra.delete(`/Groups/${gid}`)).status).toBe(204);

    // Delete: membership and SCIM user gone (a later GET is 404), the account deactivated (it belongs nowhere else).
    expect((await entra.delete(`/Users/${id}`)).status).toBe(204);
    expect((await entra.get(`/Users/${id}`)).status).toBe(404);
    expect(await roleOf(userId)).toBeUndefined();
    expect((await accountOf(email))!.is_active).toBe(0);
    expect(await hooks('org.member_removed', userId)).toHaveLength(2);
  });

  it('every refusal is SCIM\'s shape: outside the verified domains, a taken userName, a bad filter, PATCH, paging, another organization\'s user or member', async () => {
    const scimError = (status: number, scimType?: string) => ({ status, json: { schemas: [SCIM_ERROR], status: String(status), ...(scimType ? { scimType } : {}) } });
    const withDetail = (error: ReturnType<typeof scimError>, detail: string) => ({ ...error, json: { ...error.json, detail } });
    const outside = await okta.post('/Users', { schemas: [USER_SCHEMA], userName: `x-${randomUUID()}@gmail.com` });
    expect(outside).toMatchObject(scimError(400, 'invalidValue'));
    expect(outside.headers['content-type']).toMatch(/^application\/scim\+json/);
    expect(typeof outside.json.detail).toBe('string');
    expect(await okta.post('/Users', { schemas: [USER_SCHEMA], userName: 'not-an-email' })).toMatchObject(scimError(400, 'invalidValue'));
    expect(await okta.post('/Users', { schemas: [USER_SCHEMA] })).toMatchObject(scimError(400, 'invalidValue'));
    const email = `dup-${randomUUID().slice(0, 8)}@${domain}`;
    const first = await okta.post('/Users', { schemas: [USER_SCHEMA], userName: email });
    expect(first.status).toBe(201);
    expect(await okta.post('/Users', { schemas: [USER_SCHEMA], userName: email.toUpperCase() })).toMatchObject(scimError(409, 'uniqueness'));
    expect(await okta.get(`/Users?filter=${encodeURIComponent('userName co "dup"')}`)).toMatchObject(scimError(400, 'invalidFilter'));
    expect(await okta.get(`/Users?filter=${encodeURIComponent('name.givenName eq "x"')}`)).toMatchObject(scimError(400, 'invalidFilter'));
    expect(await okta.get('/Users?count=ten')).toMatchObject(scimError(400, 'invalidValue'));
    expect((await okta.get('/Users?count=1000')).json.itemsPerPage).toBeLessThanOrEqual(100);
    expect(await okta.patch(`/Users/${first.json.id}`, { schemas: [PATCH_OP], Operations: [{ op: 'move', path: 'active', value: false }] })).toMatchObject(scimError(400, 'invalidValue'));
    expect(await okta.patch(`/Users/${first.json.id}`, { schemas: [PATCH_OP], Operations: [{ op: 'add', path: 'groups', value: [] }] })).toMatchObject(scimError(400, 'mutability'));
    expect(await okta.patch(`/Users/${first.json.id}`, { Operations: 'x' })).toMatchObject(scimError(400, 'invalidSyntax'));
    expect(await okta.patch(`/Users/${first.json.id}`, { schemas: [PATCH_OP], Operations: [{ op: 'replace', path: 'emails[', value: 'x' }] })).toMatchObject(scimError(400, 'invalidPath'));
    // userName: only to an unused address of the verified domains.
    const taken = `taken-${randomUUID().slice(0, 8)}@${domain}`;
    await makeUserWithEmail(gws[0]!, taken);
    expect(await okta.patch(`/Users/${first.json.id}`, { schemas: [PATCH_OP], Operations: [{ op: 'replace', path: 'userName', value: taken }] }))
      .toMatchObject(withDetail(scimError(409, 'uniqueness'), 'Another account holds this email'));
    expect(await okta.patch(`/Users/${first.json.id}`, { schemas: [PATCH_OP], Operations: [{ op: 'replace', path: 'userName', value: `x@other-${randomUUID()}.com` }] }))
      .toMatchObject(withDetail(scimError(400, 'invalidValue'), 'userName (or the primary email) must be an email of a verified domain of the organization'));
    const moved = `moved-${randomUUID().slice(0, 8)}@${domain}`;
    expect((await okta.patch(`/Users/${first.json.id}`, { schemas: [PATCH_OP], Operations: [{ op: 'replace', path: 'userName', value: moved }] })).json.userName).toBe(moved);
    expect(await accountOf(moved)).toBeDefined();
    // Not found, and another organization's users and groups are not found either.
    expect(await okta.get('/Users/not-a-uuid')).toMatchObject(scimError(404));
    expect(await okta.get(`/Users/${randomUUID()}`)).toMatchObject(scimError(404));
    const other = await otherOrganization();
    expect(await okta.get(`/Users/${other.userScimId}`)).toMatchObject(scimError(404));
    expect(await okta.patch(`/Users/${other.userScimId}`, { schemas: [PATCH_OP], Operations: [{ op: 'replace', path: 'active', value: false }] })).toMatchObject(scimError(404));
    expect(await okta.delete(`/Users/${other.userScimId}`)).toMatchObject(scimError(404));
    expect(await okta.post('/Groups', { schemas: [GROUP_SCHEMA], displayName: `G ${randomUUID()}`, members: [{ value: other.userScimId }] })).toMatchObject(scimError(400, 'invalidValue'));
    expect((await other.client.get(`/Users/${other.userScimId}`)).json.active).toBe(true);
    expect(await okta.post('/Groups', { schemas: [GROUP_SCHEMA] })).toMatchObject(scimError(400, 'invalidValue'));
  });

  it('an account its owner made is linked, never renamed nor deactivated; an owner is neither removed nor demoted by the directory', async () => {
    // An existing account with a verified address in the domain: linked, its email kept, its password kept.
    const email = `own-${randomUUID().slice(0, 8)}@${domain}`;
    const person = await makeUserWithEmail(gws[0]!, email);
    const linked = await okta.post('/Users', { schemas: [USER_SCHEMA], userName: email });
    expect(linked.status, linked.text).toBe(201);
    expect(await okta.patch(`/Users/${linked.json.id}`, { schemas: [PATCH_OP], Operations: [{ op: 'replace', path: 'userName', value: `other-${email}` }] }))
      .toMatchObject({ status: 400, json: { scimType: 'mutability', detail: 'This account was not created by the organization: its email is its owner\'s to change' } });
    expect((await okta.patch(`/Users/${linked.json.id}`, { schemas: [PATCH_OP], Operations: [{ op: 'replace', value: { active: false } }] })).json.active).toBe(false);
    expect(await roleOf(person.id)).toBeUndefined();
    const [account] = await q<{ is_active: number; password_hash: string | null }>('SELECT is_active, password_hash FROM users WHERE id = $1', [person.id]);
    expect(account!.is_active).toBe(1);
    expect(account!.password_hash).not.toBeNull();
    expect(await audited(person.id, 'scim.user_deactivated')).toEqual([{ actor: 'scim', actor_id: tokenId, data: { org_id: orgId, via: 'scim', scim_id: linked.json.id } }]);

    // The owner (the last one), provisioned by the directory: groups never demote them, active false and DELETE are refused.
    const ownerEmail = `boss-${randomUUID().slice(0, 8)}@${domain}`;
    await q('UPDATE users SET email = $2 WHERE id = $1', [owner.id, ownerEmail]);
    const boss = await okta.post('/Users', { schemas: [USER_SCHEMA], userName: ownerEmail });
    expect(boss.status, boss.text).toBe(201);
    const group = await okta.post('/Groups', { schemas: [GROUP_SCHEMA], displayName: `Everyone ${randomUUID().slice(0, 6)}`, members: [{ value: boss.json.id }] });
    expect(group.status).toBe(201);
    expect(await roleOf(owner.id)).toBe('owner');
    for (const attempt of [
      () => okta.patch(`/Users/${boss.json.id}`, { schemas: [PATCH_OP], Operations: [{ op: 'replace', value: { active: false } }] }),
      () => okta.put(`/Users/${boss.json.id}`, { schemas: [USER_SCHEMA], userName: ownerEmail, active: false }),
      () => okta.delete(`/Users/${boss.json.id}`),
    ]) {
      const refused = await attempt();
      expect(refused).toMatchObject({ status: 409, json: { schemas: [SCIM_ERROR], status: '409' } });
      expect(refused.json.detail).toMatch(/owner/);
    }
    expect(await roleOf(owner.id)).toBe('owner');
    expect((await okta.get(`/Users/${boss.json.id}`)).json.active).toBe(true);
    // Still the owner through the API.
    expect((await gws[0]!.get(`/api/v1/orgs/${orgId}`, { headers: bearer(owner.access) })).json.members).toContainEqual(expect.objectContaining({ user_id: owner.id, role: 'owner' }));
  });

  it('groups map to roles through the organization\'s SAML connection\'s roleMapping: the highest mapped role, member when none maps', async () => {
    // The connection as its PUT stored it (test/sso covers the PUT); only its roleMapping is read here.
    const settings = { enforce: false, allowJit: true, allowIdpInitiated: false, idpInitiatedUrl: null, allowSha1: false, attributes: {},
      roleMapping: { 'Gateway Admins': 'admin', 'grp-staff': 'member' }, mfaContexts: [], encryptAssertions: false };
    await q(`INSERT INTO saml_connections (id, org_id, metadata_xml, idp_entity_id, idp_sso_url, idp_certificates, want_requests_signed, settings, sp_key_encrypted, sp_certificate)
      VALUES ($1, $2, '<x/>', 'https://idp.example', 'https://idp.example/sso', '[]', false, $3, 'x', 'x')`, [`saml_${randomUUID()}`, orgId, JSON.stringify(settings)]);
    try {
      const email = `grace-${randomUUID().slice(0, 6)}@${domain}`;
      const user = await okta.post('/Users', { schemas: [USER_SCHEMA], userName: email, active: true });
      expect(user.status).toBe(201);
      const account = (await accountOf(email))!;
      expect(await roleOf(account.id)).toBe('member');
      // A group whose externalId maps to member, then one whose name maps to admin: the highest wins.
      const staff = await okta.post('/Groups', { schemas: [GROUP_SCHEMA], displayName: 'Staff', externalId: 'grp-staff', members: [{ value: user.json.id }] });
      expect(staff.status).toBe(201);
      expect(await roleOf(account.id)).toBe('member');
      const admins = await okta.post('/Groups', { schemas: [GROUP_SCHEMA], displayName: 'Gateway Admins', members: [{ value: user.json.id }] });
      expect(admins.status).toBe(201);
      expect(await roleOf(account.id)).toBe('admin');
      expect((await audited(account.id, 'org.role_changed')).map((e) => [e.actor, e.actor_id, e.data.from, e.data.to]))
        .toEqual([['scim', tokenId, 'member', 'admin']]);
      expect(await hooks('org.role_changed', account.id)).toEqual([{ org_id: orgId, user_id: account.id, role: 'admin', previous_role: 'member' }]);
      // Out of the admins' group: no value maps to admin any more, and the staff group maps to member.
      expect((await okta.delete(`/Groups/${admins.json.id}`)).status).toBe(204);
      expect(await roleOf(account.id)).toBe('member');
    } finally {
      await q('DELETE FROM saml_connections WHERE org_id = $1', [orgId]);
    }
  });

  it('at once on two instances: one create of a userName wins (the other 409 uniqueness), and one deactivation is recorded', async () => {
    const email = `race-${randomUUID().slice(0, 8)}@${domain}`;
    const body = { schemas: [USER_SCHEMA], userName: email };
    const created = await Promise.all([okta.post('/Users', body), entra.post('/Users', body)]);
    expect(created.map((r) => r.status).sort()).toEqual([201, 409]);
    expect(created.find((r) => r.status === 409)!.json).toMatchObject({ status: '409', scimType: 'uniqueness' });
    const userId = (await accountOf(email))!.id;
    expect(await q('SELECT count(*)::int AS n FROM scim_users WHERE user_id = $1', [userId])).toEqual([{ n: 1 }]);
    expect(await audited(userId, 'user.registered')).toHaveLength(1);
    expect(await audited(userId, 'org.member_added')).toHaveLength(1);
    const id = created.find((r) => r.status === 201)!.json.id as string;
    const off = { schemas: [PATCH_OP], Operations: [{ op: 'replace', value: { active: false } }] };
    const both = await Promise.all([okta.patch(`/Users/${id}`, off), entra.patch(`/Users/${id}`, off)]);
    expect(both.map((r) => [r.status, r.json.active])).toEqual([[200, false], [200, false]]);
    expect(await audited(userId, 'scim.user_deactivated')).toHaveLength(1);
    expect(await audited(userId, 'org.member_removed')).toHaveLength(1);
  });

  it('what a deprovisioning writes, and what it leaves: the audit rows, an account an operator deactivated, one in another organization, a member removed through the API', async () => {
    const provisioned = async (tag: string) => {
      const email = `${tag}-${randomUUID().slice(0, 8)}@${domain}`;
      const created = await okta.post('/Users', { schemas: [USER_SCHEMA], userName: email });
      expect(created.status, created.text).toBe(201);
      return { scimId: created.json.id as string, userId: (await accountOf(email))!.id };
    };
    const active = (value: boolean) => ({ schemas: [PATCH_OP], Operations: [{ op: 'replace', value: { active: value } }] });
    const isActive = async (userId: number) => (await q<{ is_active: number }>('SELECT is_active FROM users WHERE id = $1', [userId]))[0]!.is_active;

    // Deleted with an organization key of theirs: the removal counts it, the deactivation says deleted.
    const leaver = await provisioned('leaver');
    await q("INSERT INTO api_tokens (user_id, org_id, role, token_hash, start, name) VALUES ($1, $2, 'member', $3, 'gwo_x', 'ci')", [leaver.userId, orgId, randomUUID()]);
    expect((await okta.delete(`/Users/${leaver.scimId}`)).status).toBe(204);
    expect(await audited(leaver.userId, 'org.member_removed')).toEqual([
      { actor: 'scim', actor_id: tokenId, data: { org_id: orgId, via: 'scim', member_id: leaver.userId, keys_revoked: 1 } },
    ]);
    expect(await audited(leaver.userId, 'scim.user_deactivated')).toEqual([
      { actor: 'scim', actor_id: tokenId, data: { org_id: orgId, via: 'scim', scim_id: leaver.scimId, deleted: true, account_active: false } },
    ]);

    // An account an operator deactivated stays so through the directory's active false and true;
    // the membership comes back, recorded as the directory's.
    const held = await provisioned('held');
    await q('UPDATE users SET is_active = 0 WHERE id = $1', [held.userId]);
    expect((await okta.patch(`/Users/${held.scimId}`, active(false))).status).toBe(200);
    expect((await okta.patch(`/Users/${held.scimId}`, active(true))).status).toBe(200);
    expect(await isActive(held.userId)).toBe(0);
    expect((await audited(held.userId, 'scim.user_deactivated')).map((e) => e.data)).toEqual([{ org_id: orgId, via: 'scim', scim_id: held.scimId }]);
    expect((await audited(held.userId, 'scim.user_reactivated')).map((e) => e.data)).toEqual([{ org_id: orgId, via: 'scim', scim_id: held.scimId }]);
    expect((await audited(held.userId, 'org.member_added')).map((e) => [e.actor, e.actor_id])).toEqual([['scim', tokenId], ['scim', tokenId]]);

    // Deactivated by the directory, turned on by an operator meanwhile: the directory's active true
    // reactivates nothing, and says so.
    const back = await provisioned('back');
    expect((await okta.patch(`/Users/${back.scimId}`, active(false))).status).toBe(200);
    await q('UPDATE users SET is_active = 1 WHERE id = $1', [back.userId]);
    expect((await okta.patch(`/Users/${back.scimId}`, active(true))).status).toBe(200);
    expect((await audited(back.userId, 'scim.user_reactivated')).map((e) => e.data)).toEqual([{ org_id: orgId, via: 'scim', scim_id: back.scimId }]);

    // A member of another organization too: out of this one, the account stays active.
    const shared = await provisioned('shared');
    await q("INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'member')", [await createOrg(gws[0]!, owner, 'Elsewhere'), shared.userId]);
    expect((await okta.patch(`/Users/${shared.scimId}`, active(false))).status).toBe(200);
    expect(await isActive(shared.userId)).toBe(1);

    // Removed by an owner through the API first: the directory removes no membership, and a group
    // of theirs does not bring one back.
    const gone = await provisioned('gone');
    expect((await gws[0]!.request('DELETE', `/api/v1/orgs/${orgId}/members/${gone.userId}`, { headers: bearer(owner.access) })).status).toBe(200);
    const group = await okta.post('/Groups', { schemas: [GROUP_SCHEMA], displayName: `Gone ${randomUUID().slice(0, 6)}`, members: [{ value: gone.scimId }] });
    expect(group.status, group.text).toBe(201);
    expect(await roleOf(gone.userId)).toBeUndefined();
    expect((await okta.patch(`/Users/${gone.scimId}`, active(false))).status).toBe(200);
    // (the owner's removal is recorded under the owner, member_id naming them)
    expect(await audited(gone.userId, 'org.member_removed')).toEqual([]);
  });

  it('the account or the organization deleted while a change waits for its lock: 404 in SCIM\'s shape, never a 500', async () => {
    const off = { schemas: [PATCH_OP], Operations: [{ op: 'replace', value: { active: false } }] };
    const notFound = (detail: string) => ({ status: 404, json: { schemas: [SCIM_ERROR], status: '404', detail } });
    const email = `racer-${randomUUID().slice(0, 8)}@${domain}`;
    const created = await okta.post('/Users', { schemas: [USER_SCHEMA], userName: email });
    expect(created.status, created.text).toBe(201);
    const userId = (await accountOf(email))!.id;
    const db = setup.db.url;
    expect(await answersOnceGone(db, 'SELECT 1 FROM users WHERE id = $1 FOR UPDATE', userId, [() => okta.patch(`/Users/${created.json.id}`, off)], 'DELETE FROM users WHERE id = $1'))
      .toMatchObject([notFound('User not found')]);

    const doomedOwner = await verifiedUser(gws[0]!, q);
    const doomed = await createOrg(gws[0]!, doomedOwner, 'Doomed');
    const doomedDomain = await verifiedDomain(q, doomed);
    const directory = scimClient(gws[0]!, doomed, (await newScimToken(gws[0]!, doomedOwner, doomed)).token);
    const member = await directory.post('/Users', { schemas: [USER_SCHEMA], userName: `m-${randomUUID().slice(0, 8)}@${doomedDomain}` });
    expect(member.status, member.text).toBe(201);
    const lockOrg = 'SELECT 1 FROM organizations WHERE id = $1 FOR UPDATE';
    expect(await answersOnceGone(db, lockOrg, doomed, [() => directory.patch(`/Users/${member.json.id}`, off)], 'DELETE FROM organizations WHERE id = $1'))
      .toMatchObject([notFound('Organization not found')]);
  });

  /** A registered account with this email, verified (the owner proved the address). */
  async function makeUserWithEmail(gw: TestGateway, email: string): Promise<TestUser> {
    const user = await makeUser(gw);
    await q('UPDATE users SET email = $2, email_verified_at = now() WHERE id = $1', [user.id, email]);
    return user;
  }

  /** Another organization with its own domain, token and one SCIM user. */
  async function otherOrganization(): Promise<{ client: ScimClient; userScimId: string }> {
    const otherOwner = await verifiedUser(gws[0]!, q);
    const other = await createOrg(gws[0]!, otherOwner, 'Globex');
    const otherDomain = await verifiedDomain(q, other);
    const client = scimClient(gws[0]!, other, (await newScimToken(gws[0]!, otherOwner, other)).token);
    const user = await client.post('/Users', { schemas: [USER_SCHEMA], userName: `hank-${randomUUID().slice(0, 8)}@${otherDomain}` });
    return { client, userScimId: user.json.id };
  }
});
