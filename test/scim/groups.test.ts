// /scim/v2/orgs/{id}/Groups at its edges (src/scim/groups.ts; issue 69: its mutation room found
// them untested): a PUT (name and members replaced, roles mapped again), a PATCH that removes one
// member of two, replaces the members or renames the group (its members' roles follow the new
// name; one of members only maps only those), the group's two names changed one at a time, the
// list's filter, what each refusal tells the directory's admin (its detail), and the organization
// deleted while a change waits for its lock.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeWithServices, type TestGateway } from '../helpers/gateway.js';
import {
  answersOnceGone, createOrg, GROUP_SCHEMA, newScimToken, PATCH_OP, SCIM_ERROR, scimClient, startScimOrganization, USER_SCHEMA, verifiedUser,
  type ScimClient, type ScimOrganization, type Sql,
} from './helpers.js';

const refusal = (status: number, detail: string, scimType?: string) => ({ status, json: { schemas: [SCIM_ERROR], status: String(status), ...(scimType ? { scimType } : {}), detail } });
const patch = (...Operations: unknown[]) => ({ schemas: [PATCH_OP], Operations });
const members = (...ids: string[]) => ids.map((value) => ({ value }));

describeWithServices('SCIM Groups: replace, member changes, renames, refusals', () => {
  let org: ScimOrganization;
  let gw: TestGateway;
  let q: Sql;
  let orgId: number;
  let domain: string;
  let scim: ScimClient;

  beforeAll(async () => {
    org = await startScimOrganization();
    ({ gw, q, orgId, domain, scim } = org);
    // The connection as its PUT stores it (test/sso covers the PUT); only its roleMapping is read here.
    const settings = { enforce: false, allowJit: true, allowIdpInitiated: false, idpInitiatedUrl: null, allowSha1: false, attributes: {},
      roleMapping: { admins: 'admin', staff: 'member' }, mfaContexts: [], encryptAssertions: false };
    await q(`INSERT INTO saml_connections (id, org_id, metadata_xml, idp_entity_id, idp_sso_url, idp_certificates, want_requests_signed, settings, sp_key_encrypted, sp_certificate)
      VALUES ($1, $2, '<x/>', 'https://idp.example', 'https://idp.example/sso', '[]', false, $3, 'x', 'x')`, [`saml_${randomUUID()}`, orgId, JSON.stringify(settings)]);
  });
  afterAll(async () => {
    await org?.setup.close();
  });

  /** A provisioned user: its SCIM id and account id. */
  const user = async () => {
    const email = `u-${randomUUID().slice(0, 8)}@${domain}`;
    const created = await scim.post('/Users', { schemas: [USER_SCHEMA], userName: email });
    expect(created.status, created.text).toBe(201);
    const [account] = await q<{ id: number }>('SELECT id FROM users WHERE email = $1', [email]);
    return { scimId: created.json.id as string, accountId: account!.id };
  };
  const group = async (displayName: string, ids: string[] = [], externalId?: string) => {
    const created = await scim.post('/Groups', { schemas: [GROUP_SCHEMA], displayName, ...(externalId ? { externalId } : {}), members: members(...ids) });
    expect(created.status, created.text).toBe(201);
    return created.json.id as string;
  };
  const rolesOf = async (...accounts: Array<{ accountId: number }>) => Promise.all(accounts.map(async (a) =>
    (await q<{ role: string }>('SELECT role FROM memberships WHERE org_id = $1 AND user_id = $2', [orgId, a.accountId]))[0]?.role));
  const memberIds = async (id: string) => ((await scim.get(`/Groups/${id}`)).json.members as Array<{ value: string }>).map((m) => m.value).sort();
  const unique = (name: string) => `${name}-${randomUUID().slice(0, 6)}`;

  // roleMapping: admins → admin, staff → member; a member's role changes only when a value maps (CONTRACT §31, "Roles").
  it('a PUT replaces the members and the name: who left, who came, and the members of a renamed group are mapped again', async () => {
    const [ada, bob] = [await user(), await user()];
    const staff = await group('staff', [ada.scimId]);
    const admins = await group('admins', [ada.scimId]);
    expect(await rolesOf(ada, bob)).toEqual(['admin', 'member']);
    const replaced = await scim.put(`/Groups/${admins}`, { schemas: [GROUP_SCHEMA], displayName: 'admins', members: members(bob.scimId) });
    expect(replaced.status, replaced.text).toBe(200);
    expect(replaced.json).toMatchObject({ id: admins, displayName: 'admins', members: [{ value: bob.scimId }] });
    // Ada left the admins: her groups now map to member. Bob came.
    expect(await rolesOf(ada, bob)).toEqual(['member', 'admin']);
    expect((await scim.delete(`/Groups/${staff}`)).status).toBe(204);
    // Renamed, the same members: Bob's role follows the name alone.
    expect((await scim.put(`/Groups/${admins}`, { schemas: [GROUP_SCHEMA], displayName: 'staff', members: members(bob.scimId) })).status).toBe(200);
    expect(await rolesOf(ada, bob)).toEqual(['member', 'member']);
    expect((await scim.delete(`/Groups/${admins}`)).status).toBe(204);
  });

  it('a PATCH removes one member of two, replaces the members, and a rename alone maps its members again', async () => {
    const [ada, bob, cy] = [await user(), await user(), await user()];
    const id = await group(unique('team'), [ada.scimId, bob.scimId]);
    expect((await scim.patch(`/Groups/${id}`, patch({ op: 'remove', path: `members[value eq "${ada.scimId}"]` }))).status).toBe(200);
    expect(await memberIds(id)).toEqual([bob.scimId]);
    expect((await scim.patch(`/Groups/${id}`, patch({ op: 'replace', path: 'members', value: members(cy.scimId, ada.scimId) }))).status).toBe(200);
    expect(await memberIds(id)).toEqual([ada.scimId, cy.scimId].sort());
    expect(await rolesOf(ada, bob, cy)).toEqual(['member', 'member', 'member']);
    const renamed = await scim.patch(`/Groups/${id}`, patch({ op: 'replace', path: 'displayName', value: 'admins' }));
    expect([renamed.status, renamed.json.displayName]).toEqual([200, 'admins']);
    expect(await rolesOf(ada, bob, cy)).toEqual(['admin', 'member', 'admin']);
    expect((await scim.patch(`/Groups/${id}`, patch({ op: 'replace', path: 'displayName', value: 'staff' }))).status).toBe(200);
    expect(await rolesOf(ada, bob, cy)).toEqual(['member', 'member', 'member']);
    expect((await scim.delete(`/Groups/${id}`)).status).toBe(204);
  });

  it('displayName and externalId change one at a time: the other is kept', async () => {
    const name = unique('eng');
    const id = await group(name, [], 'ext-1');
    const externalOnly = await scim.patch(`/Groups/${id}`, patch({ op: 'replace', path: 'externalId', value: 'ext-2' }));
    expect(externalOnly.json).toMatchObject({ displayName: name, externalId: 'ext-2' });
    const renamed = unique('engineering');
    const nameOnly = await scim.patch(`/Groups/${id}`, patch({ op: 'replace', path: 'displayName', value: renamed }));
    expect(nameOnly.json).toMatchObject({ displayName: renamed, externalId: 'ext-2' });
    const cleared = await scim.patch(`/Groups/${id}`, patch({ op: 'remove', path: 'externalId' }));
    expect(cleared.json).toMatchObject({ displayName: renamed });
    expect(cleared.json.externalId).toBeUndefined();
  });

  it('the list filters by displayName; without a filter it lists every group', async () => {
    const [first, second] = [unique('alpha'), unique('beta')];
    const [a, b] = [await group(first), await group(second)];
    const filtered = await scim.get(`/Groups?filter=${encodeURIComponent(`displayName eq "${second}"`)}`);
    expect(filtered.json).toMatchObject({ totalResults: 1, Resources: [{ id: b, displayName: second }] });
    const all = await scim.get('/Groups?count=100');
    expect((all.json.Resources as Array<{ id: string }>).map((g) => g.id)).toEqual(expect.arrayContaining([a, b]));
  });

  it('each refusal tells the admin why: a taken name on create or rename, members not of the organization (five named), a group no one has', async () => {
    const taken = unique('taken');
    await group(taken);
    expect(await scim.post('/Groups', { schemas: [GROUP_SCHEMA], displayName: taken }))
      .toMatchObject(refusal(409, 'A group with this displayName exists in the organization', 'uniqueness'));
    const id = await group(unique('free'));
    expect(await scim.patch(`/Groups/${id}`, patch({ op: 'replace', path: 'displayName', value: taken })))
      .toMatchObject(refusal(409, 'Another group of the organization has this displayName', 'uniqueness'));
    const strangers = ['s1', 's2', 's3', 's4', 's5', 's6'];
    expect(await scim.post('/Groups', { schemas: [GROUP_SCHEMA], displayName: unique('x'), members: members(...strangers) }))
      .toMatchObject(refusal(400, 'Not users of this organization: s1, s2, s3, s4, s5', 'invalidValue'));
    const nobody = `/Groups/${randomUUID()}`;
    for (const res of [await scim.get(nobody), await scim.put(nobody, { schemas: [GROUP_SCHEMA], displayName: 'x' }), await scim.patch(nobody, patch()), await scim.delete(nobody)]) {
      expect(res).toMatchObject(refusal(404, 'Group not found'));
    }
  });

  it('a PATCH of members only maps only the members it adds or removes: another member\'s role set through the API stays', async () => {
    const [ada, bob] = [await user(), await user()];
    const id = await group('staff', [ada.scimId]);
    await q("UPDATE memberships SET role = 'admin' WHERE org_id = $1 AND user_id = $2", [orgId, ada.accountId]);
    expect((await scim.patch(`/Groups/${id}`, patch({ op: 'add', path: 'members', value: members(bob.scimId) }))).status).toBe(200);
    expect((await scim.patch(`/Groups/${id}`, patch({ op: 'remove', path: `members[value eq "${randomUUID()}"]` }))).status).toBe(200);
    expect(await rolesOf(ada, bob)).toEqual(['admin', 'member']);
    expect((await scim.delete(`/Groups/${id}`)).status).toBe(204);
  });

  it('the organization deleted while a group\'s create or change waits for its lock: 404 "Organization not found", never a 500', async () => {
    const doomedOwner = await verifiedUser(gw, q);
    const doomed = await createOrg(gw, doomedOwner, 'Doomed');
    const directory = scimClient(gw, doomed, (await newScimToken(gw, doomedOwner, doomed)).token);
    const created = await directory.post('/Groups', { schemas: [GROUP_SCHEMA], displayName: 'eng' });
    expect(created.status, created.text).toBe(201);
    const gone = refusal(404, 'Organization not found');
    const answers = await answersOnceGone(org.setup.db.url, 'SELECT 1 FROM organizations WHERE id = $1 FOR UPDATE', doomed, [
      () => directory.patch(`/Groups/${created.json.id}`, patch({ op: 'replace', path: 'displayName', value: 'eng2' })),
      () => directory.post('/Groups', { schemas: [GROUP_SCHEMA], displayName: 'ops' }),
    ], 'DELETE FROM organizations WHERE id = $1');
    expect(answers)      .toMatchObject([gone, gone]);
  });
});
