// Monthly quotas (CONTRACT §23, issue 53): a use is reserved on the day and the month at once or
// on neither, exactly across instances, Postgres the authority; the month's 429 wins when both are
// spent, and says when the month turns (Retry-After, RateLimit-Policy with the month's length).
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { docsExample } from '../helpers/docs.js';
import {
  bearer, closeSql, describeWithServices, everywhereWithin, makeUser, marker, ownRedisPrefix, sql, startTestGateway, startTwoGateways, testClock, testConfig,
  testConfigFromYaml, testServices, type TestGateway,
} from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';

const UPGRADE = '/api/v1/subscription/upgrade';

/** The user's counters as the database holds them. */
async function counters(id: number): Promise<{ daily_usage: number; monthly_usage: number; last_usage_month: string | null }> {
  const [row] = await sql<{ daily_usage: number; monthly_usage: number; last_usage_month: string | null }>(
    "SELECT daily_usage, monthly_usage, to_char(last_usage_month, 'YYYY-MM-DD') AS last_usage_month FROM users WHERE id = $1", [id]);
  return row!;
}

/** Seconds in the UTC month of `now`, and to its end. */
function month(now: Date): { length: number; left: number } {
  const start = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1);
  const next = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1);
  return { length: (next - start) / 1000, left: Math.ceil((next - now.getTime()) / 1000) };
}

