// Organizations (CONTRACT §22): each refusal, with its status, French words and code, as a client
// sees it: who is not a member learns nothing, roles, the last owner, invitations that are not
// the caller's or no longer valid, the limits, and the guards (bearer only, a verified email,
// guard factor for the deletion).
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bearer, closeSql, describeWithServices, makeUser, sql, startTestGateway, testClock, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { createOrg, invite, join, organizationsConfig, verifiedUser } from './helpers.js';

const NOT_FOUND = { status: 404, json: { error: 'Organisation introuvable', code: 'org_not_found' } };
const BAD = { status: 400, json: { error: 'Requête invalide', code: 'bad_request' } };
const LINK = { status: 400, json: { error: 'Lien invalide ou expiré', code: 'link_invalid' } };
const OTHER_ADDRESS = { status: 403, json: { error: 'Invitation destinée à une autre adresse', code: 'invitation_other_address' } };
const ALREADY = { status: 409, json: { error: 'Déjà membre', code: 'already_member' } };
const TOO_MANY = { status: 429, json: { error: 'Trop de tentatives, réessayez plus tard', code: 'too_many_attempts' } };
const UNVERIFIED = { status: 403, json: { error: 'Adresse email non vérifiée', code: 'email_unverified' } };
const insufficient = (required: string[], current: string) => ({ status: 403, json: { error: 'Rôle insuffisant', code: 'role_insufficient', required_roles: required, current_role: current } });

