// SCIM tokens (CONTRACT §31): made by an owner with the factor guard, shown once, listed with
// last_used_at and never the token, revoked; accepted only as a Bearer under
// /scim/v2/orgs/{its organization}/ and nowhere else; kept when their creator leaves, gone with the
// organization. Every refusal under /scim/v2 is SCIM's 401, whatever was sent.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bearer, closeSql, describeWithServices, makeUser, sql, startTestGateway, testClock, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { createOrg, newScimToken, SCIM_ERROR, scimClient, scimConfig, verifiedUser } from './helpers.js';

const ROUTES = (url: string) => `upstreams:
  app:
    url: ${url}
routes:
  - path: /api/v1/reports
    upstream: app
`;

describeWithServices('SCIM tokens (CONTRACT §31)', () => {
  let smtp: SmtpCatcher;
  let upstream: EchoUpstream;
  let gw: TestGateway;
  let owner: TestUser;
  let orgId: number;
  const clock = testClock();

  beforeAll(async () => {
    [smtp, upstream] = await Promise.all([startSmtpCatcher(), startEchoUpstream()]);
    gw = await startTestGateway(scimConfig(smtp, ROUTES(upstream.url)), { clock });
    owner = await verifiedUser(gw, sql);
    orgId = await createOrg(gw, owner);
  });
  afterAll(async () => {
    await gw?.close();
    await Promise.all([smtp?.close(), upstream?.close()]);
    await closeSql();
  });

  it('an owner makes one: shown once, stored as SHA-256, listed with last_used_at once used, audited', async () => {
    const created = await gw.post(`/api/v1/orgs/${orgId}/scim/tokens`, { name: 'Okta', expires_at: '2099-01-01T00:00:00Z' }, { headers: bearer(owner.access) });
    expect(created.status, created.text).toBe(201);
    expect(created.json).toMatchObject({ name: 'Okta', expires_at: '2099-01-01T00:00:00.000Z' });
    expect(created.json.token).toMatch(/^gwscim_[\w-]{43}$/);
    const [row] = await sql<{ token_hash: string }>('SELECT token_hash FROM scim_tokens WHERE id = $1', [created.json.id]);
    expect(row!.token_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(row!.token_hash).not.toContain(created.json.token);
    let listed = await gw.get(`/api/v1/orgs/${orgId}/scim/tokens`, { headers: bearer(owner.access) });
    expect(listed.json.tokens).toContainEqual(expect.objectContaining({ id: created.json.id, name: 'Okta', last_used_at: null }));
    expect(listed.text).not.toContain(created.json.token);
    expect((await scimClient(gw, orgId, created.json.token).get('/ServiceProviderConfig')).status).toBe(200);
    listed = await gw.get(`/api/v1/orgs/${orgId}/scim/tokens`, { headers: bearer(owner.access) });
    expect(listed.json.tokens.find((t: { id: number }) => t.id === created.json.id).last_used_at).not.toBeNull();
    const audit = await sql('SELECT actor, user_id, data FROM audit_events WHERE type = $1 AND data->>\'id\' = $2', ['scim.token_created', String(created.json.id)]);
    expect(audit).toEqual([{ actor: 'user', user_id: owner.id, data: { org_id: orgId, id: created.json.id, name: 'Okta' } }]);
  });

  it('refusals of the token endpoints: a non-member 404, an admin 403 on create, a sign-in over 5 minutes old 403, a bad name or expiry 400, an unknown id 404', async () => {
    const [stranger, admin] = [await verifiedUser(gw, sql), await verifiedUser(gw, sql)];
    await sql("INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'admin')", [orgId, admin.id]);
    const create = (user: TestUser, body: unknown) => gw.post(`/api/v1/orgs/${orgId}/scim/tokens`, body, { headers: bearer(user.access) });
    expect((await create(stranger, { name: 'x' })).json).toMatchObject({ code: 'org_not_found' });
    expect((await create(admin, { name: 'x' }))).toMatchObject({ status: 403, json: { code: 'role_insufficient', required_roles: ['owner'], current_role: 'admin' } });
    expect((await create(owner, { name: '' })).status).toBe(400);
    expect((await create(owner, { name: 'a\u202eb' })).status).toBe(400);
    expect((await create(owner, { name: 'x', expires_at: '2001-01-01T00:00:00Z' })).status).toBe(400);
    expect((await create(owner, { name: 'x', expires_at: 'tomorrow' })).status).toBe(400);
    // An admin lists and revokes; an unknown or already revoked id is the catalog's 404.
    expect((await gw.get(`/api/v1/orgs/${orgId}/scim/tokens`, { headers: bearer(admin.access) })).status).toBe(200);
    for (const id of ['999999999', '9999999999']) {
      const gone = await gw.request('DELETE', `/api/v1/orgs/${orgId}/scim/tokens/${id}`, { headers: bearer(admin.access) });
      expect(gone).toMatchObject({ status: 404, json: { error: 'Jeton SCIM introuvable', code: 'scim_token_not_found' } });
    }
    expect((await gw.get('/api/v1/orgs/9999999999/scim/tokens', { headers: bearer(admin.access) })).json.code).toBe('org_not_found');
    // The factor guard: with mail configured, an owner whose email is not verified is refused; a sign-in older than 5 minutes is.
    await sql('UPDATE users SET email_verified_at = NULL WHERE id = $1', [owner.id]);
    // Forgotten here at once, as the users trigger's notification makes every instance forget it
    // within a second: the create must not read the cached, verified user (CI once got 201).
    gw.services.identities.forgetUser(owner.id);
    try {
      expect(await create(owner, { name: 'x' })).toMatchObject({ status: 403, json: { code: 'email_unverified' } });
    } finally {
      await sql('UPDATE users SET email_verified_at = now() WHERE id = $1', [owner.id]);
    }
    clock.advance(6 * 60_000);
    try {
      expect(await create(owner, { name: 'x' })).toMatchObject({ status: 403, json: { code: 'recent_auth_required' } });
    } finally {
      clock.advance(-6 * 60_000);
    }
  });

  it('accepted only as Bearer under its own organization\'s /scim/v2: another organization, a revoked token, an API key or access token there, and the token anywhere else are refused', async () => {
    const { id, token } = await newScimToken(gw, owner, orgId);
    const otherOwner = await verifiedUser(gw, sql);
    const otherOrg = await createOrg(gw, otherOwner, 'Globex');
    const scimRefusal = { status: 401, json: { schemas: [SCIM_ERROR], status: '401' } };
    // Another organization's path with this token, and its own path with no token, a personal key or an access token.
    expect(await scimClient(gw, otherOrg, token).get('/Users')).toMatchObject(scimRefusal);
    const refused = await scimClient(gw, orgId, owner.access).get('/Users');
    expect(refused).toMatchObject(scimRefusal);
    expect(refused.headers['content-type']).toMatch(/^application\/scim\+json/);
    expect(refused.headers['www-authenticate']).toBe('Bearer realm="scim"');
    expect(refused.json.detail).toBe('A SCIM token of this organization is required (Authorization: Bearer)');
    // The scheme in any case, one space or more (RFC 9110 §11.1); nothing after the token.
    const users = `/scim/v2/orgs/${orgId}/Users`;
    expect((await gw.get(users, { headers: { authorization: `bearer ${token}` } })).status).toBe(200);
    expect((await gw.get(users, { headers: { authorization: `Bearer   ${token}` } })).status).toBe(200);
    expect(await gw.get(users, { headers: { authorization: `Bearer ${token} x` } })).toMatchObject(scimRefusal);
    expect(await gw.get(users, { headers: { authorization: `Basic ${token}` } })).toMatchObject(scimRefusal);
    expect(await gw.get(users, { headers: { authorization: `XBearer ${token}` } })).toMatchObject(scimRefusal);
    expect(await gw.get(users, { headers: { authorization: token } })).toMatchObject(scimRefusal);
    const pro = await makeUser(gw, { plan: 'pro' });
    const key = await gw.post('/api/v1/user/api-keys', { name: 'k' }, { headers: bearer(pro.access) });
    expect(key.status, key.text).toBe(201);
    expect(await gw.get(`/scim/v2/orgs/${orgId}/Users`, { headers: { 'x-api-key': key.json.key } })).toMatchObject(scimRefusal);
    expect(await gw.get(`/scim/v2/orgs/${orgId}/Users`)).toMatchObject(scimRefusal);
    // An unknown path under the organization's base: 401 without the token, SCIM's 404 with it.
    expect(await gw.get(`/scim/v2/orgs/${orgId}/Bulk`)).toMatchObject(scimRefusal);
    expect(await scimClient(gw, orgId, token).get('/Bulk')).toMatchObject({ status: 404, json: { schemas: [SCIM_ERROR], status: '404' } });
    // Nowhere else: not on a route, not as an API key, not on the gateway's own endpoints.
    expect((await gw.get('/api/v1/reports', { headers: bearer(token) })).status).toBe(401);
    expect((await gw.get('/api/v1/reports', { headers: { 'x-api-key': token } })).status).toBe(401);
    expect((await gw.get('/api/v1/user/me', { headers: bearer(token) })).status).toBe(401);
    expect(upstream.hits.filter((r) => JSON.stringify(r.headers).includes(token))).toEqual([]);
    // Revoked: refused at once.
    expect((await gw.request('DELETE', `/api/v1/orgs/${orgId}/scim/tokens/${id}`, { headers: bearer(owner.access) })).status).toBe(200);
    expect(await scimClient(gw, orgId, token).get('/Users')).toMatchObject(scimRefusal);
    const [audit] = await sql('SELECT actor, data FROM audit_events WHERE type = $1 AND data->>\'id\' = $2', ['scim.token_revoked', String(id)]);
    expect(audit).toEqual({ actor: 'user', data: { org_id: orgId, id } });
  });

  it('an expired token is refused; a token outlives its creator\'s membership and goes with its organization', async () => {
    const org = await createOrg(gw, owner, 'Initech');
    const secondOwner = await verifiedUser(gw, sql);
    await sql("INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'owner')", [org, secondOwner.id]);
    const { id, token } = await newScimToken(gw, secondOwner, org);
    expect((await gw.request('DELETE', `/api/v1/orgs/${org}/members/${secondOwner.id}`, { headers: bearer(owner.access) })).status).toBe(200);
    expect((await scimClient(gw, org, token).get('/ServiceProviderConfig')).status).toBe(200);
    await sql("UPDATE scim_tokens SET expires_at = now() - interval '1 second' WHERE id = $1", [id]);
    expect((await scimClient(gw, org, token).get('/ServiceProviderConfig')).status).toBe(401);
    const other = await newScimToken(gw, owner, org);
    expect((await gw.request('DELETE', `/api/v1/orgs/${org}`, { headers: bearer(owner.access) })).status).toBe(200);
    expect(await sql('SELECT id FROM scim_tokens WHERE id = ANY($1)', [[id, other.id]])).toEqual([]);
  });

  it('a member (neither owner nor admin) can neither list nor revoke the tokens, a stranger neither: the token keeps working', async () => {
    const member: TestUser = await makeUser(gw);
    await sql("INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'member')", [orgId, member.id]);
    expect(await gw.get(`/api/v1/orgs/${orgId}/scim/tokens`, { headers: bearer(member.access) })).toMatchObject({ status: 403, json: { code: 'role_insufficient' } });
    const { id, token } = await newScimToken(gw, owner, orgId);
    const stranger = await makeUser(gw);
    const revoke = (user: TestUser) => gw.request('DELETE', `/api/v1/orgs/${orgId}/scim/tokens/${id}`, { headers: bearer(user.access) });
    expect(await revoke(member)).toMatchObject({ status: 403, json: { code: 'role_insufficient', required_roles: ['owner', 'admin'], current_role: 'member' } });
    expect(await revoke(stranger)).toMatchObject({ status: 404, json: { code: 'org_not_found' } });
    expect((await scimClient(gw, orgId, token).get('/ServiceProviderConfig')).status).toBe(200);
    expect(await sql("SELECT id FROM audit_events WHERE type = 'scim.token_revoked' AND data->>'id' = $1", [String(id)])).toEqual([]);
  });

  it('taken: a name of 64 characters (trimmed), no expiry (absent or null); refused: a name of 65 or no string, an expiry no string, no body, no organization', async () => {
    const create = (json: unknown, org: number | string = orgId) => gw.request('POST', `/api/v1/orgs/${org}/scim/tokens`, { json, headers: bearer(owner.access) });
    const longest = await create({ name: '\u00e9'.repeat(64), expires_at: null });
    expect([longest.status, longest.json.name, longest.json.expires_at]).toEqual([201, '\u00e9'.repeat(64), null]);
    expect((await create({ name: '  Okta\t' })).json).toMatchObject({ name: 'Okta', expires_at: null });
    const inTwoDays = Date.now() + 2 * 86_400_000;
    for (const body of [{ name: '\u00e9'.repeat(65) }, { name: 5 }, { name: ['Okta'] }, { name: 'Okta', expires_at: inTwoDays }, null]) {
      expect([(await create(body)).status, body]).toEqual([400, body]);
    }
    const bodiless = await gw.request('POST', `/api/v1/orgs/${orgId}/scim/tokens`, { headers: bearer(owner.access) });
    expect([bodiless.status, bodiless.json.code]).toEqual([400, 'bad_request']);
    for (const org of ['999999999', '9999999999']) expect([(await create({ name: 'Okta' }, org)).json.code, org]).toEqual(['org_not_found', org]);
  });
});
