// The guards' state under the faults a review went looking for: the Redis daily gate must never
// refuse, for the rest of the day, a user whom Postgres (the authority, spec §8, CONTRACT §7) would
// admit, whatever was missed while a connection was away; and a request answered 503 must not use
// up the day behind the client's back.
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { utcDay } from '../../src/http.js';
import { postgresDatabase } from '../../src/storage/db.js';
import {
  bearer, closeSql, describeWithServices, eventually, everywhereWithin, makeUser, marker, newEmail, sql, startTestGateway, startTwoGateways, testConfig, testServices,
  usage,
  type TestGateway,
} from '../helpers/gateway.js';
import { startListenRelay } from '../helpers/listenRelay.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/upstream.js';
import { ownRedisPrefix, postgresTarget, startTcpProxy, throughProxy } from '../ops/support.js';

const LIMIT_1 = { error: 'Limite quotidienne atteinte (plan free: 1 course/jour)', upgrade_url: '/api/v1/subscription/upgrade' };
const UNAVAILABLE = { error: 'Service temporairement indisponible' };

describeWithServices('guards state review', () => {
  let upstream: EchoUpstream;
  let a: TestGateway;
  let b: TestGateway;

  const routes = () => ({
    upstreams: { app: { url: upstream.url } },
    routes: [
      { path: '/race', upstream: 'app', auth: 'required', dailyLimit: true },
      { path: '/pro', upstream: 'app', auth: 'required', plans: ['pro'] },
    ],
  });
  const use = (gw: TestGateway, m: string, access: string) => gw.get(`/race/${m}`, { headers: bearer(access) });

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    [a, b] = await startTwoGateways(testConfig({ ...routes(), storage: { redisKeyPrefix: ownRedisPrefix('review') } }));
  });

  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await upstream?.close();
    await closeSql();
  });

  it('admits, once, a user whose count was lowered by SQL while no instance was listening', async () => {
    // Both instances reach Postgres through a proxy the test cuts: their LISTEN connections go, and
    // the NOTIFY of the reset (004_daily_usage_reset.sql) reaches neither.
    const proxy = await startTcpProxy(postgresTarget());
    const [c, d] = await startTwoGateways(testConfig({
      ...routes(),
      storage: { postgres: throughProxy(testServices!.postgres, proxy), redisKeyPrefix: ownRedisPrefix('listen-lost') },
    }));
    try {
      const user = await makeUser(c);
      const m = marker();
      expect((await use(c, m, user.access)).status).toBe(200);
      expect(await use(d, m, user.access)).toMatchObject({ status: 429, json: LIMIT_1 }); // Redis now says "used up"

      await proxy.cut();
      await eventually(() => !c.services.identities.isLive && !d.services.identities.isLive, 2000);
      await sql('UPDATE users SET daily_usage = 0 WHERE id = $1', [user.id]); // support gives the day back
      await proxy.restore();
      await eventually(() => c.services.identities.isLive && d.services.identities.isLive, 10_000);

      // Postgres says the day is free again: the gate must not go on refusing all day. Refusals
      // while the instances catch up are refusals, never uses.
      await eventually(async () => (await use(d, m, user.access)).status === 200, 1000);
      for (const gw of [c, d]) expect(await use(gw, m, user.access)).toMatchObject({ status: 429, json: LIMIT_1 });
      expect(upstream.count(m)).toBe(2);
      expect(await usage(user.id)).toEqual({ daily_usage: 1, last_usage_date: utcDay(new Date()) });
    } finally {
      await Promise.all([c.close(), d.close()]);
      await proxy.close();
    }
  });

  it('admits, once, a user whose count was lowered by SQL while the instances could not reach Redis', async () => {
    // Redis keeps its keys; only the instances' connections to it are cut. They hear the NOTIFY of
    // the reset but cannot drop the gate then.
    const redisUrl = new URL(testServices!.redis);
    const proxy = await startTcpProxy({ host: redisUrl.hostname, port: Number(redisUrl.port || 6379) });
    const [c, d] = await startTwoGateways(testConfig({
      ...routes(),
      storage: { redis: `redis://127.0.0.1:${proxy.port}`, redisKeyPrefix: ownRedisPrefix('redis-away') },
    }));
    try {
      const user = await makeUser(c);
      const probe = await makeUser(c);
      const m = marker();
      expect((await use(c, m, user.access)).status).toBe(200);
      expect(await use(d, m, user.access)).toMatchObject({ status: 429, json: LIMIT_1 });
      for (const gw of [c, d]) expect((await gw.get(`/pro/${m}`, { headers: bearer(probe.access) })).status).toBe(403);

      await proxy.cut();
      await eventually(() => [c, d].every((gw) => gw.services.redis!.status !== 'ready'), 5000);
      await sql('UPDATE users SET daily_usage = 0 WHERE id = $1', [user.id]);
      // A later change seen by both instances proves they have handled the reset's NOTIFY (one
      // LISTEN connection each, notifications in commit order) while Redis was away.
      await sql("UPDATE users SET plan = 'pro' WHERE id = $1", [probe.id]);
      await everywhereWithin([c, d], async (gw) => (await gw.get(`/pro/${m}`, { headers: bearer(probe.access) })).status === 200, 1000);

      await proxy.restore();
      await eventually(() => [c, d].every((gw) => gw.services.redis!.status === 'ready'), 10_000);
      await eventually(async () => (await use(d, m, user.access)).status === 200, 1000);
      for (const gw of [c, d]) expect(await use(gw, m, user.access)).toMatchObject({ status: 429, json: LIMIT_1 });
      expect(upstream.count(m)).toBe(4); // two uses, two probes let through
      expect(await usage(user.id)).toEqual({ daily_usage: 1, last_usage_date: utcDay(new Date()) });
    } finally {
      await Promise.all([c.close(), d.close()]);
      await proxy.close();
    }
  });

  it('gives a user id that comes back (INSERT with an explicit id) a day of its own, not its former holder\'s gate', async () => {
    const former = await makeUser(a);
    const m = marker();
    expect((await use(a, m, former.access)).status).toBe(200);
    expect(await use(b, m, former.access)).toMatchObject({ status: 429, json: LIMIT_1 });

    // An operator removes the account, then creates another one under the same id.
    const [row] = await sql<{ password_hash: string }>('SELECT password_hash FROM users WHERE id = $1', [former.id]);
    await sql('DELETE FROM users WHERE id = $1', [former.id]);
    const email = newEmail();
    await sql('INSERT INTO users (id, email, password_hash) VALUES ($1, $2, $3)', [former.id, email, row!.password_hash]);
    await sql("INSERT INTO subscriptions (user_id, plan) VALUES ($1, 'free')", [former.id]);
    const login = await a.post('/api/v1/auth/login', { email, password: former.password });
    expect(login.status).toBe(200);
    const access = login.json.access_token as string;
    expect(await usage(former.id)).toEqual({ daily_usage: 0, last_usage_date: null });

    await eventually(async () => (await use(b, m, access)).status === 200, 1000);
    for (const gw of [a, b]) expect(await use(gw, m, access)).toMatchObject({ status: 429, json: LIMIT_1 });
    expect(upstream.count(m)).toBe(2);
    expect(await usage(former.id)).toEqual({ daily_usage: 1, last_usage_date: utcDay(new Date()) });
  });

  it('does not use up the day of a request answered 503 because its counting UPDATE waited past the query timeout', async () => {
    // A short client-side timeout keeps the test fast (production: QUERY_TIMEOUT_MS). The user's
    // row is held by an operator's open transaction, so the counting UPDATE waits for it.
    const db = postgresDatabase(testServices!.postgres, { queryTimeoutMs: 500 });
    const gw = await startTestGateway(testConfig({ ...routes(), storage: { redisKeyPrefix: ownRedisPrefix('slow-update') } }), { db });
    const locker = new pg.Client({ connectionString: testServices!.postgres });
    await locker.connect();
    try {
      const user = await makeUser(gw);
      const m = marker();
      await locker.query('BEGIN');
      await locker.query('SELECT id FROM users WHERE id = $1 FOR UPDATE', [user.id]);
      expect(await use(gw, m, user.access)).toMatchObject({ status: 503, json: UNAVAILABLE });
      await locker.query('ROLLBACK');
      // Queued behind anything still waiting for the row, so this reads what it left behind.
      const { rows } = await locker.query("SELECT daily_usage, to_char(last_usage_date, 'YYYY-MM-DD') AS last_usage_date FROM users WHERE id = $1 FOR UPDATE", [user.id]);
      expect(rows).toEqual([{ daily_usage: 0, last_usage_date: null }]);
      expect(upstream.count(m)).toBe(0);

      // The client retries: the day's one use is still there.
      expect((await use(gw, m, user.access)).status).toBe(200);
      expect(await use(gw, m, user.access)).toMatchObject({ status: 429, json: LIMIT_1 });
      expect(upstream.count(m)).toBe(1);
      expect(await usage(user.id)).toEqual({ daily_usage: 1, last_usage_date: utcDay(new Date()) });
    } finally {
      await locker.end();
      await gw.close();
      await db.close();
    }
  });

  it('stops trusting the cache while the LISTEN connection hears everything, but late', async () => {
    const relay = await startListenRelay();
    const gw = await startTestGateway(testConfig({ ...routes(), storage: { postgres: relay.url, redisKeyPrefix: ownRedisPrefix('lagging') } }));
    try {
      const user = await makeUser(gw);
      const m = marker();
      const pro = async () => (await gw.get(`/pro/${m}`, { headers: bearer(user.access) })).status;
      expect(await pro()).toBe(403); // cached as free

      // Every notification now arrives 1.5 s late, heartbeats included; it has been so for longer
      // than that, so the instance keeps hearing (old) heartbeats all the time.
      relay.lag(1500);
      await new Promise((resolve) => setTimeout(resolve, 2500));
      await sql("UPDATE users SET plan = 'pro' WHERE id = $1", [user.id]);
      await everywhereWithin([gw], async () => (await pro()) === 200, 1000);
      await sql("UPDATE users SET plan = 'free' WHERE id = $1", [user.id]);
      await everywhereWithin([gw], async () => (await pro()) === 403, 1000);

      // On time again: the cache is trusted again, and still follows changes within a second.
      relay.lag(0);
      await eventually(() => gw.services.identities.isLive, 5000);
      await sql("UPDATE users SET plan = 'pro' WHERE id = $1", [user.id]);
      await everywhereWithin([gw], async () => (await pro()) === 200, 1000);
      expect(upstream.count(m)).toBeGreaterThanOrEqual(2);
    } finally {
      await gw.close();
      await relay.close();
    }
  });
});
