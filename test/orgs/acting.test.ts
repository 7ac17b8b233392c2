// Acting for an organization (CONTRACT §22), as clients and upstreams see it, with the routes of
// docs/organizations.md as written: Gateway-Org honoured only on routes that declare `org:`, each
// refusal byte for byte in the order of checks, the organization's plan for the plan guard and the
// quotas (a free organization counting on each member's own counter), the x-org-* headers and the
// assertion's `org`, client copies stripped, and membership changes heard on another instance
// within one second. A member of one organization cannot act for another by any header or key.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { bearer, closeSql, describeWithServices, makeUser, marker, queriesDuring, sql, startTwoGateways, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { actingConfig, createOrg, verifiedUser } from './helpers.js';

const NOT_APPLICABLE = { status: 400, json: { error: 'Requête invalide', code: 'org_not_applicable' } };
const BAD = { status: 400, json: { error: 'Requête invalide', code: 'bad_request' } };
const DENIED = { status: 403, json: { error: 'Accès à l\'organisation refusé', code: 'org_access_denied' } };
const REQUIRED = { status: 403, json: { error: 'Organisation requise', code: 'org_required' } };
const UNAUTHENTICATED = { status: 401, json: { error: 'Token invalide ou expiré', code: 'token_invalid' } };
const insufficient = (current: string) => ({ status: 403, json: { error: 'Rôle insuffisant', code: 'role_insufficient', required_roles: ['owner', 'admin'], current_role: current } });

