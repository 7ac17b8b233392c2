// Acting for an organization on the decisions listener (CONTRACT §22, §33): a decision request
// carrying the client's own x-org-* is refused (a proxy configured before organizations would let
// it through), X-Gateway-Org-Aware is retired and ignored, every 200 carries x-org-id, -role and
// -plan (empty when not acting for one), and Gateway-Org is read as on the proxy, never answered.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bearer, closeSql, describeWithServices, makeUser, sql, startDecidingGateway, type TestGateway, type TestUser } from '../helpers/gateway.js';

const MAIL = { smtp: '', from: 'x', resetUrl: 'https://a.example/r?token={token}', verifyUrl: 'https://a.example/v?token={token}', invitationUrl: 'https://a.example/j?token={token}' };
const ORG_HEADERS = ['x-org-id', 'x-org-role', 'x-org-plan'];

describeWithServices('decisions acting for an organization', () => {
  let gw: TestGateway;
  let member: TestUser;
  let orgId: number;

  beforeAll(async () => {
    gw = await startDecidingGateway({
      organizations: { enabled: true },
      mail: MAIL,
      errors: { codes: true },
      routes: [
        { path: '/team', roles: ['owner', 'admin'] },
        { path: '/plain' },
      ],
    });
    member = await makeUser(gw);
    orgId = (await sql<{ id: number }>("INSERT INTO organizations (name, plan) VALUES ('Acme', 'pro') RETURNING id"))[0]!.id;
    await sql("INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'admin')", [orgId, member.id]);
  });
  afterAll(async () => {
    await gw?.close();
    await closeSql();
  });

  const decide = (uri: string, headers: Record<string, string> = {}) => gw.decide('GET', '/decisions', { headers: { 'X-Forwarded-Uri': uri, ...headers } });
  const orgHeadersOf = (headers: Record<string, unknown>) => Object.fromEntries(ORG_HEADERS.map((n) => [n, headers[n]]));

  it('ignores X-Gateway-Org-Aware, retired: the answer is the same with it, without it, or with any value', async () => {
    for (const aware of [{}, { 'X-Gateway-Org-Aware': '1' }, { 'X-Gateway-Org-Aware': '0' }] as Array<Record<string, string>>) {
      const res = await decide('/team/x', { ...bearer(member.access), ...aware, 'Gateway-Org': String(orgId) });
      expect(res.status, JSON.stringify(aware)).toBe(200);
      expect(orgHeadersOf(res.headers)).toEqual({ 'x-org-id': String(orgId), 'x-org-role': 'admin', 'x-org-plan': 'pro' });
    }
  });

  it('refuses a decision request carrying the client\'s own x-org-*, even with a genuine Gateway-Org (code bad_request)', async () => {
    for (const forged of [{ 'X-Org-Id': String(orgId) }, { 'X-Org-Role': 'owner' }, { 'x-org-plan': 'pro' }, { 'X_Org_Id': '31' }] as Array<Record<string, string>>) {
      for (const acting of [{}, { 'Gateway-Org': String(orgId) }] as Array<Record<string, string>>) {
        const res = await decide(Object.keys(acting).length ? '/team/x' : '/plain/x', { ...bearer(member.access), ...acting, ...forged });
        expect(res.status, JSON.stringify(forged)).toBe(400);
        expect(res.json).toEqual({ error: 'Requête invalide', code: 'bad_request' });
      }
    }
  });

  it('answers the three x-org headers on every 200: empty when not acting, the organization\'s when acting; never Gateway-Org', async () => {
    const plain = await decide('/plain/x', bearer(member.access));
    expect(plain.status).toBe(200);
    expect(orgHeadersOf(plain.headers)).toEqual({ 'x-org-id': '', 'x-org-role': '', 'x-org-plan': '' });
    const acting = await decide('/team/x', { ...bearer(member.access), 'Gateway-Org': String(orgId) });
    expect(acting.status, acting.text).toBe(200);
    expect(orgHeadersOf(acting.headers)).toEqual({ 'x-org-id': String(orgId), 'x-org-role': 'admin', 'x-org-plan': 'pro' });
    expect(acting.headers['x-user-plan']).toBe('free');
    expect(acting.headers['gateway-org']).toBeUndefined();
  });

  it('refuses Gateway-Org on a decision for a route without org: and requires it where roles are set', async () => {
    const res = await decide('/plain/x', { ...bearer(member.access), 'Gateway-Org': String(orgId) });
    expect(res.status).toBe(400);
    expect(res.json).toEqual({ error: 'Requête invalide', code: 'org_not_applicable' });
    const missing = await decide('/team/x', { ...bearer(member.access) });
    expect(missing.status).toBe(403);
    expect(missing.json).toEqual({ error: 'Organisation requise', code: 'org_required' });
  });
});