describeWithServices('organizations: every refusal', () => {
  let smtp: SmtpCatcher;
  let gw: TestGateway;
  const clock = testClock();
  let owner: TestUser;
  let admin: TestUser;
  let member: TestUser;
  let stranger: TestUser;
  let orgId: number;

  const as = (user: TestUser, json?: unknown) => ({ headers: bearer(user.access), ...(json === undefined ? {} : { json }) });

  beforeAll(async () => {
    smtp = await startSmtpCatcher();
    gw = await startTestGateway(organizationsConfig(smtp), { clock });
    [owner, admin, member, stranger] = [await verifiedUser(gw, smtp), await verifiedUser(gw, smtp), await verifiedUser(gw, smtp), await verifiedUser(gw, smtp)];
    orgId = await createOrg(gw, owner);
    expect(await join(gw, admin, await invite(gw, smtp, orgId, owner, admin, 'admin'))).toBe(200);
    expect(await join(gw, member, await invite(gw, smtp, orgId, owner, member, 'member'))).toBe(200);
  });
  afterAll(async () => {
    await gw?.close();
    await smtp?.close();
    await closeSql();
  });

  it('a non-member, an unknown id and an id that is no id all get 404 Organisation introuvable, on every endpoint', async () => {
    for (const id of [String(orgId), '999999999', 'abc', '99999999999']) {
      expect(await gw.get(`/api/v1/orgs/${id}`, as(stranger)), id).toMatchObject(NOT_FOUND);
      expect(await gw.request('PATCH', `/api/v1/orgs/${id}`, as(stranger, { name: 'x' })), id).toMatchObject(NOT_FOUND);
      expect(await gw.request('DELETE', `/api/v1/orgs/${id}`, as(stranger)), id).toMatchObject(NOT_FOUND);
      expect(await gw.post(`/api/v1/orgs/${id}/invitations`, { email: stranger.email, role: 'member' }, as(stranger)), id).toMatchObject(NOT_FOUND);
      expect(await gw.get(`/api/v1/orgs/${id}/invitations`, as(stranger)), id).toMatchObject(NOT_FOUND);
      expect(await gw.request('DELETE', `/api/v1/orgs/${id}/invitations/1`, as(stranger)), id).toMatchObject(NOT_FOUND);
      expect(await gw.request('PUT', `/api/v1/orgs/${id}/members/${owner.id}`, as(stranger, { role: 'member' })), id).toMatchObject(NOT_FOUND);
      expect(await gw.request('DELETE', `/api/v1/orgs/${id}/members/${owner.id}`, as(stranger)), id).toMatchObject(NOT_FOUND);
    }
  });

  it('a member without the role gets 403 Rôle insuffisant with the roles it takes and theirs', async () => {
    const managers = insufficient(['owner', 'admin'], 'member');
    expect(await gw.request('PATCH', `/api/v1/orgs/${orgId}`, as(member, { name: 'x' }))).toMatchObject(managers);
    expect(await gw.post(`/api/v1/orgs/${orgId}/invitations`, { email: stranger.email, role: 'member' }, as(member))).toMatchObject(managers);
    expect(await gw.get(`/api/v1/orgs/${orgId}/invitations`, as(member))).toMatchObject(managers);
    expect(await gw.request('DELETE', `/api/v1/orgs/${orgId}/invitations/1`, as(member))).toMatchObject(managers);
    expect(await gw.request('PUT', `/api/v1/orgs/${orgId}/members/${admin.id}`, as(member, { role: 'member' }))).toMatchObject(managers);
    expect(await gw.request('DELETE', `/api/v1/orgs/${orgId}/members/${admin.id}`, as(member))).toMatchObject(managers);
    // Deleting takes an owner; an admin may not invite, grant or remove one.
    expect(await gw.request('DELETE', `/api/v1/orgs/${orgId}`, as(admin))).toMatchObject(insufficient(['owner'], 'admin'));
    expect(await gw.post(`/api/v1/orgs/${orgId}/invitations`, { email: stranger.email, role: 'owner' }, as(admin))).toMatchObject(insufficient(['owner'], 'admin'));
    expect(await gw.request('PUT', `/api/v1/orgs/${orgId}/members/${member.id}`, as(admin, { role: 'owner' }))).toMatchObject(insufficient(['owner'], 'admin'));
    expect(await gw.request('PUT', `/api/v1/orgs/${orgId}/members/${owner.id}`, as(admin, { role: 'member' }))).toMatchObject(insufficient(['owner'], 'admin'));
    expect(await gw.request('DELETE', `/api/v1/orgs/${orgId}/members/${owner.id}`, as(admin))).toMatchObject(insufficient(['owner'], 'admin'));
    // Nothing changed.
    expect((await gw.get(`/api/v1/orgs/${orgId}`, as(owner))).json.members.map((m: { role: string }) => m.role)).toEqual(['owner', 'admin', 'member']);
  });

  it('the last owner can be neither demoted nor removed: 409 Dernier propriétaire de l\'organisation', async () => {
    const last = { status: 409, json: { error: 'Dernier propriétaire de l\'organisation', code: 'last_owner' } };
    expect(await gw.request('PUT', `/api/v1/orgs/${orgId}/members/${owner.id}`, as(owner, { role: 'admin' }))).toMatchObject(last);
    expect(await gw.request('DELETE', `/api/v1/orgs/${orgId}/members/${owner.id}`, as(owner))).toMatchObject(last);
  });

  it('a user id that is no member\'s is 404 Membre introuvable', async () => {
    const missing = { status: 404, json: { error: 'Membre introuvable', code: 'member_not_found' } };
    expect(await gw.request('PUT', `/api/v1/orgs/${orgId}/members/${stranger.id}`, as(owner, { role: 'member' }))).toMatchObject(missing);
    expect(await gw.request('DELETE', `/api/v1/orgs/${orgId}/members/${stranger.id}`, as(owner))).toMatchObject(missing);
    expect(await gw.request('DELETE', `/api/v1/orgs/${orgId}/members/abc`, as(owner))).toMatchObject(missing);
  });

  it('a name outside its rules is 400 Nom invalide (none at all: Requête invalide), an email or role outside theirs 400 Requête invalide', async () => {
    // Every kind of name refused: test/orgs/orgNames.security.test.ts.
    const nameInvalid = { status: 400, json: { error: 'Nom invalide', code: 'org_name_invalid' } };
    for (const name of ['', 'x'.repeat(65), 'a\u202eb', 'a\u2028b', 'a\u200fb', 42, undefined]) {
      const expected = typeof name === 'string' ? nameInvalid : BAD;
      expect(await gw.post('/api/v1/orgs', name === undefined ? {} : { name }, as(owner)), JSON.stringify(name)).toMatchObject(expected);
      expect(await gw.request('PATCH', `/api/v1/orgs/${orgId}`, as(owner, { name })), JSON.stringify(name)).toMatchObject(expected);
    }
    expect((await gw.post('/api/v1/orgs', { name: 'x'.repeat(64) }, as(stranger))).status).toBe(201);
    // One character is a name; a body that is JSON's null has none.
    expect((await gw.request('PATCH', `/api/v1/orgs/${orgId}`, as(owner, { name: 'A' }))).json).toMatchObject({ name: 'A' });
    const nullBody = { headers: { ...bearer(owner.access), 'content-type': 'application/json' }, body: 'null' };
    expect(await gw.request('POST', '/api/v1/orgs', nullBody)).toMatchObject(BAD);
    expect(await gw.request('PATCH', `/api/v1/orgs/${orgId}`, nullBody)).toMatchObject(BAD);
    for (const body of [{ email: 'not-an-email', role: 'member' }, { email: 'a@b.example, c@d.example', role: 'member' }, { email: 'new@example.test', role: 'boss' }, { email: 'new@example.test' }]) {
      expect(await gw.post(`/api/v1/orgs/${orgId}/invitations`, body, as(owner)), JSON.stringify(body)).toMatchObject(BAD);
    }
    expect(await gw.request('PUT', `/api/v1/orgs/${orgId}/members/${member.id}`, as(owner, { role: 'king' }))).toMatchObject(BAD);
  });

  it('an API key alone is refused before anything else: 401 api_key_not_accepted', async () => {
    const pro = await makeUser(gw, { plan: 'pro' });
    const key = (await gw.post('/api/v1/user/api-token', {}, { headers: bearer(pro.access) })).json.api_token as string;
    const refused = { status: 401, json: { error: 'Token invalide ou expiré', code: 'api_key_not_accepted' } };
    expect(await gw.get('/api/v1/orgs', { headers: { 'x-api-key': key } })).toMatchObject(refused);
    expect(await gw.post('/api/v1/orgs', { name: 'Keyed' }, { headers: { 'x-api-key': key } })).toMatchObject(refused);
    expect(await gw.get(`/api/v1/orgs/${orgId}`, { headers: { 'x-api-key': key } })).toMatchObject(refused);
    expect(await gw.get('/api/v1/orgs')).toMatchObject({ status: 401, json: { code: 'token_missing' } });
  });

  it('creating an organization or inviting takes a verified email: 403 Adresse email non vérifiée', async () => {
    const unverified = await makeUser(gw);
    expect(await gw.post('/api/v1/orgs', { name: 'Early' }, as(unverified))).toMatchObject(UNVERIFIED);
    // A member whose email is no longer verified (changed since) cannot invite.
    const changed = await verifiedUser(gw, smtp);
    expect(await join(gw, changed, await invite(gw, smtp, orgId, owner, changed, 'admin'))).toBe(200);
    await sql('UPDATE users SET email_verified_at = NULL WHERE id = $1', [changed.id]);
    expect(await gw.post(`/api/v1/orgs/${orgId}/invitations`, { email: stranger.email, role: 'member' }, as(changed))).toMatchObject(UNVERIFIED);
  });

  it('over organizations.maxOwnedPerUser: 409 Nombre maximal d\'organisations atteint', async () => {
    const busy = await verifiedUser(gw, smtp);
    for (let i = 0; i < 3; i++) await createOrg(gw, busy, `Org ${i}`);
    expect(await gw.post('/api/v1/orgs', { name: 'One more' }, as(busy))).toMatchObject({
      status: 409, json: { error: 'Nombre maximal d\'organisations atteint', code: 'org_limit_reached' },
    });
  });

  it('an invitation is accepted only by the verified invited address, once, while valid, by a non-member', async () => {
    const guest = await verifiedUser(gw, smtp);
    const token = await invite(gw, smtp, orgId, owner, guest, 'member');
    // Another account, and the right address unverified (changed back to it since), are refused.
    expect(await gw.post('/api/v1/orgs/invitations/accept', { token }, as(stranger))).toMatchObject(OTHER_ADDRESS);
    await sql('UPDATE users SET email_verified_at = NULL WHERE id = $1', [guest.id]);
    expect(await gw.post('/api/v1/orgs/invitations/accept', { token }, as(guest))).toMatchObject(OTHER_ADDRESS);
    await sql('UPDATE users SET email_verified_at = now() WHERE id = $1', [guest.id]);
    for (const bad of [{}, { token: '' }, { token: 'nothing' }, { token: 42 }]) {
      expect(await gw.post('/api/v1/orgs/invitations/accept', bad, as(guest)), JSON.stringify(bad)).toMatchObject(LINK);
    }
    // Expired.
    await sql("UPDATE org_invitations SET expires_at = now() - interval '1 second' WHERE org_id = $1 AND email = $2", [orgId, guest.email]);
    expect(await gw.post('/api/v1/orgs/invitations/accept', { token }, as(guest))).toMatchObject(LINK);
  });

  it('an address already a member\'s cannot be invited, nor accept again: 409 Déjà membre', async () => {
    expect(await gw.post(`/api/v1/orgs/${orgId}/invitations`, { email: member.email.toUpperCase(), role: 'admin' }, as(owner))).toMatchObject(ALREADY);
    // A pending invitation to someone who became a member meanwhile (an operator added them).
    const late = await verifiedUser(gw, smtp);
    const token = await invite(gw, smtp, orgId, owner, late, 'member');
    await sql("INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'member')", [orgId, late.id]);
    expect(await gw.post('/api/v1/orgs/invitations/accept', { token }, as(late))).toMatchObject(ALREADY);
  });

  it('an invitation whose inviter is no longer an owner or admin is 400 Lien invalide ou expiré', async () => {
    const [inviter, guest] = [await verifiedUser(gw, smtp), await verifiedUser(gw, smtp)];
    expect(await join(gw, inviter, await invite(gw, smtp, orgId, owner, inviter, 'admin'))).toBe(200);
    const token = await invite(gw, smtp, orgId, inviter, guest, 'member');
    expect((await gw.request('PUT', `/api/v1/orgs/${orgId}/members/${inviter.id}`, as(owner, { role: 'member' }))).status).toBe(200);
    expect(await gw.post('/api/v1/orgs/invitations/accept', { token }, as(guest))).toMatchObject(LINK);
  });

  it('at most 20 pending invitations per organization and 50 sent per inviter in 24 hours: 429', async () => {
    const boss = await verifiedUser(gw, smtp);
    const full = await createOrg(gw, boss, 'Full');
    for (let i = 0; i < 20; i++) {
      expect((await gw.post(`/api/v1/orgs/${full}/invitations`, { email: `guest-${i}-${boss.id}@example.test`, role: 'member' }, as(boss))).status).toBe(201);
    }
    expect(await gw.post(`/api/v1/orgs/${full}/invitations`, { email: `guest-20-${boss.id}@example.test`, role: 'member' }, as(boss))).toMatchObject(TOO_MANY);
    // Replacing a pending one is not one more.
    expect((await gw.post(`/api/v1/orgs/${full}/invitations`, { email: `guest-0-${boss.id}@example.test`, role: 'admin' }, as(boss))).status).toBe(201);
    // 50 sent in the last 24 hours, to any organization: the next one to another organization is refused too.
    const other = await createOrg(gw, boss, 'Other');
    await sql(
      `INSERT INTO org_invitations (org_id, email, role, token_hash, invited_by, created_at, expires_at, cancelled_at)
       SELECT $1, 'old-' || n || '@example.test', 'member', md5(random()::text || n), $2, now() - interval '1 hour', now() + interval '1 day', now()
       FROM generate_series(1, 29) n`, [full, boss.id],
    );
    expect(await gw.post(`/api/v1/orgs/${other}/invitations`, { email: `guest-x-${boss.id}@example.test`, role: 'member' }, as(boss))).toMatchObject(TOO_MANY);
    await sql("UPDATE org_invitations SET created_at = now() - interval '25 hours' WHERE invited_by = $1 AND email LIKE 'old-%'", [boss.id]);
    expect((await gw.post(`/api/v1/orgs/${other}/invitations`, { email: `guest-x-${boss.id}@example.test`, role: 'member' }, as(boss))).status).toBe(201);
  });

  it('deleting an organization takes guard factor: a sign-in over 5 minutes old is 403 Authentification récente requise', async () => {
    const solo = await verifiedUser(gw, smtp);
    const id = await createOrg(gw, solo, 'Short-lived');
    clock.advance(6 * 60_000);
    expect(await gw.request('DELETE', `/api/v1/orgs/${id}`, as(solo))).toMatchObject({ status: 403, json: { error: 'Authentification récente requise', code: 'recent_auth_required' } });
    const again = await gw.post('/api/v1/auth/login', { email: solo.email, password: solo.password });
    expect(await gw.request('DELETE', `/api/v1/orgs/${id}`, { headers: bearer(again.json.access_token) })).toMatchObject({ status: 200 });
  });
});
