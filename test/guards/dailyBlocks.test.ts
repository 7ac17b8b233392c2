// Daily quotas counted in blocks (issue 28): instances reserve blocks of a busy user's remaining
// uses in Postgres instead of locking the user's row per request; across instances they admit
// exactly the plan's quota, the last uses of a day one by one, and what a block did not serve
// goes back to users.daily_usage.
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  bearer, closeSql, describeWithServices, eventually, makeUser, marker, sql, startTwoGateways, testConfig, usage,
  type TestGateway,
} from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';

describeWithServices('daily quotas counted in blocks', () => {
  let upstream: EchoUpstream;
  let a: TestGateway;
  let b: TestGateway;

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    [a, b] = await startTwoGateways(testConfig({
      upstreams: { app: { url: upstream.url } },
      routes: [{ path: '/metered', upstream: 'app', auth: 'required', dailyLimit: true }],
      plans: { limits: { busy: { daily: 600 }, large: { daily: 1000 } } },
    }));
  });

  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await upstream?.close();
    await closeSql();
  });

  /** `waves` rounds of `perInstance` concurrent requests on each instance at once. */
  async function hammer(access: string, m: string, waves: number, perInstance: number): Promise<number[]> {
    const statuses: number[] = [];
    for (let w = 0; w < waves; w++) {
      const round = await Promise.all(Array.from({ length: 2 * perInstance }, (_, i) => (i % 2 ? b : a).get(`/metered/${m}`, { headers: bearer(access) })));
      statuses.push(...round.map((r) => r.status));
    }
    return statuses;
  }

  it('admits exactly the quota of one user hammering two instances in parallel, and counts exactly that', async () => {
    const user = await makeUser(a, { plan: 'busy' });
    const m = marker();
    const statuses = await hammer(user.access, m, 8, 50);
    expect(statuses.filter((s) => s === 200)).toHaveLength(600);
    expect(statuses.filter((s) => s === 429)).toHaveLength(200);
    expect(upstream.count(m)).toBe(600);
    expect((await usage(user.id)).daily_usage).toBe(600);
  });

  it('stays exact for a user a few uses from the limit', async () => {
    const user = await makeUser(a, { plan: 'large' });
    await sql("UPDATE users SET daily_usage = 995, last_usage_date = (now() AT TIME ZONE 'UTC')::date WHERE id = $1", [user.id]);
    const m = marker();
    const statuses = await hammer(user.access, m, 1, 20);
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(upstream.count(m)).toBe(5);
    expect((await usage(user.id)).daily_usage).toBe(1000);
  });

  it('hands back the uses a block reserved and did not serve, so daily_usage comes back to the uses served', async () => {
    const user = await makeUser(a, { plan: 'large' });
    const m = marker();
    const statuses = await hammer(user.access, m, 3, 25);
    const served = statuses.filter((s) => s === 200).length;
    expect(served).toBe(150);
    expect(upstream.count(m)).toBe(150);
    await eventually(async () => (await usage(user.id)).daily_usage === 150, 5000);
    // The next request of a lone client is one use, counted at once.
    expect((await a.get(`/metered/${m}`, { headers: bearer(user.access) })).status).toBe(200);
    await eventually(async () => (await usage(user.id)).daily_usage === 151, 5000);
  });
});
