// A Redis Sentinel group of the test's own (master, replica, three sentinels) under two instances
// configured as docs/production.md shows, forced through SENTINEL FAILOVER under concurrent load:
// no user is admitted past its daily limit, nothing but 200 and 429 is answered, the instances
// move to the new master (gates and per-minute buckets appear there), and an instance left on
// the demoted master by a plain URL says so on /readyz and does not flood its log.
import { setTimeout } from 'node:timers/promises';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { utcDay } from '../../src/time.js';
import {
  bearer, closeSql, eventually, makeUser, marker, startTestGateway, testServices, usage,
  type TestGateway, type TestUser,
} from '../helpers/gateway.js';
import { describeWithRedisServers, productionExampleConfig, requireRedisBinaries, startSentinelGroup, type SentinelGroup } from '../helpers/redisServers.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';

const DAILY = 5;

/** warn and above: what an operator's log shows at the default level. */
const warnings = (gw: TestGateway, from = 0) => gw.logs.slice(from).map((l) => JSON.parse(l) as { level: number; msg: string }).filter((l) => l.level >= 40);

describeWithRedisServers('Redis Sentinel failover', () => {
  let group: SentinelGroup;
  let upstream: EchoUpstream;
  let a: TestGateway;
  let b: TestGateway;
  /** Pointed at the first master by URL: after the failover it is on a replica. */
  let byUrl: TestGateway;
  const prefix = `${testServices!.redisPrefix}sentinel:`;

  beforeAll(async () => {
    requireRedisBinaries();
    group = await startSentinelGroup('mymaster');
    upstream = await startEchoUpstream();
    const config = productionExampleConfig('redis-sentinel', {
      REDIS_SENTINEL_1: group.sentinels[0]!.address,
      REDIS_SENTINEL_2: group.sentinels[1]!.address,
      REDIS_SENTINEL_3: group.sentinels[2]!.address,
    }, { upstream: upstream.url, daily: DAILY, perMinute: 3, keyPrefix: prefix });
    a = await startTestGateway(config);
    b = await startTestGateway(config);
    byUrl = await startTestGateway({ ...config, storage: { ...config.storage, redis: group.servers[0]!.url } });
  });
  afterAll(async () => {
    await Promise.allSettled([a, b, byUrl].map((gw) => gw?.close()));
    await group?.stop();
    await upstream?.close();
    await closeSql();
  });

  it('admits no user past its limit across the failover, moves to the new master and reports the old one honestly', async () => {
    for (const gw of [a, b, byUrl]) expect((await gw.get('/readyz')).json).toEqual({ status: 'ok', checks: { postgres: 'ok', redis: 'ok' } });
    const oldMaster = await group.master();
    expect(oldMaster).toBe(group.servers[0]);

    // Three sets of users: asked before, during and after the failover, each far past its limit.
    const sets = await Promise.all([0, 1, 2].map(() => Promise.all(Array.from({ length: 4 }, (_, i) => makeUser(i % 2 ? a : b)))));
    const statuses = new Map<number, number[]>();
    let phase = 0;
    let stopped = false;
    let n = 0;
    const worker = async () => {
      while (!stopped) {
        const users = sets[phase]!;
        const user = users[n++ % users.length]!;
        const gw = [a, b, byUrl][n % 3]!;
        const res = await gw.get(`/daily/${marker()}`, { headers: bearer(user.access) });
        statuses.set(user.id, [...(statuses.get(user.id) ?? []), res.status]);
        await setTimeout(5);
      }
    };
    const load = Promise.all(Array.from({ length: 4 }, worker));
    await eventually(() => (statuses.get(sets[0]![0]!.id)?.length ?? 0) > DAILY * 2, 10_000);
    const logsBefore = [a, b, byUrl].map((gw) => gw.logs.length);

    phase = 1;
    const failoverAt = Date.now();
    const newMaster = await group.failover();
    expect(newMaster).toBe(group.servers[1]);

    // The instances on the sentinels move to the new master and use it again; the one on the old
    // master's URL reports Redis read-only (its node refuses writes), and stays ready.
    for (const gw of [a, b]) {
      await eventually(async () => (await gw.get('/readyz')).status === 200 && gw.services.redis!.usable, 15_000, 50);
    }
    await eventually(async () => (await byUrl.get('/readyz')).json.checks?.redis === 'readonly', 5000);
    phase = 2;
    await eventually(() => sets[2]!.every((user) => (statuses.get(user.id)?.length ?? 0) > DAILY * 2), 15_000);
    stopped = true;
    await load;
    const seconds = (Date.now() - failoverAt) / 1000;

    // Exactly the limit for every user, whether asked before, during or after: 0 over-admissions.
    for (const user of sets.flat()) {
      const mine = statuses.get(user.id) ?? [];
      expect(new Set(mine), `user ${user.id}`).toEqual(new Set([200, 429]));
      expect(mine.filter((s) => s === 200), `user ${user.id}`).toHaveLength(DAILY);
      expect((await usage(user.id)).daily_usage).toBe(DAILY);
    }

    const ready = await byUrl.get('/readyz');
    expect(ready.status).toBe(200);
    expect(ready.json).toEqual({ status: 'ok', checks: { postgres: 'ok', redis: 'readonly' } });

    // Redis is used again: a new user's gate and bucket are on the new master, and a repeat is
    // refused by the gate there.
    const fresh: TestUser = await makeUser(a);
    const gate = `${prefix}daily:${fresh.id}:${utcDay(new Date())}`;
    for (let i = 0; i < DAILY; i++) expect((await (i % 2 ? a : b).get(`/daily/${marker()}`, { headers: bearer(fresh.access) })).status).toBe(200);
    expect(await newMaster.client.get(gate)).toBe(String(DAILY));
    const refusedByRedis = b.services.daily.stats.refusedByRedis;
    expect((await b.get(`/daily/${marker()}`, { headers: bearer(fresh.access) })).status).toBe(429);
    expect(b.services.daily.stats.refusedByRedis).toBe(refusedByRedis + 1);
    expect((await a.get(`/minute/${marker()}`, { headers: bearer(fresh.access) })).status).toBe(200);
    expect(await newMaster.client.exists(`${prefix}rate:${fresh.id}`)).toBe(1);

    // The logs tell the story in a few lines, not one per request: the instance left on the
    // demoted master answered hundreds of requests there.
    const requests = [...statuses.values()].reduce((sum, s) => sum + s.length, 0);
    expect(requests).toBeGreaterThan(300);
    const [warnA, warnB, warnByUrl] = [a, b, byUrl].map((gw, i) => warnings(gw, logsBefore[i]));
    expect(warnA!.length + warnB!.length, JSON.stringify([...warnA!, ...warnB!].map((l) => l.msg))).toBeLessThanOrEqual(8);
    expect(warnByUrl!.length / Math.max(seconds, 1), JSON.stringify(warnByUrl!.map((l) => l.msg))).toBeLessThanOrEqual(2);
  });

  it('leaves nothing open on the sentinels once closed (the failover subscriptions included)', async () => {
    const subscribed = async () => (await Promise.all(group.sentinels.map(async (s) => String(await s.client.call('CLIENT', 'LIST')))))
      .join('\n').split('\n').filter((line) => / sub=[1-9]/.test(line));
    expect(await subscribed()).not.toEqual([]);
    await Promise.all([a.close(), b.close()]);
    await eventually(async () => (await subscribed()).length === 0, 5000);
  });
});
