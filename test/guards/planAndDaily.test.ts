// Plan guard (spec §5) and free daily limit (spec §8, CONTRACT §6, §7) on proxied routes, in the
// order auth → plan → daily, across two instances sharing Postgres and Redis.
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { utcDay } from '../../src/time.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import {
  bearer, closeSql, describeWithServices, eventually, everywhereWithin, makeUser, marker, ownRedisPrefix, queriesDuring, sql,
  startTestGateway, startTwoGateways, testClock, testConfig, testServices, whileFeedTrusted,
  usage,
  type TestGateway,
} from '../helpers/gateway.js';

const UPGRADE_URL = '/api/v1/subscription/upgrade';
const LIMIT_1 = { error: 'Limite quotidienne atteinte (plan free: 1 course/jour)', upgrade_url: UPGRADE_URL };

// The file's own Redis gates: another file's instance, with another daily limit, drops the run's
// gates that its limit would not refuse whenever its feed or Redis comes back, and a gate dropped
// meanwhile sends one refusal to Postgres (CI once counted 9 of 10 refusals from Redis).
let REDIS_KEY_PREFIX = ''; // set before the file's first instance starts (it needs the run's services)

function routes(upstream: string) {
  return {
    storage: { redisKeyPrefix: REDIS_KEY_PREFIX },
    upstreams: { app: { url: upstream } },
    routes: [
      { path: '/premium', upstream: 'app', auth: 'required', plans: ['premium', 'pro'] },
      { path: '/race', upstream: 'app', auth: 'required', dailyLimit: true },
      { path: '/premium-race', upstream: 'app', auth: 'required', plans: ['premium', 'pro'], dailyLimit: true },
    ],
  };
}