describeWithServices('acting for an organization (CONTRACT §22)', () => {
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

  // An array is the header sent once per value.
  const acting = (user: TestUser, org: number | string | string[], headers: Record<string, string | string[]> = {}) =>
    ({ headers: { ...bearer(user.access), 'Gateway-Org': Array.isArray(org) ? org : String(org), ...headers } });
  const addMember = (org: number, user: TestUser, role: string) => sql('INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, $3)', [org, user.id, role]);

  beforeAll(async () => {
    [smtp, echo] = await Promise.all([startSmtpCatcher(), startEchoUpstream()]);
    gws = await startTwoGateways(actingConfig(smtp, echo.url));
    gw = gws[0];
    owner = await verifiedUser(gw, smtp);
    [admin, member, stranger] = [await makeUser(gw, { plan: 'premium' }), await makeUser(gw), await makeUser(gw, { plan: 'pro' })];
    orgId = await createOrg(gw, owner);
    otherOrg = await createOrg(gw, owner, 'Other');
    await addMember(orgId, admin, 'admin');
    await addMember(orgId, member, 'member');
    await sql("UPDATE organizations SET plan = 'pro' WHERE id = $1", [orgId]);
  });
  afterAll(async () => {
    await Promise.all((gws ?? []).map((g) => g.close()));
    await Promise.all([smtp?.close(), echo?.close()]);
    await closeSql();
  });

  it('an admin acting for the organization reaches a roles route; the upstream learns the organization, the user\'s own plan stays, Gateway-Org and client x-org-* are gone', async () => {
    const m = marker();
    const res = await gw.get(`/api/v1/team-reports/${m}`, acting(admin, orgId, { 'X-Org-Id': '999', 'x_org_role': 'owner', 'X-ORG-PLAN': 'enterprise' }));
    expect(res.status, res.text).toBe(200);
    const hit = echo.last(m)!;
    expect(hit.headers).toMatchObject({ 'x-user-id': String(admin.id), 'x-user-plan': 'premium', 'x-org-id': String(orgId), 'x-org-role': 'admin', 'x-org-plan': 'pro' });
    expect(Object.keys(hit.headers).filter((n) => /org/i.test(n)).sort()).toEqual(['x-org-id', 'x-org-plan', 'x-org-role']);
    const jwks = createRemoteJWKSet(new URL(`${gw.url}/.well-known/gateway-assertion-keys.json`));
    const { payload } = await jwtVerify(String(hit.headers['x-gateway-assertion']), jwks, { audience: 'app' });
    expect(payload).toMatchObject({ sub: String(admin.id), plan: 'premium', org: { id: String(orgId), role: 'admin', plan: 'pro' } });
  });

  it('not acting for one, nothing of an organization reaches the upstream, whatever the client sent', async () => {
    const m = marker();
    expect((await gw.get(`/api/v1/profile/${m}`, { headers: { ...bearer(member.access), 'X-Org-Id': String(orgId), 'X-Org-Role': 'owner' } })).status).toBe(200);
    expect(Object.keys(echo.last(m)!.headers).filter((n) => /org/i.test(n))).toEqual([]);
  });

  it('each refusal of Gateway-Org, byte for byte, and the upstream reached by none', async () => {
    const m = marker();
    const before = echo.hits.length;
    expect(await gw.get(`/api/v1/profile/${m}`, acting(member, orgId))).toMatchObject(NOT_APPLICABLE);
    expect(await gw.get(`/api/v1/feed/${m}`, { headers: { 'Gateway-Org': String(orgId) } })).toMatchObject(UNAUTHENTICATED);
    // Refused as the header reads, before any organization is looked up.
    const lookups = await queriesDuring(gw, async () => {
      for (const bad of ['', 'abc', '1.0', '-1', '+7', '0x10', '1 2']) expect(await gw.get(`/api/v1/projects/${m}`, acting(admin, bad)), JSON.stringify(bad)).toMatchObject(BAD);
    });
    expect(lookups.filter((text) => /\bFROM organizations\b/.test(text))).toEqual([]);
    expect(await gw.get(`/api/v1/projects/${m}`, acting(admin, [String(orgId), String(orgId)]))).toMatchObject(BAD);
    for (const id of [String(otherOrg), '999999999', '99999999999', '0']) expect(await gw.get(`/api/v1/projects/${m}`, acting(admin, id)), id).toMatchObject(DENIED);
    expect(await gw.get(`/api/v1/team-reports/${m}`, { headers: bearer(admin.access) })).toMatchObject(REQUIRED);
    expect(await gw.get(`/api/v1/team-reports/${m}`, acting(member, orgId))).toMatchObject(insufficient('member'));
    expect(echo.hits.length).toBe(before);
  });

  it('the checks run in the contract\'s order: route, credential, Gateway-Org, org: required, roles', async () => {
    // No credential beats a bad Gateway-Org; a bad Gateway-Org beats org: required; a non-member is refused before roles.
    expect(await gw.get('/api/v1/team-reports/x', { headers: { 'Gateway-Org': 'abc' } })).toMatchObject({ status: 401 });
    expect(await gw.get('/api/v1/team-reports/x', acting(member, 'abc'))).toMatchObject(BAD);
    expect(await gw.get('/api/v1/team-reports/x', acting(stranger, orgId))).toMatchObject(DENIED);
  });

  it('a member of one organization cannot act for another by any header or id, nor with a personal key', async () => {
    expect(await gw.get('/api/v1/team-reports/x', acting(admin, otherOrg))).toMatchObject(DENIED);
    // Sent twice, even naming an organization of the caller's: refused, never the first or the last one.
    expect(await gw.get('/api/v1/team-reports/x', acting(admin, [String(otherOrg), String(orgId)]))).toMatchObject(BAD);
    expect(await gw.get('/api/v1/team-reports/x', acting(admin, [String(orgId), String(otherOrg)]))).toMatchObject(BAD);
    const created = await gw.post('/api/v1/user/api-keys', { name: 'ci' }, { headers: bearer(stranger.access) });
    expect(created.status, created.text).toBe(201);
    await addMember(orgId, stranger, 'owner');
    try {
      expect(await gw.get('/api/v1/projects/x', { headers: { 'x-api-key': created.json.key, 'Gateway-Org': String(orgId) } })).toMatchObject(DENIED);
      expect((await gw.get('/api/v1/projects/x', { headers: { 'x-api-key': created.json.key } })).status).toBe(200);
    } finally {
      await sql('DELETE FROM memberships WHERE org_id = $1 AND user_id = $2', [orgId, stranger.id]);
    }
  });

  it('the plan guard reads the organization\'s plan: a free member passes for a pro organization, a pro user not for a free one', async () => {
    expect(await gw.get('/api/v1/exports/x', { headers: bearer(member.access) })).toMatchObject({ status: 403, json: { code: 'plan_insufficient', current_plan: 'free' } });
    expect((await gw.get('/api/v1/exports/x', acting(member, orgId))).status).toBe(200);
    await addMember(otherOrg, stranger, 'member');
    expect((await gw.get('/api/v1/exports/x', { headers: bearer(stranger.access) })).status).toBe(200);
    expect(await gw.get('/api/v1/exports/x', acting(stranger, otherOrg))).toMatchObject({ status: 403, json: { code: 'plan_insufficient', current_plan: 'free' } });
  });

  it('a free organization counts each use on the acting member\'s own counter, under the free plan\'s limits', async () => {
    const [a, b] = [await makeUser(gw, { plan: 'premium' }), await makeUser(gw, { plan: 'premium' })];
    const freeOrg = await createOrg(gw, owner, 'Free');
    await addMember(freeOrg, a, 'member');
    await addMember(freeOrg, b, 'member');
    const use = async (u: TestUser, org?: number) => (await gw.get('/api/v1/projects/x', org === undefined ? { headers: bearer(u.access) } : acting(u, org))).status;
    // free: one counted use a day (plans.freeDailyLimit), each member on their own counter.
    expect(await use(a, freeOrg)).toBe(200);
    expect(await use(a, freeOrg)).toBe(429);
    expect(await use(b, freeOrg)).toBe(200);
    // For themselves, premium counts nothing and passes.
    expect(await use(a)).toBe(200);
    expect(await sql('SELECT id, daily_usage FROM users WHERE id = ANY($1) ORDER BY id', [[a.id, b.id]])).toEqual([{ id: a.id, daily_usage: 1 }, { id: b.id, daily_usage: 1 }]);
  });

  it('a membership removed or a role lowered on one instance is heard by the other within one second', async () => {
    const other = gws[1];
    const worker = await makeUser(gw);
    await addMember(orgId, worker, 'admin');
    await expect.poll(async () => (await other.get('/api/v1/team-reports/x', acting(worker, orgId))).status, { timeout: 1000, interval: 50 }).toBe(200);
    await sql("UPDATE memberships SET role = 'member' WHERE org_id = $1 AND user_id = $2", [orgId, worker.id]);
    const lowered = Date.now();
    await expect.poll(async () => (await other.get('/api/v1/team-reports/x', acting(worker, orgId))).json?.code, { timeout: 1000, interval: 20 }).toBe('role_insufficient');
    expect(Date.now() - lowered).toBeLessThan(1000);
    await sql('DELETE FROM memberships WHERE org_id = $1 AND user_id = $2', [orgId, worker.id]);
    await expect.poll(async () => (await other.get('/api/v1/projects/x', acting(worker, orgId))).json?.code, { timeout: 1000, interval: 20 }).toBe('org_access_denied');
  });
});
