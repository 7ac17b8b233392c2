// Redis going away under two running gateways (a redis-server of the test's own, stopped and
// started again on the same port): the daily limit holds on Postgres alone, the auth rate limit
// goes on in-process, /readyz reports it (and stays 200), and Redis is used again once it is back, no restart.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { bearer, closeSql, describeWithServices, eventually, makeUser, marker, newEmail, sql, startTwoGateways, testConfig, type TestGateway } from '../helpers/gateway.js';
import { startRedisServer, type RedisServer } from '../helpers/redisServers.js';

describeWithServices('Redis outage', () => {
  let redis: RedisServer;
  let upstream: EchoUpstream;
  let a: TestGateway;
  let b: TestGateway;

  beforeAll(async () => {
    redis = await startRedisServer();
    upstream = await startEchoUpstream();
    [a, b] = await startTwoGateways(testConfig({
      storage: { redis: redis.url, redisKeyPrefix: 'gw:' },
      auth: { rateLimit: { max: 4, window: '1m' } },
      plans: { freeDailyLimit: 2 },
      upstreams: { app: { url: upstream.url } },
      routes: [{ path: '/daily', upstream: 'app', auth: 'required', dailyLimit: true }],
    }));
  });
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await redis?.stop();
    await upstream?.close();
    await closeSql();
  });

  it('keeps every guard in force without Redis and uses Redis again when it returns', async () => {
    expect((await a.get('/readyz')).json).toEqual({ status: 'ok', checks: { postgres: 'ok', redis: 'ok' } });
    // Users made before the outage (2 auth requests each, within the limit of 4), then a clean count.
    const user = await makeUser(a);
    const other = await makeUser(b);
    await redis.flushAll();

    await redis.kill();
    for (const gw of [a, b]) {
      const ready = await gw.get('/readyz');
      // Reported, never a 503: the instance still serves (CONTRACT §25).
      expect(ready.status).toBe(200);
      expect(ready.json).toEqual({ status: 'ok', checks: { postgres: 'ok', redis: 'down' } });
      expect((await gw.get('/healthz')).status).toBe(200);
    }

    // Daily limit (2) on Postgres alone, across both instances: exactly two uses counted.
    const uses = await Promise.all(Array.from({ length: 6 }, (_, i) => (i % 2 ? a : b).get(`/daily/${marker()}`, { headers: bearer(user.access) })));
    expect(uses.map((r) => r.status).sort()).toEqual([200, 200, 429, 429, 429, 429]);
    expect(uses.find((r) => r.status === 429)!.json).toEqual({ error: 'Limite quotidienne atteinte (plan free: 2 courses/jour)', upgrade_url: '/api/v1/subscription/upgrade' });
    expect(await sql('SELECT daily_usage FROM users WHERE id = $1', [user.id])).toEqual([{ daily_usage: 2 }]);

    // Auth rate limit (4) in-process: each instance refuses its fifth login, none goes unlimited.
    for (const gw of [a, b]) {
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++) statuses.push((await gw.post('/api/v1/auth/login', { email: newEmail(), password: 'x' })).status);
      expect(statuses).toEqual([401, 401, 401, 401, 429]);
    }
    const logs = a.logs.join('\n');
    expect(logs).not.toContain('"statusCode":500');

    await redis.start();
    for (const gw of [a, b]) await eventually(async () => (await gw.get('/readyz')).json.checks?.redis === 'ok', 10_000);

    // Redis is the gate again: the next daily use of another user is counted there as well as in Postgres.
    expect((await b.get(`/daily/${marker()}`, { headers: bearer(other.access) })).status).toBe(200);
    expect(await redis.keys('gw:daily:*')).toEqual([expect.stringMatching(new RegExp(`^gw:daily:.*${other.id}`))]);
    // And the rate limit is shared again: four logins in all, across both instances.
    expect((await a.post('/api/v1/auth/login', { email: newEmail(), password: 'x' })).status).toBe(401);
    expect((await b.post('/api/v1/auth/login', { email: newEmail(), password: 'x' })).status).toBe(401);
    expect((await b.post('/api/v1/auth/login', { email: newEmail(), password: 'x' })).status).toBe(401);
    expect((await a.post('/api/v1/auth/login', { email: newEmail(), password: 'x' })).status).toBe(401);
    expect((await b.post('/api/v1/auth/login', { email: newEmail(), password: 'x' })).status).toBe(429);
  });
});
