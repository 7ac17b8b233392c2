// Operators see usage (issue 21): GET /admin/v1/users/{id}/usage from users and the daily rollup,
// quota decisions counted per plan and route for Prometheus, and the open plan list through the
// admin API, the CLI and the plan guard.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import { utcDay } from '../../src/time.js';
import {
  ADMIN_KEY, bearer, closeSql, describeWithServices, makeUser, marker, sql, startTestGateway, testClock, testConfig, type TestClock, type TestGateway,
} from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';

const DAY = 86_400_000;

describeWithServices('usage and open plans for operators', () => {
  let upstream: EchoUpstream;
  let gw: TestGateway;
  let clock: TestClock;
  let adminUrl: string;
  let closeAdmin: () => Promise<void>;

  const admin = (method: string, path: string, json?: unknown) => request(adminUrl, method, path, { headers: bearer(ADMIN_KEY), ...(json === undefined ? {} : { json }) });

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    clock = testClock();
    gw = await startTestGateway(testConfig({
      upstreams: { app: { url: upstream.url } },
      plans: { limits: { team: { daily: 5, monthly: 100, perMinute: 50 }, premium: { daily: 4 } } },
      routes: [
        { path: '/metered', upstream: 'app', dailyLimit: true, rateLimit: true },
        { path: '/team-only', upstream: 'app', plans: ['team'] },
      ],
    }), { clock });
    const app = await buildAdminApp(gw.services);
    adminUrl = await app.listen({ host: '127.0.0.1', port: 0 });
    closeAdmin = () => app.close();
  });

  afterAll(async () => {
    await closeAdmin?.();
    await gw?.close();
    await upstream?.close();
    await closeSql();
  });

  it('shows today\'s count, the limits and the last 30 days, finished days rolled up when the day moves on', async () => {
    const user = await makeUser(gw, { plan: 'team' });
    const use = () => gw.get(`/metered/${marker()}`, { headers: bearer(user.access) });
    clock.set(new Date(Date.now() - 3 * DAY));
    const threeDaysAgo = utcDay(clock());
    for (let i = 0; i < 4; i++) expect((await use()).status).toBe(200);
    clock.set(new Date(Date.now() - DAY));
    const yesterday = utcDay(clock());
    expect((await use()).status).toBe(200);
    clock.set(new Date());
    const today = utcDay(clock());
    for (let i = 0; i < 2; i++) expect((await use()).status).toBe(200);
    expect(await sql("SELECT to_char(day, 'YYYY-MM-DD') AS day, uses FROM usage_days WHERE user_id = $1 ORDER BY day", [user.id]))
      .toEqual([{ day: threeDaysAgo, uses: 4 }, { day: yesterday, uses: 1 }]);

    const res = await admin('GET', `/admin/v1/users/${user.id}/usage`);
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ user_id: user.id, plan: 'team', limits: { daily: 5, perMinute: 50 }, today: { date: today, uses: 2 }, daily_remaining: 3 });
    // This month's count (CONTRACT §23): the days above that fall in today's UTC month.
    const month = `${today.slice(0, 7)}-01`;
    const monthUses = ([[threeDaysAgo, 4], [yesterday, 1], [today, 2]] as const).reduce((n, [day, uses]) => n + (day.startsWith(today.slice(0, 7)) ? uses : 0), 0);
    expect(res.json).toMatchObject({ limits: { monthly: 100 }, month: { date: month, uses: monthUses }, monthly_remaining: 100 - monthUses });
    expect(res.json.history).toHaveLength(30);
    expect(res.json.history[0]).toEqual({ date: today, uses: 2 });
    expect(res.json.history[1]).toEqual({ date: yesterday, uses: 1 });
    expect(res.json.history[2]).toEqual({ date: utcDay(new Date(Date.now() - 2 * DAY)), uses: 0 });
    expect(res.json.history[3]).toEqual({ date: threeDaysAgo, uses: 4 });
    expect((await admin('GET', '/admin/v1/users/2147483647/usage')).status).toBe(404);
    expect((await request(adminUrl, 'GET', `/admin/v1/users/${user.id}/usage`)).status).toBe(401);
  });

  it('counts admitted and refused uses per limit, plan and route for Prometheus, with no user id', async () => {
    const user = await makeUser(gw, { plan: 'premium' });
    for (let i = 0; i < 6; i++) await gw.get(`/metered/${marker()}`, { headers: bearer(user.access) });
    const metrics = (await request(adminUrl, 'GET', '/metrics')).text;
    const value = (labels: string) => Number(new RegExp(`^gateway_quota_uses_total\\{${labels}\\} (\\d+)$`, 'm').exec(metrics)?.[1]);
    expect(value('limit="daily",plan="premium",route="/metered",outcome="admitted"')).toBeGreaterThanOrEqual(4);
    expect(value('limit="daily",plan="premium",route="/metered",outcome="refused"')).toBeGreaterThanOrEqual(2);
    expect(metrics).not.toMatch(/gateway_quota_uses_total\{[^}]*user/);
  });

  it('accepts any plan the configuration names, through the admin API and the plan guard, and refuses others by name', async () => {
    const user = await makeUser(gw);
    const m = marker();
    const refused = await gw.get(`/team-only/${m}`, { headers: bearer(user.access) });
    expect(refused.json).toEqual({ error: 'Plan insuffisant', required: ['team'], current_plan: 'free', upgrade_url: '/api/v1/subscription/upgrade' });
    const set = await admin('PUT', `/admin/v1/users/${user.id}/plan`, { plan: 'team' });
    expect(set.status).toBe(200);
    expect(set.json.plan).toBe('team');
    expect(await sql('SELECT plan FROM subscriptions WHERE user_id = $1', [user.id])).toEqual([{ plan: 'team' }]);
    expect((await gw.get(`/team-only/${m}`, { headers: bearer(user.access) })).status).toBe(200);
    const gold = await admin('PUT', `/admin/v1/users/${user.id}/plan`, { plan: 'gold' });
    expect(gold.status).toBe(400);
    expect(gold.json).toEqual({ error: 'Plan inconnu (free, premium, pro ou team)' });
  });
});
