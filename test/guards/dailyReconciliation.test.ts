// The Redis daily gates reconciled with Postgres, the authority (spec §8, CONTRACT §7): a gate must
// never refuse, for the rest of the day, a user whom Postgres would admit, whatever the instances
// missed while their LISTEN or Redis connection was away, and whoever held the user id before.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { utcDay } from '../../src/time.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import {
  bearer, closeSql, describeWithServices, eventually, everywhereWithin, makeUser, marker, newEmail, ownRedisPrefix, sql, startTwoGateways, testConfig, testServices,
  usage,
  type TestGateway,
} from '../helpers/gateway.js';
import { postgresTarget, startTcpProxy, throughProxy } from '../helpers/tcpProxy.js';

const LIMIT_1 = { error: 'Limite quotidienne atteinte (plan free: 1 course/jour)', upgrade_url: '/api/v1/subscription/upgrade' };

describeWithServices('daily gates reconciled with Postgres', () => {
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
    [a, b] = await startTwoGateways(testConfig({ ...routes(), storage: { redisKeyPrefix: ownRedisPrefix('reconcile') } }));
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
      await eventually(() => [c, d].every((gw) => gw.services.redis!.client.status !== 'ready'), 5000);
      await sql('UPDATE users SET daily_usage = 0 WHERE id = $1', [user.id]);
      // A later change seen by both instances proves they have handled the reset's NOTIFY (one
      // LISTEN connection each, notifications in commit order) while Redis was away.
      await sql("UPDATE users SET plan = 'pro' WHERE id = $1", [probe.id]);
      await everywhereWithin([c, d], async (gw) => (await gw.get(`/pro/${m}`, { headers: bearer(probe.access) })).status === 200, 1000);

      await proxy.restore();
      await eventually(() => [c, d].every((gw) => gw.services.redis!.client.status === 'ready'), 10_000);
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
});
