// The daily limit while Redis comes and goes: Postgres alone keeps it exact, and the Redis gate is
// used again once Redis answers, with no restart. The test runs a Redis server of its own.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import {
  bearer, closeSql, eventually, makeUser, marker, sql, startTwoGateways, testConfig, testServices,
  type TestGateway, type TestUser,
} from '../helpers/gateway.js';
import { describeWithRedisServers, requireRedisBinaries, startRedisServer, type RedisServer } from '../helpers/redisServers.js';

const LIMIT_1 = { error: 'Limite quotidienne atteinte (plan free: 1 course/jour)', upgrade_url: '/api/v1/subscription/upgrade' };

describeWithRedisServers('daily limit while Redis is down', () => {
  let upstream: EchoUpstream;
  let gateways: TestGateway[];
  let redis: RedisServer;

  const stat = (name: 'refusedByRedis' | 'refusedByPostgres' | 'admitted') => gateways.reduce((n, gw) => n + gw.services.daily.stats[name], 0);
  const race = (gw: TestGateway, user: TestUser, m: string) => gw.get(`/race/${m}`, { headers: bearer(user.access) });
  const burst = (user: TestUser, m: string, n: number) => Promise.all(Array.from({ length: n }, (_, i) => race(gateways[i % 2]!, user, m)));
  const usage = async (id: number) => (await sql('SELECT daily_usage FROM users WHERE id = $1', [id]))[0]!.daily_usage;

  beforeAll(async () => {
    requireRedisBinaries();
    upstream = await startEchoUpstream();
    redis = await startRedisServer();
    const config = testConfig({
      storage: { redis: redis.url, redisKeyPrefix: `${testServices!.redisPrefix}outage:` },
      upstreams: { app: { url: upstream.url } },
      routes: [{ path: '/race', upstream: 'app', auth: 'required', dailyLimit: true }],
    });
    gateways = await startTwoGateways(config);
  });

  afterAll(async () => {
    await Promise.all((gateways ?? []).map((gw) => gw.close()));
    await redis?.stop();
    await upstream?.close();
    await closeSql();
  });

  it('keeps exactly one use per day on Postgres alone, and uses Redis again once it is back', async () => {
    const [a, b] = gateways as [TestGateway, TestGateway];
    const early = await makeUser(a);
    const m = marker();

    // Redis up: the repeat is refused by the Redis gate.
    expect((await race(a, early, m)).status).toBe(200);
    let refusedByRedis = stat('refusedByRedis');
    expect((await race(b, early, m)).json).toEqual(LIMIT_1);
    expect(stat('refusedByRedis')).toBe(refusedByRedis + 1);

    // Redis gone: Postgres alone decides, still exactly one use.
    await redis.kill();
    await eventually(() => gateways.every((gw) => gw.services.redis!.client.status !== 'ready'), 5000);
    const during = await makeUser(b);
    const refusedByPostgres = stat('refusedByPostgres');
    const results = await burst(during, m, 20);
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    for (const r of results.filter((x) => x.status !== 200)) expect(r.json).toEqual(LIMIT_1);
    expect(stat('refusedByPostgres')).toBe(refusedByPostgres + 19);
    expect((await race(a, early, m)).json).toEqual(LIMIT_1);
    expect(await usage(during.id)).toBe(1);

    // Redis back, empty, on the same port: the gateways reconnect by themselves.
    await redis.start();
    await eventually(() => gateways.every((gw) => gw.services.redis!.client.status === 'ready'), 10_000, 50);
    const after = await makeUser(a);
    const admitted = await burst(after, m, 10);
    expect(admitted.filter((r) => r.status === 200)).toHaveLength(1);
    // Users counted while Redis was away are refused by Postgres once, then by Redis again.
    for (const user of [early, during]) {
      expect((await race(a, user, m)).json).toEqual(LIMIT_1);
      refusedByRedis = stat('refusedByRedis');
      expect((await race(b, user, m)).json).toEqual(LIMIT_1);
      expect(stat('refusedByRedis')).toBe(refusedByRedis + 1);
    }
    expect(upstream.count(m)).toBe(3);
    expect([await usage(early.id), await usage(during.id), await usage(after.id)]).toEqual([1, 1, 1]);
  });
});