describeWithServices('plan and daily guards', () => {
  let upstream: EchoUpstream;
  let a: TestGateway;
  let b: TestGateway;
  let redis: Redis;
  const extra: TestGateway[] = [];

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    REDIS_KEY_PREFIX = ownRedisPrefix('plan-daily');
    [a, b] = await startTwoGateways(testConfig(routes(upstream.url)));
    redis = new Redis(testServices!.redis);
  });

  // A test's own instances go when it ends: held to the file's end, their pools add up past
  // Postgres's max_connections beside another file's (CI: "too many clients already").
  afterEach(async () => {
    await Promise.all(extra.splice(0).map((gw) => gw.close()));
  });

  afterAll(async () => {
    await Promise.all([a?.close(), b?.close(), ...extra.map((g) => g.close())]);
    redis?.disconnect();
    await upstream?.close();
    await closeSql();
  });

  describe('plan guard', () => {
    it('answers 403 with the required plans, the current plan and the upgrade path', async () => {
      const free = await makeUser(a);
      const m = marker();
      for (const gw of [a, b]) {
        const res = await gw.get(`/premium/${m}`, { headers: bearer(free.access) });
        expect(res.status).toBe(403);
        expect(res.json).toEqual({ error: 'Plan insuffisant', required: ['premium', 'pro'], current_plan: 'free', upgrade_url: UPGRADE_URL });
      }
      expect(upstream.count(m)).toBe(0);
      for (const plan of ['premium', 'pro'] as const) {
        const user = await makeUser(b, { plan });
        const res = await a.get(`/premium/${m}`, { headers: bearer(user.access) });
        expect(res.status).toBe(200);
        expect(res.json.headers['x-user-plan']).toBe(plan);
      }
      expect(upstream.count(m)).toBe(2);
    });

    it('authenticates first, then checks the plan, then counts the day', async () => {
      const free = await makeUser(a);
      const m = marker();
      const anonymous = await a.get(`/premium-race/${m}`);
      expect(anonymous.status).toBe(401);
      expect(anonymous.json).toEqual({ error: 'Token invalide ou expiré' });
      const refused = await b.get(`/premium-race/${m}`, { headers: bearer(free.access) });
      expect(refused.status).toBe(403);
      expect(refused.json).toEqual({ error: 'Plan insuffisant', required: ['premium', 'pro'], current_plan: 'free', upgrade_url: UPGRADE_URL });
      // Refused by the plan guard: the day's use is still there.
      expect(await usage(free.id)).toEqual({ daily_usage: 0, last_usage_date: null });
      expect((await a.get(`/race/${m}`, { headers: bearer(free.access) })).status).toBe(200);
      expect(upstream.count(m)).toBe(1);
    });
  });

  describe('daily limit', () => {
    it('admits exactly one of 40 concurrent requests over two instances, and records it', async () => {
      const user = await makeUser(a);
      const m = marker();
      const results = await Promise.all(Array.from({ length: 40 }, (_, i) => (i % 2 ? a : b).get(`/race/${m}`, { headers: bearer(user.access) })));
      expect(results.filter((r) => r.status === 200)).toHaveLength(1);
      const refused = results.filter((r) => r.status !== 200);
      expect(refused).toHaveLength(39);
      for (const r of refused) {
        expect(r.status).toBe(429);
        expect(r.json).toEqual(LIMIT_1);
      }
      expect(upstream.count(m)).toBe(1);
      expect(await usage(user.id)).toEqual({ daily_usage: 1, last_usage_date: utcDay(new Date()) });
    });

    it('never re-admits a user whose Redis gate was flushed', async () => {
      const user = await makeUser(a);
      const m = marker();
      expect((await a.get(`/race/${m}`, { headers: bearer(user.access) })).status).toBe(200);
      const pattern = `${REDIS_KEY_PREFIX}daily:${user.id}:*`;
      for (let round = 0; round < 3; round++) {
        // The other instance may have dropped the gate already: one that checked today's gates
        // against Postgres between this gate's INCR and its use being counted (a reconciliation
        // drops gates Postgres does not back yet). Gone either way.
        const keys = await redis.keys(pattern);
        expect(keys.length).toBeLessThanOrEqual(1);
        if (keys.length) await redis.del(...keys);
        const res = await (round % 2 ? a : b).get(`/race/${m}`, { headers: bearer(user.access) });
        expect(res.status).toBe(429);
        expect(res.json).toEqual(LIMIT_1);
      }
      expect(upstream.count(m)).toBe(1);
      expect(await usage(user.id)).toEqual({ daily_usage: 1, last_usage_date: utcDay(new Date()) });
    });

    it('obeys a count lowered by hand (SQL) on both instances within a second, and only that far', async () => {
      const resets = [
        'UPDATE users SET daily_usage = 0 WHERE id = $1', // support gives today's use back
        'UPDATE users SET daily_usage = 0, last_usage_date = NULL WHERE id = $1', // or clears the record
      ];
      for (const reset of resets) {
        const user = await makeUser(a);
        const m = marker();
        const use = (gw: TestGateway) => gw.get(`/race/${m}`, { headers: bearer(user.access) });
        expect((await use(a)).status).toBe(200);
        expect((await use(b)).status).toBe(429); // from here on, refused from Redis
        await sql(reset, [user.id]);
        // Every refusal before the reset reaches the instances is a refusal, never a use.
        await eventually(async () => (await use(b)).status === 200, 1000);
        for (const gw of [a, b, a]) {
          const res = await use(gw);
          expect(res.status).toBe(429);
          expect(res.json).toEqual(LIMIT_1);
        }
        expect(upstream.count(m)).toBe(2);
        expect(await usage(user.id)).toEqual({ daily_usage: 1, last_usage_date: utcDay(new Date()) });
      }
    });

    it('answers repeated refusals from Redis without touching Postgres', async () => {
      const user = await makeUser(a);
      const m = marker();
      await a.get(`/race/${m}`, { headers: bearer(user.access) });
      const row = await usage(user.id);
      // Both instances watched: b's feed resuming (or Redis coming back to b) checks the shared
      // gates again, and may drop this one for a request, which Postgres then refuses instead.
      await whileFeedTrusted([a, b], async () => {
        await a.get(`/race/${m}`, { headers: bearer(user.access) }); // the user is known to the cache now
        const before = a.services.daily.stats.refusedByRedis;
        const queries = await queriesDuring(a, async () => {
          for (let i = 0; i < 10; i++) expect((await a.get(`/race/${m}`, { headers: bearer(user.access) })).status).toBe(429);
        });
        expect(queries).toEqual([]);
        expect(a.services.daily.stats.refusedByRedis - before).toBe(10);
      });
      expect(await usage(user.id)).toEqual(row);
      expect(upstream.count(m)).toBe(1);
    });

    it('does not count premium and pro users', async () => {
      const m = marker();
      for (const plan of ['premium', 'pro'] as const) {
        const user = await makeUser(b, { plan });
        const results = await Promise.all(Array.from({ length: 6 }, (_, i) => (i % 2 ? a : b).get(`/race/${m}`, { headers: bearer(user.access) })));
        expect(results.map((r) => r.status)).toEqual(Array(6).fill(200));
        expect(await usage(user.id)).toEqual({ daily_usage: 0, last_usage_date: null });
      }
      expect(upstream.count(m)).toBe(12);
    });

    it('counts a user who was premium and is free again (plan changed by SQL)', async () => {
      const user = await makeUser(a, { plan: 'premium' });
      const m = marker();
      expect((await a.get(`/race/${m}`, { headers: bearer(user.access) })).status).toBe(200);
      await sql("UPDATE users SET plan = 'free' WHERE id = $1", [user.id]);
      // Within a second both instances count the user's uses again: whichever sees the change
      // first admits (and counts) one use, then both refuse.
      await everywhereWithin([a, b], async (gw) => (await gw.get(`/race/${m}`, { headers: bearer(user.access) })).status === 429, 1000);
      for (const gw of [a, b]) {
        const res = await gw.get(`/race/${m}`, { headers: bearer(user.access) });
        expect(res.status).toBe(429);
        expect(res.json).toEqual(LIMIT_1);
      }
      expect((await usage(user.id)).daily_usage).toBe(1);
    });

    it('names the configured limit and admits exactly that many (freeDailyLimit 3)', async () => {
      const config = testConfig({ ...routes(upstream.url), plans: { freeDailyLimit: 3 } });
      const [c, d] = await startTwoGateways(config);
      extra.push(c, d);
      const user = await makeUser(c);
      const m = marker();
      const results = await Promise.all(Array.from({ length: 30 }, (_, i) => (i % 2 ? c : d).get(`/race/${m}`, { headers: bearer(user.access) })));
      expect(results.filter((r) => r.status === 200)).toHaveLength(3);
      for (const r of results.filter((x) => x.status !== 200)) {
        expect(r.status).toBe(429);
        expect(r.json).toEqual({ error: 'Limite quotidienne atteinte (plan free: 3 courses/jour)', upgrade_url: UPGRADE_URL });
      }
      expect(upstream.count(m)).toBe(3);
      expect(await usage(user.id)).toEqual({ daily_usage: 3, last_usage_date: utcDay(new Date()) });
    });

    it('admits again on the next UTC day and restarts the count at 1', async () => {
      const clock = testClock();
      const config = testConfig(routes(upstream.url));
      const [c, d] = await startTwoGateways(config, { clock });
      extra.push(c, d);
      const user = await makeUser(c);
      const m = marker();
      const today = utcDay(clock());
      expect((await c.get(`/race/${m}`, { headers: bearer(user.access) })).status).toBe(200);
      expect((await d.get(`/race/${m}`, { headers: bearer(user.access) })).status).toBe(429);
      clock.advance(24 * 3_600_000);
      const tomorrow = utcDay(clock());
      expect(tomorrow).not.toBe(today);
      // The access token was issued "yesterday" and is now expired: log in again on the new day.
      const login = await c.post('/api/v1/auth/login', { email: user.email, password: user.password });
      expect(login.status).toBe(200);
      const access = login.json.access_token as string;
      const results = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? c : d).get(`/race/${m}`, { headers: bearer(access) })));
      // Every answer's status at once, so that a failure says what each request got (CI once saw no 200).
      expect(results.map((r) => r.status).sort()).toEqual([200, ...Array(9).fill(429)]);
      for (const r of results.filter((res) => res.status === 429)) expect(r.json).toEqual(LIMIT_1);
      // One use yesterday, one today: the refusals never reached the upstream.
      expect(upstream.count(m)).toBe(2);
      expect(await usage(user.id)).toEqual({ daily_usage: 1, last_usage_date: tomorrow });
    });

    it('never takes a user back to a day already left behind (an instance whose clock lags)', async () => {
      // Two instances either side of midnight UTC, 40 seconds apart.
      const midnight = new Date(`${utcDay(new Date(Date.now() + 86_400_000))}T00:00:00Z`).getTime();
      const lagging = testClock();
      lagging.set(new Date(midnight - 10_000));
      const leading = testClock();
      leading.set(new Date(midnight + 30_000));
      const config = testConfig(routes(upstream.url));
      const late = await startTestGateway(config, { clock: lagging });
      const early = await startTestGateway(config, { clock: leading });
      extra.push(late, early);
      const user = await makeUser(late);
      const m = marker();
      expect((await early.get(`/race/${m}`, { headers: bearer(user.access) })).status).toBe(200);
      const behind = await late.get(`/race/${m}`, { headers: bearer(user.access) });
      expect(behind.status).toBe(429);
      expect(behind.json).toEqual(LIMIT_1);
      expect((await early.get(`/race/${m}`, { headers: bearer(user.access) })).status).toBe(429);
      expect(upstream.count(m)).toBe(1);
      expect(await usage(user.id)).toEqual({ daily_usage: 1, last_usage_date: utcDay(leading()) });
    });
  });
});