describeWithServices('monthly quotas', () => {
  let upstream: EchoUpstream;
  let prefix: string;
  let a: TestGateway;
  let b: TestGateway;
  const extra: TestGateway[] = [];

  const limits = {
    free: { daily: 1, monthly: 20 },
    monthonly: { monthly: 2 },
    dayfirst: { daily: 1, monthly: 5 },
    both: { daily: 2, monthly: 2 },
    wide: { daily: 5, monthly: 2 },
    twenty: { daily: 1000, monthly: 20 },
  };
  const settings = (url: string, more: Record<string, unknown> = {}) => ({
    upstreams: { app: { url } },
    routes: [{ path: '/metered', upstream: 'app', dailyLimit: true }],
    plans: { limits },
    ...more,
  });

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    prefix = ownRedisPrefix('monthly');
    [a, b] = await startTwoGateways(testConfig(settings(upstream.url, { storage: { redisKeyPrefix: prefix } })));
  });

  // A test's own instances go when it ends: held to the file's end, their pools add up past
  // Postgres's max_connections beside another file's (CI: "too many clients already").
  afterEach(async () => {
    await Promise.all(extra.splice(0).map((gw) => gw.close()));
  });

  afterAll(async () => {
    await Promise.all([a, b, ...extra].map((gw) => gw?.close()));
    await upstream?.close();
    await closeSql();
  });

  const get = (gw: TestGateway, m: string, access: string) => gw.get(`/metered/${m}`, { headers: bearer(access) });

  it('answers the month\'s 429 once it is spent, with Retry-After to the next month and the month\'s RateLimit fields; Postgres refuses when Redis forgot', async () => {
    const user = await makeUser(a, { plan: 'monthonly' });
    const m = marker();
    const first = await get(a, m, user.access);
    expect(first.status).toBe(200);
    const { length } = month(new Date());
    expect(first.headers['ratelimit-policy']).toBe(`"monthly";q=2;w=${length}`);
    expect(first.headers.ratelimit).toMatch(/^"monthly";r=1;t=\d+$/);
    expect((await get(b, m, user.access)).status).toBe(200);
    for (const gw of [a, b]) {
      const refused = await get(gw, m, user.access);
      expect(refused.status).toBe(429);
      expect(refused.json).toEqual({ error: 'Limite mensuelle atteinte (plan monthonly: 2 courses/mois)', upgrade_url: UPGRADE });
      const { left } = month(new Date());
      expect(Math.abs(Number(refused.headers['retry-after']) - left)).toBeLessThanOrEqual(2);
      expect(refused.headers['ratelimit-policy']).toBe(`"monthly";q=2;w=${length}`);
      expect(refused.headers.ratelimit).toMatch(/^"monthly";r=0;t=\d+$/);
    }
    // Redis loses the month's mark: Postgres still refuses, and marks it again.
    const redis = new Redis(testServices!.redis, { keyPrefix: prefix });
    const mark = `monthly:${user.id}:${new Date().toISOString().slice(0, 7)}-01`;
    expect(await redis.get(mark)).not.toBeNull();
    await redis.del(mark);
    expect((await get(a, m, user.access)).status).toBe(429);
    await expect.poll(() => redis.get(mark)).not.toBeNull();
    redis.disconnect();
    expect(upstream.count(m)).toBe(2);
    expect(await counters(user.id)).toMatchObject({ monthly_usage: 2 });
  });

  it('answers the day\'s 429 when only the day is spent, and a refused request counts on neither window', async () => {
    const user = await makeUser(a, { plan: 'dayfirst' });
    const m = marker();
    const ok = await get(a, m, user.access);
    expect(ok.status).toBe(200);
    expect(ok.headers['ratelimit-policy']).toBe(`"daily";q=1;w=86400, "monthly";q=5;w=${month(new Date()).length}`);
    expect(ok.headers.ratelimit).toMatch(/^"daily";r=0;t=\d+, "monthly";r=4;t=\d+$/);
    for (const gw of [a, b, a, b]) {
      const refused = await get(gw, m, user.access);
      expect(refused.status).toBe(429);
      expect(refused.json).toEqual({ error: 'Limite quotidienne atteinte (plan dayfirst: 1 course/jour)', upgrade_url: UPGRADE });
      expect(refused.headers['ratelimit-policy']).toBe('"daily";q=1;w=86400');
    }
    expect(await counters(user.id)).toMatchObject({ daily_usage: 1, monthly_usage: 1 });
    // The month spent and the day not: the day's count does not move either.
    const wide = await makeUser(a, { plan: 'wide' });
    for (let i = 0; i < 2; i++) expect((await get(b, m, wide.access)).status).toBe(200);
    for (const gw of [a, b, a]) expect((await get(gw, m, wide.access)).json.error).toBe('Limite mensuelle atteinte (plan wide: 2 courses/mois)');
    expect(await counters(wide.id)).toMatchObject({ daily_usage: 2, monthly_usage: 2 });
    expect(upstream.count(m)).toBe(3);
  });

  it('answers the month\'s 429 when the day and the month are both spent', async () => {
    const user = await makeUser(a, { plan: 'both' });
    const m = marker();
    for (const gw of [a, b]) expect((await get(gw, m, user.access)).status).toBe(200);
    for (const gw of [a, b]) {
      const refused = await get(gw, m, user.access);
      expect(refused.status).toBe(429);
      expect(refused.json.error).toBe('Limite mensuelle atteinte (plan both: 2 courses/mois)');
      expect(refused.headers['ratelimit-policy']).toContain('"monthly";q=2;w=');
    }
    expect(await counters(user.id)).toMatchObject({ daily_usage: 2, monthly_usage: 2 });
  });

  it('admits exactly the month\'s 20 of 60 parallel requests over two instances, and the rows say 20 on both windows', async () => {
    const user = await makeUser(a, { plan: 'twenty' });
    const m = marker();
    const results = await Promise.all(Array.from({ length: 60 }, (_, i) => get(i % 2 ? b : a, m, user.access)));
    expect(results.filter((r) => r.status === 200)).toHaveLength(20);
    for (const r of results.filter((x) => x.status !== 200)) {
      expect(r.status).toBe(429);
      expect(r.json.error).toBe('Limite mensuelle atteinte (plan twenty: 20 courses/mois)');
    }
    expect(upstream.count(m)).toBe(20);
    expect(await counters(user.id)).toMatchObject({ daily_usage: 20, monthly_usage: 20 });
  });

  it('obeys a month\'s count lowered by hand on every instance within a second', async () => {
    const user = await makeUser(a, { plan: 'monthonly' });
    const m = marker();
    for (const gw of [a, b]) expect((await get(gw, m, user.access)).status).toBe(200);
    for (const gw of [a, b]) expect((await get(gw, m, user.access)).status).toBe(429);
    // Lowered to none used: each instance must admit one use within the second (the two fit the
    // month's 2), whatever it or Redis remembered of the month being spent.
    await sql('UPDATE users SET monthly_usage = 0 WHERE id = $1', [user.id]);
    await everywhereWithin([a, b], async (gw) => (await get(gw, marker(), user.access)).status === 200, 1000);
    expect(await counters(user.id)).toMatchObject({ monthly_usage: 2 });
    for (const gw of [a, b]) expect((await get(gw, m, user.access)).status).toBe(429);
  });

  it('shows the month on GET /api/v1/user/me and starts it again when the UTC month turns', async () => {
    const clock = testClock();
    clock.set(new Date('2027-01-31T23:59:50Z'));
    const gw = await startTestGateway(testConfig(settings(upstream.url, { storage: { redisKeyPrefix: ownRedisPrefix('monthly-clock') } })), { clock });
    extra.push(gw);
    const user = await makeUser(gw, { plan: 'wide' });
    const m = marker();
    const ok = await get(gw, m, user.access);
    expect(ok.headers['ratelimit-policy']).toBe('"daily";q=5;w=86400, "monthly";q=2;w=2678400');
    expect((await get(gw, m, user.access)).status).toBe(200);
    const refused = await get(gw, m, user.access);
    expect(refused.json.error).toBe('Limite mensuelle atteinte (plan wide: 2 courses/mois)');
    expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(10);
    const me = async () => (await gw.get('/api/v1/user/me', { headers: bearer(user.access) })).json;
    expect(await me()).toMatchObject({ limits: { daily: 5, monthly: 2, perMinute: null }, daily_remaining: 3, monthly_usage: 2, monthly_remaining: 0 });
    // February: a new month (and day), 28 days long.
    clock.set(new Date('2027-02-01T00:00:05Z'));
    expect(await me()).toMatchObject({ monthly_usage: 0, monthly_remaining: 2, daily_remaining: 5 });
    const next = await get(gw, m, user.access);
    expect(next.status).toBe(200);
    expect(next.headers['ratelimit-policy']).toBe('"daily";q=5;w=86400, "monthly";q=2;w=2419200');
    expect(await counters(user.id)).toMatchObject({ daily_usage: 1, monthly_usage: 1, last_usage_month: '2027-02-01' });
    expect(await me()).toMatchObject({ monthly_usage: 1, monthly_remaining: 1 });
    expect(upstream.count(m)).toBe(3);
  });

  it('runs the documented example verbatim: free tries once a day, twenty times a month', async () => {
    const clock = testClock();
    clock.set(new Date('2027-03-01T10:00:00Z'));
    const config = testConfigFromYaml(docsExample('plans-and-quotas', 'monthly'), { APP_UPSTREAM: upstream.url });
    const gw = await startTestGateway({ ...config, storage: { ...config.storage, redisKeyPrefix: ownRedisPrefix('monthly-docs') } }, { clock });
    extra.push(gw);
    const user = await makeUser(gw);
    // 18 of March's 20 uses already counted.
    await sql("UPDATE users SET monthly_usage = 18, last_usage_month = '2027-03-01' WHERE id = $1", [user.id]);
    const m = marker();
    const race = async () => {
      // A fresh token each day: the clock moves past the access token's lifetime.
      const login = await gw.post('/api/v1/auth/login', { email: user.email, password: user.password });
      return gw.get(`/api/v1/races/${m}`, { headers: bearer(login.json.access_token as string) });
    };
    expect((await race()).status).toBe(200);
    expect((await race()).json.error).toBe('Limite quotidienne atteinte (plan free: 1 course/jour)');
    clock.advance(86_400_000);
    expect((await race()).status).toBe(200);
    // The day and the month both spent: the month's answer.
    expect((await race()).json.error).toBe('Limite mensuelle atteinte (plan free: 20 courses/mois)');
    clock.advance(86_400_000);
    // A new day, the month still spent.
    const refused = await race();
    expect(refused.status).toBe(429);
    expect(refused.json).toEqual({ error: 'Limite mensuelle atteinte (plan free: 20 courses/mois)', upgrade_url: UPGRADE });
    expect(refused.headers['ratelimit-policy']).toBe('"monthly";q=20;w=2678400');
    expect(await counters(user.id)).toMatchObject({ monthly_usage: 20 });
    const premium = await makeUser(gw, { plan: 'premium' });
    expect((await gw.get(`/api/v1/races/${m}`, { headers: bearer(premium.access) })).headers['ratelimit-policy']).toBe('"monthly";q=100000;w=2678400');
    expect(upstream.count(m)).toBe(3);
  });

  it('takes only a positive whole number as a plan\'s monthly quota', () => {
    for (const monthly of [0, -1, 1.5, 'many', 2_147_483_648]) {
      expect(() => testConfig({ plans: { limits: { free: { monthly } } } })).toThrow(/monthly/);
    }
    expect(testConfig({ plans: { limits: { free: { monthly: 20 } } } }).plans.limits.free).toEqual({ monthly: 20 });
  });
});
