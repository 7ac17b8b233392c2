// /readyz tells the truth (CONTRACT §25): Redis down or read-only is reported in `checks` and the
// instance stays in the pool (200), on the public and the admin listener, while the guarded routes
// keep being served; a readiness that failed on Redis would drop every pod at once during an
// outage. Redis servers of the test's own: one killed, one started as a replica (read-only).
// Postgres down (503 unavailable) is in postgresOutage.test.ts, draining in shutdown.test.ts, no
// Redis configured ("off") in health.test.ts.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { bearer, closeSql, makeUser, marker, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';
import { sparePort } from '../helpers/ports.js';
import { request } from '../helpers/http.js';
import { describeWithRedisServers, requireRedisBinaries, startRedisServer, type RedisServer } from '../helpers/redisServers.js';

describeWithRedisServers('/readyz while Redis is down or read-only', () => {
  let upstream: EchoUpstream;
  let master: RedisServer;
  let replica: RedisServer;
  const gateways: TestGateway[] = [];

  const start = async (redisUrl: string): Promise<TestGateway> => {
    const gw = await startTestGateway(testConfig({
      admin: { port: await sparePort() },
      storage: { redis: redisUrl, redisKeyPrefix: `gw:${marker()}:` },
      plans: { freeDailyLimit: 5 },
      upstreams: { app: { url: upstream.url } },
      routes: [{ path: '/daily', upstream: 'app', auth: 'required', dailyLimit: true }],
    }));
    gateways.push(gw);
    return gw;
  };

  /** The same body on both listeners. */
  const readyBoth = async (gw: TestGateway) => Promise.all([gw.url, gw.adminUrl!].map((base) => request(base, 'GET', '/readyz')));

  beforeAll(async () => {
    requireRedisBinaries();
    upstream = await startEchoUpstream();
    master = await startRedisServer();
    replica = await startRedisServer([`replicaof 127.0.0.1 ${master.port}`, 'replica-read-only yes']);
  });
  afterAll(async () => {
    await Promise.all(gateways.map((gw) => gw.close()));
    await Promise.allSettled([master?.stop(), replica?.stop()]);
    await upstream?.close();
    await closeSql();
  });

  it('Redis down: 200 with checks.redis "down" on both listeners, and the guarded route still served', async () => {
    const gw = await start(master.url);
    const user = await makeUser(gw);
    for (const ready of await readyBoth(gw)) {
      expect(ready.status).toBe(200);
      expect(ready.json).toEqual({ status: 'ok', checks: { postgres: 'ok', redis: 'ok' } });
    }
    await master.kill();
    for (const ready of await readyBoth(gw)) {
      expect(ready.status).toBe(200);
      expect(ready.json).toEqual({ status: 'ok', checks: { postgres: 'ok', redis: 'down' } });
    }
    const m = marker();
    expect((await gw.get(`/daily/${m}`, { headers: bearer(user.access) })).status).toBe(200);
    expect(upstream.last(m)!.headers['x-user-id']).toBe(String(user.id));
    await master.start();
  });

  it('Redis read-only (a replica): 200 with checks.redis "readonly" on both listeners, and the guarded route still served', async () => {
    const gw = await start(replica.url);
    const user = await makeUser(gw);
    for (const ready of await readyBoth(gw)) {
      expect(ready.status).toBe(200);
      expect(ready.json).toEqual({ status: 'ok', checks: { postgres: 'ok', redis: 'readonly' } });
    }
    const m = marker();
    expect((await gw.get(`/daily/${m}`, { headers: bearer(user.access) })).status).toBe(200);
    expect(upstream.last(m)!.headers['x-user-id']).toBe(String(user.id));
  });
});
