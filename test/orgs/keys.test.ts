// Organization API keys (CONTRACT §22): section 21's key API under /api/v1/orgs/{id}/api-keys for
// owners and admins, a role never above the creator's, the key acting for its organization with
// min(key role, creator's current role) and x-user-id = its creator, refused while the creator is
// not a member, revoked (audit api_key.revoked, actor system) when the creator is removed, and no
// way to act for another organization with it.
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  bearer, closeSql, describeWithServices, holdNotifications, makeUser, marker, sql, startTestGateway, startTwoGateways, testConfig, type TestGateway, type TestUser,
} from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { actingConfig, createOrg, verifiedUser } from './helpers.js';

const INVALID = { status: 401, json: { error: 'Token invalide ou expiré', code: 'token_invalid' } };
const DENIED = { status: 403, json: { error: 'Accès à l\'organisation refusé', code: 'org_access_denied' } };
const insufficient = (required: string[], current: string) => ({ status: 403, json: { error: 'Rôle insuffisant', code: 'role_insufficient', required_roles: required, current_role: current } });

describeWithServices('organization API keys (CONTRACT §22)', () => {
  let smtp: SmtpCatcher;
  let echo: EchoUpstream;
  let gws: [TestGateway, TestGateway];
  let gw: TestGateway;
  let owner: TestUser;
  let admin: TestUser;
  let member: TestUser;
  let stranger: TestUser;
  let orgId: number;
  let otherOrg: number;

  const keysOf = (org: number) => `/api/v1/orgs/${org}/api-keys`;
  const as = (user: TestUser) => ({ headers: bearer(user.access) });
  const addMember = (org: number, user: TestUser, role: string) => sql('INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, $3)', [org, user.id, role]);
  const newKey = async (by: TestUser, body: Record<string, unknown> = {}, org = orgId) => {
    const res = await gw.post(keysOf(org), { name: 'ci', ...body }, as(by));
    expect(res.status, res.text).toBe(201);
    return res.json as { id: number; key: string; role: string; created_by: number };
  };
  const withKey = (key: string, headers: Record<string, string> = {}) => ({ headers: { 'x-api-key': key, ...headers } });

  beforeAll(async () => {
    [smtp, echo] = await Promise.all([startSmtpCatcher(), startEchoUpstream()]);
    const config = actingConfig(smtp, echo.url);
    // One route with scopes: the scopes an organization key may hold are the routes' (CONTRACT §21).
    gws = await startTwoGateways({ ...config, routes: [...config.routes, { ...config.routes[1]!, path: '/api/v1/scoped-reports', scopes: ['reports:read'] }] });
    gw = gws[0];
    owner = await verifiedUser(gw, smtp);
    [admin, member, stranger] = [await makeUser(gw), await makeUser(gw), await makeUser(gw, { plan: 'pro' })];
    orgId = await createOrg(gw, owner);
    otherOrg = await createOrg(gw, owner, 'Other');
    await addMember(orgId, admin, 'admin');
    await addMember(orgId, member, 'member');
    await sql("UPDATE organizations SET plan = 'pro' WHERE id = ANY($1)", [[orgId, otherOrg]]);
  });
  afterAll(async () => {
    await Promise.all((gws ?? []).map((g) => g.close()));
    await Promise.all([smtp?.close(), echo?.close()]);
    await closeSql();
  });

  it('owners and admins create, list and revoke keys; a member gets 403, a stranger 404; the role is member by default', async () => {
    const created = await newKey(admin);
    expect(created).toMatchObject({ name: 'ci', role: 'member', created_by: admin.id, scopes: null });
    expect(created.key).toMatch(/^gwo_/);
    const listed = await gw.get(keysOf(orgId), as(owner));
    expect(listed.status).toBe(200);
    expect(listed.json.api_keys.map((k: { id: number }) => k.id)).toContain(created.id);
    expect(JSON.stringify(listed.json)).not.toContain(created.key);
    expect(await gw.get(keysOf(orgId), as(member))).toMatchObject(insufficient(['owner', 'admin'], 'member'));
    expect(await gw.post(keysOf(orgId), { name: 'x' }, as(member))).toMatchObject(insufficient(['owner', 'admin'], 'member'));
    expect(await gw.get(keysOf(orgId), as(stranger))).toMatchObject({ status: 404, json: { error: 'Organisation introuvable', code: 'org_not_found' } });
    // An id the path's pattern takes but no organization can have (over 32 bits).
    expect(await gw.post(keysOf(9_999_999_999), { name: 'x' }, as(owner))).toMatchObject({ status: 404, json: { code: 'org_not_found' } });
    expect(await gw.request('DELETE', `${keysOf(9_999_999_999)}/1`, as(owner))).toMatchObject({ status: 404, json: { code: 'org_not_found' } });
    // Not the creator's personal keys.
    expect((await gw.get('/api/v1/user/api-keys', as(admin))).json.api_keys).toEqual([]);
    expect(await gw.request('DELETE', `${keysOf(orgId)}/${created.id}`, as(member))).toMatchObject(insufficient(['owner', 'admin'], 'member'));
    expect((await gw.get('/api/v1/projects/x', withKey(created.key))).status).toBe(200);
    // Refused at once on the instance that revoked it (its cached hash forgotten), not when the NOTIFY comes.
    const held = holdNotifications(gw);
    try {
      const revoked = await gw.request('DELETE', `${keysOf(orgId)}/${created.id}`, as(owner));
      expect([revoked.status, revoked.json]).toEqual([200, { message: 'Clé API révoquée' }]);
      expect(await gw.get('/api/v1/projects/x', withKey(created.key))).toMatchObject(INVALID);
    } finally {
      held.release();
    }
    expect(await gw.request('DELETE', `${keysOf(orgId)}/${created.id}`, as(owner))).toMatchObject({ status: 404, json: { code: 'api_key_not_found' } });
  });

  it('scopes: those of the gateway\'s routes (or *), else 400 scope_unknown; the creation audited with the client\'s address', async () => {
    expect(await gw.post(keysOf(orgId), { name: 'x', scopes: ['reports:write'] }, as(owner))).toMatchObject({ status: 400, json: { code: 'scope_unknown' } });
    const scoped = await newKey(owner, { scopes: ['reports:read'] });
    expect(scoped).toMatchObject({ scopes: ['reports:read'] });
    expect((await gw.get('/api/v1/scoped-reports/x', withKey(scoped.key))).status).toBe(200);
    expect((await gw.get('/api/v1/projects/x', withKey(scoped.key))).status).toBe(403);
    const [created] = await sql<{ ip: string | null; data: Record<string, unknown> }>(
      "SELECT ip, data FROM audit_events WHERE type = 'api_key.created' AND (data->>'id')::bigint = $1", [scoped.id]);
    expect(created).toMatchObject({ ip: '127.0.0.1', data: { id: scoped.id, org_id: orgId } });
  });

  it('a key\'s role is never above its creator\'s (403 Rôle insuffisant); a role that is none is 400', async () => {
    expect(await gw.post(keysOf(orgId), { name: 'x', role: 'owner' }, as(admin))).toMatchObject(insufficient(['owner'], 'admin'));
    expect(await gw.post(keysOf(orgId), { name: 'x', role: 'boss' }, as(admin))).toMatchObject({ status: 400, json: { code: 'bad_request' } });
    expect((await newKey(owner, { role: 'owner' })).role).toBe('owner');
  });

  it('a key acts for its organization: x-user-id its creator, the organization\'s headers, its role on roles routes', async () => {
    const strong = await newKey(admin, { role: 'admin' });
    const weak = await newKey(admin);
    const m = marker();
    expect((await gw.get(`/api/v1/team-reports/${m}`, withKey(strong.key))).status).toBe(200);
    expect(echo.last(m)!.headers).toMatchObject({
      'x-user-id': String(admin.id), 'x-user-key-id': String(strong.id), 'x-org-id': String(orgId), 'x-org-role': 'admin', 'x-org-plan': 'pro', 'x-auth-method': 'api-key',
    });
    expect(await gw.get('/api/v1/team-reports/x', withKey(weak.key))).toMatchObject(insufficient(['owner', 'admin'], 'member'));
    // An owner's key of role owner acts as owner.
    const strongest = await newKey(owner, { role: 'owner' });
    const n = marker();
    expect((await gw.get(`/api/v1/team-reports/${n}`, withKey(strongest.key))).status).toBe(200);
    expect(echo.last(n)!.headers).toMatchObject({ 'x-user-id': String(owner.id), 'x-org-id': String(orgId), 'x-org-role': 'owner' });
    // Naming its own organization is the same; another one, or a route without org:, is refused.
    expect((await gw.get('/api/v1/team-reports/x', withKey(strong.key, { 'Gateway-Org': String(orgId) }))).status).toBe(200);
    expect(await gw.get('/api/v1/team-reports/x', withKey(strong.key, { 'Gateway-Org': String(otherOrg) }))).toMatchObject(DENIED);
    expect(await gw.get('/api/v1/profile/x', withKey(strong.key))).toMatchObject({ status: 400, json: { code: 'org_not_applicable' } });
    expect(await gw.get('/api/v1/user/me', withKey(strong.key))).toMatchObject({ status: 401, json: { code: 'api_key_not_accepted' } });
  });

  it('acts with min(key role, creator\'s current role), and is refused while its creator is not a member, on the other instance within one second', async () => {
    const creator = await makeUser(gw);
    await addMember(orgId, creator, 'admin');
    const { key } = await newKeyAs(creator);
    const other = gws[1];
    expect((await other.get('/api/v1/team-reports/x', withKey(key))).status).toBe(200);
    await sql("UPDATE memberships SET role = 'member' WHERE org_id = $1 AND user_id = $2", [orgId, creator.id]);
    await expect.poll(async () => (await other.get('/api/v1/team-reports/x', withKey(key))).json?.current_role, { timeout: 1000, interval: 20 }).toBe('member');
    // Gone by hand (the endpoint would also revoke it): the key is not valid without its creator.
    await sql('DELETE FROM memberships WHERE org_id = $1 AND user_id = $2', [orgId, creator.id]);
    await expect.poll(async () => (await other.get('/api/v1/projects/x', withKey(key))).json?.code, { timeout: 1000, interval: 20 }).toBe('token_invalid');
    expect(await other.get('/api/v1/projects/x', withKey(key))).toMatchObject(INVALID);
  });

  async function newKeyAs(creator: TestUser): Promise<{ key: string }> {
    return newKey(creator, { role: 'admin' });
  }

  it('removing a member revokes the keys they made (audit api_key.revoked, actor system); a member of one organization cannot use its keys for another', async () => {
    const leaver = await makeUser(gw);
    await addMember(orgId, leaver, 'admin');
    await addMember(otherOrg, leaver, 'owner');
    const { id, key } = await newKey(leaver, { role: 'admin' });
    expect(await gw.get('/api/v1/team-reports/x', withKey(key, { 'Gateway-Org': String(otherOrg) }))).toMatchObject(DENIED);
    expect((await gw.request('DELETE', `/api/v1/orgs/${orgId}/members/${leaver.id}`, as(owner))).status).toBe(200);
    expect(await gw.get('/api/v1/team-reports/x', withKey(key))).toMatchObject(INVALID);
    expect(await sql("SELECT actor, user_id, data->>'reason' AS reason FROM audit_events WHERE type = 'api_key.revoked' AND data->>'id' = $1", [String(id)]))
      .toEqual([{ actor: 'system', user_id: leaver.id, reason: 'member_removed' }]);
  });

  it('with organizations turned off, an organization key is refused as an invalid one; a personal key still passes', async () => {
    const orgKey = await newKey(admin);
    const personal = await gw.post('/api/v1/user/api-keys', { name: 'mine' }, as(stranger));
    expect(personal.status, personal.text).toBe(201);
    const off = await startTestGateway(testConfig({ organizations: { enabled: false }, upstreams: { app: { url: echo.url } }, routes: [{ path: '/api/v1/plain', upstream: 'app' }] }));
    try {
      const m = marker();
      expect(await off.get(`/api/v1/plain/${m}`, withKey(orgKey.key))).toMatchObject({ status: 401, json: { error: INVALID.json.error } });
      expect((await off.get(`/api/v1/plain/${m}`, withKey(personal.json.key as string))).status).toBe(200);
      expect(echo.count(m)).toBe(1);
    } finally {
      await off.close();
    }
  });

  it('an organization holds apiKeys.maxPerOwner keys (10 by default), the tenth created and the eleventh refused', async () => {
    const capped = await createOrg(gw, owner, 'Capped');
    await sql("UPDATE organizations SET plan = 'pro' WHERE id = $1", [capped]);
    for (let n = 1; n <= 10; n++) await newKey(owner, { name: `k${n}` }, capped);
    expect(await gw.post(keysOf(capped), { name: 'k11' }, as(owner))).toMatchObject({ status: 409, json: { code: 'api_key_limit_reached' } });
  });
});
