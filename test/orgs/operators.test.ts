// Organizations as operators see them (CONTRACT §22, operators): the admin API's list, search and
// pages, an organization with its members and usage, its plan set by hand on one instance and seen
// on another, and the audit log answering for every organization event.
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import { ADMIN_KEY, bearer, closeSql, describeWithServices, everywhereWithin, marker, startTwoGateways, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { createOrg, invite, join, organizationsConfig, verifiedUser } from './helpers.js';

describeWithServices('organizations: the operators\' side', () => {
  let smtp: SmtpCatcher;
  let gw: TestGateway;
  let other: TestGateway;
  const admins: FastifyInstance[] = [];
  const urls: string[] = [];
  const admin = (method: string, path: string, json?: unknown, at = 0) => request(urls[at]!, method, path, { headers: bearer(ADMIN_KEY), ...(json === undefined ? {} : { json }) });
  const as = (user: TestUser) => ({ headers: bearer(user.access) });

  beforeAll(async () => {
    smtp = await startSmtpCatcher();
    [gw, other] = await startTwoGateways(organizationsConfig(smtp));
    for (const g of [gw, other]) {
      const app = await buildAdminApp(g.services);
      admins.push(app);
      urls.push(await app.listen({ host: '127.0.0.1', port: 0 }));
    }
  });
  afterAll(async () => {
    for (const app of admins) await app.close();
    await gw?.close();
    await other?.close();
    await smtp?.close();
    await closeSql();
  });

  it('lists organizations newest first, searched by name (any case, LIKE characters literal) or exact id, filtered by plan, in keyset pages', async () => {
    const owner = await verifiedUser(gw, smtp);
    const tag = marker();
    const a = await createOrg(gw, owner, `${tag} Alpha_1`);
    const b = await createOrg(gw, owner, `${tag} Beta`);
    const c = await createOrg(gw, owner, `${tag} Gamma%`);
    const all = await admin('GET', `/admin/v1/orgs?query=${tag.toUpperCase()}`);
    expect(all.status, all.text).toBe(200);
    expect(all.json.orgs.map((o: { id: number }) => o.id)).toEqual([c, b, a]);
    expect(all.json.orgs[0]).toEqual({ id: c, name: `${tag} Gamma%`, plan: 'free', created_at: expect.any(String), member_count: 1 });
    expect(all.json.next_cursor).toBeNull();
    expect((await admin('GET', `/admin/v1/orgs?query=${encodeURIComponent(`${tag} Alpha_`)}`)).json.orgs.map((o: { id: number }) => o.id)).toEqual([a]);
    expect((await admin('GET', `/admin/v1/orgs?query=${encodeURIComponent(`${tag} Alpha%`)}`)).json.orgs).toEqual([]);
    expect((await admin('GET', `/admin/v1/orgs?query=${b}`)).json.orgs.map((o: { id: number }) => o.id)).toContain(b);

    const first = await admin('GET', `/admin/v1/orgs?query=${tag}&limit=2`);
    expect(first.json.orgs.map((o: { id: number }) => o.id)).toEqual([c, b]);
    // One created while the operator pages does not shift the next page.
    await createOrg(gw, await verifiedUser(gw, smtp), `${tag} Delta`);
    const second = await admin('GET', `/admin/v1/orgs?query=${tag}&limit=2&cursor=${first.json.next_cursor}`);
    expect([second.json.orgs.map((o: { id: number }) => o.id), second.json.next_cursor]).toEqual([[a], null]);

    expect((await admin('PUT', `/admin/v1/orgs/${b}/plan`, { plan: 'pro' })).status).toBe(200);
    expect((await admin('GET', `/admin/v1/orgs?query=${tag}&plan=pro`)).json.orgs.map((o: { id: number }) => o.id)).toEqual([b]);
    for (const q of ['limit=0', 'limit=201', 'cursor=nonsense', 'plan=gold', 'query=a&query=b']) {
      expect(await admin('GET', `/admin/v1/orgs?${q}`), q).toMatchObject({ status: 400, json: { error: 'Paramètres de liste invalides (limit, cursor, active ou plan)' } });
    }
    // Behind the admin key like every /admin path.
    expect((await request(urls[0]!, 'GET', '/admin/v1/orgs')).status).toBe(401);
  });

  it('shows an organization with its members; usage is null on free and without a pooled counter', async () => {
    const [owner, member] = [await verifiedUser(gw, smtp), await verifiedUser(gw, smtp)];
    const id = await createOrg(gw, owner, 'Initech <script>');
    expect(await join(gw, member, await invite(gw, smtp, id, owner, member, 'member'))).toBe(200);
    const res = await admin('GET', `/admin/v1/orgs/${id}`);
    expect(res.status, res.text).toBe(200);
    expect(res.json).toEqual({
      id, name: 'Initech <script>', plan: 'free', created_at: expect.any(String), daily_usage: null, monthly_usage: null,
      members: [
        { user_id: owner.id, email: owner.email, role: 'owner', joined_at: expect.any(String) },
        { user_id: member.id, email: member.email, role: 'member', joined_at: expect.any(String) },
      ],
      // Never billed (CONTRACT §29): the default plan.
      billing: { customer_id: null, customer_url: null, subscriptions: [], plan_source: 'default', billing_plan: null, override_since: null, grace_ends_at: null },
    });
    for (const path of ['/admin/v1/orgs/999999999', '/admin/v1/orgs/abc', '/admin/v1/orgs/0']) {
      expect(await admin('GET', path), path).toMatchObject({ status: 404 });
    }
  });

  it('sets the plan from one instance: the other answers with it at once; unknown plans and organizations are refused; audited', async () => {
    const owner = await verifiedUser(gw, smtp);
    const id = await createOrg(gw, owner);
    const set = await admin('PUT', `/admin/v1/orgs/${id}/plan`, { plan: 'pro' }, 0);
    expect([set.status, set.json.plan]).toEqual([200, 'pro']);
    // Seen by the other instance, through its admin API and its members' own listing.
    await everywhereWithin([0, 1], async (i) => (await admin('GET', `/admin/v1/orgs/${id}`, undefined, i)).json.plan === 'pro', 1000);
    const [bySelf, byOther] = [await gw.get('/api/v1/orgs', as(owner)), await other.get('/api/v1/orgs', as(owner))];
    expect([bySelf.json.orgs, byOther.json.orgs]).toEqual([[expect.objectContaining({ id, plan: 'pro' })], [expect.objectContaining({ id, plan: 'pro' })]]);
    expect(await admin('PUT', `/admin/v1/orgs/${id}/plan`, { plan: 'gold' })).toMatchObject({ status: 400, json: { code: 'plan_unknown' } });
    expect(await admin('PUT', `/admin/v1/orgs/${id}/plan`, {})).toMatchObject({ status: 400, json: { code: 'plan_unknown' } });
    expect((await admin('PUT', '/admin/v1/orgs/999999999/plan', { plan: 'pro' })).status).toBe(404);
    expect((await request(urls[1]!, 'PUT', `/admin/v1/orgs/${id}/plan`, { headers: { ...bearer(ADMIN_KEY), 'x-gateway-actor': 'cli' }, json: { plan: 'free' } })).status).toBe(200);

    const events = await admin('GET', '/admin/v1/audit?type=admin.org_plan_changed&limit=200');
    const mine = events.json.events.filter((e: { data: { org_id: number } }) => e.data.org_id === id);
    expect(mine.map((e: { actor: string; user_id: null; data: unknown }) => [e.actor, e.user_id, e.data])).toEqual([
      // The shared key is admin whatever X-Gateway-Actor claims (CONTRACT §33).
      ['admin', null, { org_id: id, plan: 'free', previous: 'pro' }],
      ['admin', null, { org_id: id, plan: 'pro', previous: 'free' }],
    ]);
  });

  it('GET /api/v1/user/me lists the user\'s organizations and role in each', async () => {
    const [owner, member] = [await verifiedUser(gw, smtp), await verifiedUser(gw, smtp)];
    const id = await createOrg(gw, owner, 'Umbrella');
    expect(await join(gw, member, await invite(gw, smtp, id, owner, member, 'admin'))).toBe(200);
    expect((await gw.get('/api/v1/user/me', as(member))).json.orgs).toEqual([{ id, name: 'Umbrella', plan: 'free', role: 'admin' }]);
    expect((await gw.get('/api/v1/user/me', as(owner))).json.orgs).toEqual([{ id, name: 'Umbrella', plan: 'free', role: 'owner' }]);
    expect((await gw.get('/api/v1/user/me', as(await verifiedUser(gw, smtp)))).json.orgs).toEqual([]);
  });

  it('the audit log answers for every organization event of §22, through GET /admin/v1/audit', async () => {
    const [owner, guest, other2] = [await verifiedUser(gw, smtp), await verifiedUser(gw, smtp), await verifiedUser(gw, smtp)];
    const id = await createOrg(gw, owner);
    expect((await gw.request('PATCH', `/api/v1/orgs/${id}`, { ...as(owner), json: { name: 'Renamed' } })).status).toBe(200);
    expect(await join(gw, guest, await invite(gw, smtp, id, owner, guest, 'member'))).toBe(200);
    await invite(gw, smtp, id, owner, other2, 'member');
    const [pending] = (await gw.get(`/api/v1/orgs/${id}/invitations`, as(owner))).json.invitations as Array<{ id: number }>;
    expect((await gw.request('DELETE', `/api/v1/orgs/${id}/invitations/${pending!.id}`, as(owner))).status).toBe(200);
    expect((await gw.request('PUT', `/api/v1/orgs/${id}/members/${guest.id}`, { ...as(owner), json: { role: 'admin' } })).status).toBe(200);
    expect((await gw.request('DELETE', `/api/v1/orgs/${id}/members/${guest.id}`, as(owner))).status).toBe(200);
    expect((await admin('PUT', `/admin/v1/orgs/${id}/plan`, { plan: 'pro' })).status).toBe(200);
    expect((await gw.request('DELETE', `/api/v1/orgs/${id}`, as(owner))).status).toBe(200);
    const types = [
      'org.created', 'org.updated', 'org.deleted', 'org.invitation_sent', 'org.invitation_cancelled',
      'org.member_added', 'org.member_removed', 'org.role_changed', 'admin.org_plan_changed',
    ];
    for (const type of types) {
      const res = await admin('GET', `/admin/v1/audit?type=${type}&limit=200`);
      expect(res.status).toBe(200);
      const found = res.json.events.filter((e: { data: { org_id?: number } }) => e.data.org_id === id);
      expect(found.length, type).toBeGreaterThanOrEqual(1);
      expect(found[0].type).toBe(type);
    }
  });

  it('an account that is the last owner of an organization is not deleted until it hands it over or deletes it', async () => {
    const [owner, admin2] = [await verifiedUser(gw, smtp), await verifiedUser(gw, smtp)];
    const shared = await createOrg(gw, owner, 'Shared');
    const alone = await createOrg(gw, owner, 'Alone');
    expect(await join(gw, admin2, await invite(gw, smtp, shared, owner, admin2, 'admin'))).toBe(200);
    const refused = await gw.request('DELETE', '/api/v1/user/me', { ...as(owner), json: { password: owner.password } });
    expect([refused.status, refused.json]).toEqual([409, {
      error: 'Dernier propriétaire de l\'organisation', code: 'last_owner', orgs: [{ id: shared, name: 'Shared' }, { id: alone, name: 'Alone' }],
    }]);
    // Nothing went: the account still signs in, its organizations keep their owner.
    expect((await gw.get('/api/v1/user/me', as(owner))).json.orgs).toHaveLength(2);
    // A wrong password is still the answer to a wrong password.
    expect((await gw.request('DELETE', '/api/v1/user/me', { ...as(owner), json: { password: 'wrong-password' } })).status).toBe(401);

    expect((await gw.request('PUT', `/api/v1/orgs/${shared}/members/${admin2.id}`, { ...as(owner), json: { role: 'owner' } })).status).toBe(200);
    expect(await gw.request('DELETE', '/api/v1/user/me', { ...as(owner), json: { password: owner.password } })).toMatchObject({ status: 409, json: { orgs: [{ id: alone, name: 'Alone' }] } });
    expect((await gw.request('DELETE', `/api/v1/orgs/${alone}`, as(owner))).status).toBe(200);
    expect((await gw.request('DELETE', '/api/v1/user/me', { ...as(owner), json: { password: owner.password } })).status).toBe(200);
    const left = await admin('GET', `/admin/v1/orgs/${shared}`);
    expect(left.json.members).toEqual([{ user_id: admin2.id, email: admin2.email, role: 'owner', joined_at: expect.any(String) }]);
  });

  it('two owners deleting their accounts at once on two instances: one goes, the other is the last owner and stays', async () => {
    for (let round = 0; round < 3; round++) {
      const [a, b] = [await verifiedUser(gw, smtp), await verifiedUser(gw, smtp)];
      const id = await createOrg(gw, a, `Pair ${round}`);
      expect(await join(gw, b, await invite(gw, smtp, id, a, b, 'owner'))).toBe(200);
      const answers = await Promise.all([
        gw.request('DELETE', '/api/v1/user/me', { ...as(a), json: { password: a.password } }),
        other.request('DELETE', '/api/v1/user/me', { ...as(b), json: { password: b.password } }),
      ]);
      expect(answers.map((r) => r.status).sort()).toEqual([200, 409]);
      const owners = await admin('GET', `/admin/v1/orgs/${id}`);
      expect(owners.json.members).toEqual([expect.objectContaining({ role: 'owner' })]);
    }
  });
});
