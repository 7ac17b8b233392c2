// CONTRACT §24: GET /admin/v1/overview, the console's overview: 30 UTC days of API-key requests,
// denials and counted uses per plan per day, the top users and organizations, the plan mix. The
// database is shared with other test files: the plans here are this run's own, so their series are exact.
import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import { ADMIN_KEY, bearer, closeSql, describeWithServices, makeUser, sql, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';

const tag = randomBytes(4).toString('hex');
const PLAN = `ov${tag}`;
const ORG_PLAN = `og${tag}`;
const GONE = `gone${tag}`;
const day = (back: number) => new Date(Date.now() - back * 86_400_000).toISOString().slice(0, 10);

describeWithServices('admin: the overview across users and plans', () => {
  let gw: TestGateway;
  let adminApp: FastifyInstance;
  const ids: Record<string, number> = {};

  beforeAll(async () => {
    gw = await startTestGateway(testConfig({ plans: { limits: { [PLAN]: { daily: 100 }, [ORG_PLAN]: { daily: 100 } } } }));
    adminApp = await buildAdminApp(gw.services);
    for (const name of ['heavy', 'light', 'retired']) ids[name] = (await makeUser(gw)).id;
    await sql('UPDATE users SET plan = $2 WHERE id = ANY($1)', [[ids.heavy, ids.light], PLAN]);
    await sql('UPDATE users SET plan = $2 WHERE id = $1', [ids.retired, GONE]);
    // Finished days in the rollup; today's count on the users row, which is the authority for its
    // day (the rollup's row for today, left by a day moved back by hand, is not counted twice).
    await sql(`INSERT INTO usage_days (user_id, day, uses) VALUES ($1, $3, 7), ($1, $4, 2000000000), ($1, $5, 99), ($2, $3, 1), ($6, $3, 4)`,
      [ids.heavy, ids.light, day(3), day(2), day(0), ids.retired]);
    await sql('UPDATE users SET daily_usage = 5, last_usage_date = $2 WHERE id = $1', [ids.heavy, day(0)]);
    const [org] = await sql<{ id: number }>('INSERT INTO organizations (name, plan) VALUES ($1, $2) RETURNING id', [`Org ${tag}`, ORG_PLAN]);
    ids.org = org!.id;
    // The organization's pooled counter (035): a finished day rolled up, and today's on its row.
    await sql('INSERT INTO org_usage_days (org_id, day, uses) VALUES ($1, $2, 3)', [ids.org, day(2)]);
    await sql('UPDATE organizations SET daily_usage = 6, last_usage_date = $2 WHERE id = $1', [ids.org, day(0)]);
    const [own] = await sql<{ id: number }>('INSERT INTO api_tokens (user_id, token_hash) VALUES ($1, $2) RETURNING id', [ids.heavy, `h-${tag}-1`]);
    const [orgKey] = await sql<{ id: number }>("INSERT INTO api_tokens (user_id, token_hash, org_id, role) VALUES ($1, $2, $3, 'admin') RETURNING id", [ids.light, `h-${tag}-2`, ids.org]);
    await sql('INSERT INTO api_key_usage (key_id, day, requests, denied) VALUES ($1, $3, 10, 3), ($2, $4, 1000000000000000, 2)', [own!.id, orgKey!.id, day(1), day(0)]);
  });
  afterAll(async () => {
    await sql('DELETE FROM organizations WHERE id = $1', [ids.org]);
    await adminApp?.close();
    await gw?.close();
    await closeSql();
  });

  it('answers 30 days, oldest first, with each plan\'s requests, denials and counted uses per day', async () => {
    const res = await adminApp.inject({ method: 'GET', url: '/admin/v1/overview', headers: bearer(ADMIN_KEY) });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.days).toHaveLength(30);
    expect(body.days[0]).toBe(day(29));
    expect(body.days[29]).toBe(day(0));
    const at = (back: number) => 29 - back;
    const zeros = () => Array<number>(30).fill(0);
    const plan = (name: string) => body.plans.find((p: { plan: string }) => p.plan === name);
    const uses = zeros();
    uses[at(3)] = 8;
    uses[at(2)] = 2_000_000_000;
    uses[at(0)] = 5;
    const requests = zeros();
    requests[at(1)] = 10;
    const denials = zeros();
    denials[at(1)] = 3;
    expect(plan(PLAN)).toEqual({ plan: PLAN, requests, denials, uses });
    // An organization key counts for the organization's plan; its pool's uses count there too.
    const orgRequests = zeros();
    orgRequests[at(0)] = 1e15;
    const orgDenials = zeros();
    orgDenials[at(0)] = 2;
    const pooled = zeros();
    pooled[at(2)] = 3;
    pooled[at(0)] = 6;
    expect(plan(ORG_PLAN)).toEqual({ plan: ORG_PLAN, requests: orgRequests, denials: orgDenials, uses: pooled });
    // The configuration's plans are listed, and a plan users still hold that it no longer names.
    expect(body.plans.map((p: { plan: string }) => p.plan).slice(0, 3)).toEqual(['free', 'premium', 'pro']);
    const retired = zeros();
    retired[at(3)] = 4;
    expect(plan(GONE).uses).toEqual(retired);

    expect(body.top_users[0]).toEqual({ id: ids.heavy, email: expect.any(String), plan: PLAN, uses: 2_000_000_012 });
    expect(body.top_users.length).toBeLessThanOrEqual(10);
    expect(body.top_orgs[0]).toEqual({ id: ids.org, name: `Org ${tag}`, plan: ORG_PLAN, requests: 1e15 });
    expect(body.plan_mix.users).toContainEqual({ plan: PLAN, count: 2 });
    expect(body.plan_mix.users).toContainEqual({ plan: GONE, count: 1 });
    expect(body.plan_mix.orgs).toContainEqual({ plan: ORG_PLAN, count: 1 });
  });

  it('is behind the admin key', async () => {
    const res = await adminApp.inject({ method: 'GET', url: '/admin/v1/overview' });
    expect(res.statusCode).toBe(401);
  });

  it('reads the day ranges through the day indexes (034), not a scan of every row', async () => {
    for (const [table, index] of [['usage_days', 'usage_days_by_day'], ['api_key_usage', 'api_key_usage_by_day']]) {
      const plan = await sql<{ 'QUERY PLAN': string }>(`EXPLAIN SELECT * FROM ${table} WHERE day >= '2100-01-01'::date`);
      expect(plan.map((r) => r['QUERY PLAN']).join('\n'), table).toContain(index);
    }
  });
});
