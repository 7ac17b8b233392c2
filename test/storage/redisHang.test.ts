// A Redis that hangs (kill -STOP: connections stay open, nothing is answered) under a running
// gateway: a refused daily request and a token refresh each wait storage.redisTimeout at most,
// after a few failures requests stop sending Redis anything (counted by Redis itself once it
// runs again), the log says so in a few lines, and Redis is used again after kill -CONT, at once
// when /readyz has seen it answer.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bearer, closeSql, eventually, makeUser, marker, startTestGateway, testConfig, testServices, type TestGateway } from '../helpers/gateway.js';
import { describeWithRedisServers, requireRedisBinaries, startRedisServer, type RedisServer } from '../helpers/redisServers.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';

const REDIS_TIMEOUT_MS = 100;
// What a request may take beyond the wait for Redis on this shared machine: its own work (a
// token rotation in Postgres, a proxied request). The client's own timeout, what a hung Redis
// cost before, is 1000 ms.
const MARGIN_MS = 300;
const LIMIT_1 = { error: 'Limite quotidienne atteinte (plan free: 1 course/jour)', upgrade_url: '/api/v1/subscription/upgrade' };

/** Commands Redis has executed since CONFIG RESETSTAT, by name. */
async function commandCounts(server: RedisServer): Promise<Record<string, number>> {
  const info = await server.client.info('commandstats');
  return Object.fromEntries([...info.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)].map(([, name, calls]) => [name!, Number(calls)]));
}

describeWithRedisServers('a hung Redis', () => {
  let server: RedisServer;
  let upstream: EchoUpstream;
  let gw: TestGateway;

  beforeAll(async () => {
    requireRedisBinaries();
    server = await startRedisServer();
    upstream = await startEchoUpstream();
    gw = await startTestGateway(testConfig({
      storage: { redis: server.url, redisKeyPrefix: `${testServices!.redisPrefix}hang:`, redisTimeout: `${REDIS_TIMEOUT_MS}ms` },
      auth: { rateLimit: { max: 1000, window: '1m' } },
      plans: { freeDailyLimit: 1 },
      upstreams: { app: { url: upstream.url } },
      routes: [{ path: '/daily', upstream: 'app', auth: 'required', dailyLimit: true }],
    }), { logLevel: 'info' });
  });
  afterAll(async () => {
    server?.resume();
    await gw?.close();
    await server?.stop();
    await upstream?.close();
    await closeSql();
  });

  it('costs a request redisTimeout at most, then nothing, and is used again once it answers', async () => {
    const user = await makeUser(gw);
    expect((await gw.get(`/daily/${marker()}`, { headers: bearer(user.access) })).status).toBe(200);
    const refusedByRedis = gw.services.daily.stats.refusedByRedis;
    expect((await gw.get(`/daily/${marker()}`, { headers: bearer(user.access) })).json).toEqual(LIMIT_1);
    expect(gw.services.daily.stats.refusedByRedis).toBe(refusedByRedis + 1);

    await server.client.call('CONFIG', 'RESETSTAT');
    const logsBefore = gw.logs.length;
    server.pause();
    const pausedAt = Date.now();
    let refresh = user.refresh;
    const took: Array<{ what: string; ms: number }> = [];
    for (let i = 0; i < 10; i++) {
      let t = performance.now();
      const refused = await gw.get(`/daily/${marker()}`, { headers: bearer(user.access) });
      took.push({ what: `refused daily request ${i}`, ms: performance.now() - t });
      expect(refused.json).toEqual(LIMIT_1);
      t = performance.now();
      const rotated = await gw.post('/api/v1/auth/refresh', { refresh_token: refresh });
      took.push({ what: `refresh ${i}`, ms: performance.now() - t });
      expect(rotated.status).toBe(200);
      refresh = rotated.json.refresh_token;
    }
    const ready = await gw.get('/readyz');
    expect(ready.json).toEqual({ status: 'ok', checks: { postgres: 'ok', redis: 'down' } });
    const pausedSeconds = (Date.now() - pausedAt) / 1000;
    server.resume();

    // Each at most the wait for Redis and the request's own work.
    expect(took.filter((t) => t.ms > REDIS_TIMEOUT_MS + MARGIN_MS)).toEqual([]);
    // Redis, running again, executes what it was sent meanwhile: the few commands that opened the
    // breaker (the gate's INCR and the rate limit's, both scripts), then one write probe per
    // second of cool-down; the 20 requests would have sent 20 scripts.
    const counts = await commandCounts(server);
    expect((counts.eval ?? 0) + (counts.evalsha ?? 0)).toBeLessThanOrEqual(3);
    expect(counts.set ?? 0).toBeLessThanOrEqual(Math.ceil(pausedSeconds) + 1);

    // A few lines for the whole pause, not one per request.
    const warnings = gw.logs.slice(logsBefore).map((l) => JSON.parse(l) as { level: number; msg: string }).filter((l) => l.level >= 40);
    expect(warnings.length, JSON.stringify(warnings.map((l) => l.msg))).toBeLessThanOrEqual(3);

    // The breaker's probe finds Redis again: the gate refuses the user from Redis once more.
    await eventually(async () => {
      const before = gw.services.daily.stats.refusedByRedis;
      await gw.get(`/daily/${marker()}`, { headers: bearer(user.access) });
      return gw.services.daily.stats.refusedByRedis === before + 1;
    }, 5000, 100);
    expect((await gw.get('/readyz')).status).toBe(200);
    expect(gw.logs.slice(logsBefore).some((l) => l.includes('Redis is back: the guards use it again'))).toBe(true);
  });

  it('is used again from the moment /readyz says "ok", not a cool-down later', async () => {
    const user = await makeUser(gw);
    expect((await gw.get(`/daily/${marker()}`, { headers: bearer(user.access) })).status).toBe(200);
    server.pause();
    // A few requests that wait for Redis in vain open the breaker.
    for (let i = 0; i < 3; i++) expect((await gw.get(`/daily/${marker()}`, { headers: bearer(user.access) })).json).toEqual(LIMIT_1);
    server.resume();
    // Well within the breaker's one-second cool-down: readiness's own write closes it.
    expect((await gw.get('/readyz')).json).toEqual({ status: 'ok', checks: { postgres: 'ok', redis: 'ok' } });
    const before = gw.services.daily.stats.refusedByRedis;
    expect((await gw.get(`/daily/${marker()}`, { headers: bearer(user.access) })).json).toEqual(LIMIT_1);
    expect(gw.services.daily.stats.refusedByRedis).toBe(before + 1);
  });
});
