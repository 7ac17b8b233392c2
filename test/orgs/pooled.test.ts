// One pooled counter for an organization on a plan other than free (CONTRACT §22, "Whose plan and
// whose counter"), with docs/organizations.md's examples as written, on two instances: 20 requests
// at once from three members and an organization key serve exactly the pool's daily limit, the
// rest the same 429 byte for byte; the pool's minute bucket likewise; a free organization's members
// count on their own counters; an organization moved from a paid plan to free stops pooling.
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import { docsExample } from '../helpers/docs.js';
import { ADMIN_KEY, bearer, closeSql, describeWithServices, makeUser, sql, startTwoGateways, testConfigFromYaml, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { request } from '../helpers/http.js';
import { startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { createOrg, verifiedUser } from './helpers.js';

describeWithServices('pooled counters of organizations (CONTRACT §22)', () => {
  let smtp: SmtpCatcher;
  let echo: EchoUpstream;
  let gws: [TestGateway, TestGateway];
  const admins: FastifyInstance[] = [];
  const urls: string[] = [];
  const admin = (method: string, path: string, json?: unknown, at = 0) => request(urls[at]!, method, path, { headers: bearer(ADMIN_KEY), ...(json === undefined ? {} : { json }) });
  const addMember = (org: number, user: TestUser, role: string) => sql('INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, $3)', [org, user.id, role]);
  const acting = (user: TestUser, org: number) => ({ headers: { ...bearer(user.access), 'Gateway-Org': String(org) } });
  const counters = async (org: number) => (await sql('SELECT daily_usage, monthly_usage FROM organizations WHERE id = $1', [org]))[0];
  const ownUsage = async (users: TestUser[]) =>
    (await sql<{ daily_usage: number }>('SELECT daily_usage FROM users WHERE id = ANY($1) ORDER BY id', [users.map((u) => u.id)])).map((r) => r.daily_usage);

  /** An organization on `plan` (set by an operator) with its owner, an admin, a member, and an organization key. */
  async function team(plan: string): Promise<{ id: number; members: TestUser[]; key: string }> {
    const owner = await verifiedUser(gws[0], smtp);
    const id = await createOrg(gws[0], owner, `Pool ${plan}`);
    const [a, m] = [await makeUser(gws[0]), await makeUser(gws[0])];
    await addMember(id, a, 'admin');
    await addMember(id, m, 'member');
    expect((await admin('PUT', `/admin/v1/orgs/${id}/plan`, { plan })).status).toBe(200);
    const key = await gws[0].post(`/api/v1/orgs/${id}/api-keys`, { name: 'ci' }, { headers: bearer(owner.access) });
    expect(key.status, key.text).toBe(201);
    return { id, members: [owner, a, m], key: key.json.key as string };
  }

  /** 20 requests at once on both instances: the three members in turn, every fourth with the organization's key. */
  function burst(org: { id: number; members: TestUser[]; key: string }) {
    return Promise.all(Array.from({ length: 20 }, (_, i) => gws[i % 2]!.get('/api/v1/search/x',
      i % 4 === 3 ? { headers: { 'x-api-key': org.key } } : acting(org.members[i % 3]!, org.id))));
  }

  beforeAll(async () => {
    [smtp, echo] = await Promise.all([startSmtpCatcher(), startEchoUpstream()]);
    const yaml = `${docsExample('organizations', 'organizations')}${docsExample('organizations', 'organizations-pooled')}`;
    gws = await startTwoGateways(testConfigFromYaml(yaml, { SMTP_URL: smtp.url, APP_URL: echo.url }));
    for (const g of gws) {
      const app = await buildAdminApp(g.services);
      admins.push(app);
      urls.push(await app.listen({ host: '127.0.0.1', port: 0 }));
    }
  });
  afterAll(async () => {
    for (const app of admins) await app.close();
    await Promise.all((gws ?? []).map((g) => g.close()));
    await Promise.all([smtp?.close(), echo?.close()]);
    await closeSql();
  });

  it('20 requests at once on two instances, from three members and a key, against a pool of 10 a day: exactly 10 served, 10 refused byte for byte', async () => {
    const org = await team('team');
    const before = await ownUsage(org.members);
    const answers = await burst(org);
    expect(answers.filter((r) => r.status === 200)).toHaveLength(10);
    const refused = answers.filter((r) => r.status !== 200);
    expect(refused).toHaveLength(10);
    expect(new Set(refused.map((r) => `${r.status} ${r.text}`))).toEqual(new Set([
      '429 {"error":"Limite quotidienne atteinte (plan team: 10 courses/jour)","upgrade_url":"/api/v1/subscription/upgrade"}',
    ]));
    expect(await counters(org.id)).toEqual({ daily_usage: 10, monthly_usage: 10 });
    // Nothing counted on the members' own counters; acting for themselves (free: 1 a day), they still have theirs.
    expect(await ownUsage(org.members)).toEqual(before);
    expect((await gws[1].get('/api/v1/search/x', { headers: bearer(org.members[2]!.access) })).status).toBe(200);
    expect((await admin('GET', `/admin/v1/orgs/${org.id}`, undefined, 1)).json).toMatchObject({ plan: 'team', daily_usage: 10, monthly_usage: 10 });
  });

  it('the pool\'s minute bucket is one for every member and key: 20 requests at once on two instances against 5 a minute serve exactly 5', async () => {
    const org = await team('business');
    const answers = await burst(org);
    expect(answers.filter((r) => r.status === 200)).toHaveLength(5);
    const refused = answers.filter((r) => r.status !== 200);
    expect(new Set(refused.map((r) => `${r.status} ${r.text}`))).toEqual(new Set(['429 {"error":"Trop de requêtes, réessayez plus tard"}']));
    expect(refused.every((r) => Number(r.headers['retry-after']) > 0)).toBe(true);
    // business counts no uses by the day: the pool's day and month stay empty.
    expect(await counters(org.id)).toEqual({ daily_usage: 0, monthly_usage: 0 });
  });

  it('a free organization has no pool: each member counts on their own counter (1 a day), and operators see no usage', async () => {
    const id = await createOrg(gws[0], await verifiedUser(gws[0], smtp), 'Free');
    const [a, b] = [await makeUser(gws[0]), await makeUser(gws[0])];
    await addMember(id, a, 'member');
    await addMember(id, b, 'member');
    expect((await gws[0].get('/api/v1/search/x', acting(a, id))).status).toBe(200);
    expect((await gws[1].get('/api/v1/search/x', acting(a, id))).status).toBe(429);
    expect((await gws[1].get('/api/v1/search/x', acting(b, id))).status).toBe(200);
    expect(await ownUsage([a, b])).toEqual([1, 1]);
    expect(await counters(id)).toEqual({ daily_usage: 0, monthly_usage: 0 });
    expect((await admin('GET', `/admin/v1/orgs/${id}`)).json).toMatchObject({ plan: 'free', daily_usage: null, monthly_usage: null });
  });

  it('an organization moved from team to free stops pooling on every instance: its next uses count on the member\'s own counter', async () => {
    const org = await team('team');
    const member = org.members[2]!;
    expect((await gws[1].get('/api/v1/search/x', acting(member, org.id))).status).toBe(200);
    expect(await counters(org.id)).toMatchObject({ daily_usage: 1 });
    expect((await admin('PUT', `/admin/v1/orgs/${org.id}/plan`, { plan: 'free' })).status).toBe(200);
    // Once the plan reached the other instance (within a second; until then a use may still go to
    // the pool), uses land on the member's own counter: one a day on free, then refused.
    await expect.poll(async () => (await gws[1].get('/api/v1/search/x', acting(member, org.id))).status, { timeout: 2000, interval: 50 }).toBe(429);
    expect(await ownUsage([member])).toEqual([1]);
    const pooled = await counters(org.id);
    expect((await gws[1].get('/api/v1/search/x', acting(member, org.id))).status).toBe(429);
    expect((await gws[0].get('/api/v1/search/x', acting(org.members[1]!, org.id))).status).toBe(200);
    expect(await counters(org.id)).toEqual(pooled);
    expect((await admin('GET', `/admin/v1/orgs/${org.id}`)).json).toMatchObject({ plan: 'free', daily_usage: null });
  });
});
