// A 3-master Redis Cluster of the test's own (redis-cli --cluster create) under two instances
// configured as docs/production.md shows: the daily quota exact over both, one per-minute budget
// for both, the day's stale gates dropped on every master (a SCAN sees one node), and not one
// warning (no MOVED, no CROSSSLOT). An instance given one node by URL says Redis is down instead
// of using a node that answers MOVED for most keys.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config/schema.js';
import { utcDay } from '../../src/time.js';
import {
  bearer, closeSql, eventually, makeUser, marker, newEmail, sql, startTestGateway, testServices, usage,
  type TestGateway, type TestUser,
} from '../helpers/gateway.js';
import { describeWithRedisServers, productionExampleConfig, requireRedisBinaries, startRedisCluster, type RedisClusterGroup } from '../helpers/redisServers.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';

const DAILY = 3;
const PER_MINUTE = 4;
/**
 * The warnings a gateway logged about Redis. Only those: the run's database is shared with other
 * test files, whose rows give these gateways other work to warn about (webhooks of their users
 * that cannot be delivered, stored emails that are not one mailbox), none of it Redis's doing.
 */
const warnings = (gw: TestGateway) => gw.logs.map((l) => JSON.parse(l) as { level: number; msg: string })
  .filter((l) => l.level >= 40 && /redis|cluster|MOVED|CROSSSLOT/i.test(JSON.stringify(l)));
const daily = (gw: TestGateway, user: TestUser) => gw.get(`/daily/${marker()}`, { headers: bearer(user.access) });
const statusesOf = (responses: Array<{ status: number }>) => responses.map((r) => r.status).sort();

describeWithRedisServers('Redis Cluster', () => {
  let cluster: RedisClusterGroup;
  let upstream: EchoUpstream;
  let config: Config;
  const running: TestGateway[] = [];
  const prefix = `${testServices!.redisPrefix}cluster:`;
  const start = async (c = config) => {
    const gw = await startTestGateway(c);
    running.push(gw);
    return gw;
  };

  beforeAll(async () => {
    requireRedisBinaries();
    cluster = await startRedisCluster();
    upstream = await startEchoUpstream();
    config = productionExampleConfig('redis-cluster', {
      REDIS_NODE_1: cluster.addresses[0]!, REDIS_NODE_2: cluster.addresses[1]!, REDIS_NODE_3: cluster.addresses[2]!,
    }, { upstream: upstream.url, daily: DAILY, perMinute: PER_MINUTE, keyPrefix: prefix });
  });
  afterAll(async () => {
    await Promise.allSettled(running.map((gw) => gw.close()));
    await cluster?.stop();
    await upstream?.close();
    await closeSql();
  });

  describe('two instances on it', () => {
    let a: TestGateway;
    let b: TestGateway;
    beforeAll(async () => {
      [a, b] = [await start(), await start()];
    });
    // Closed as soon as done: each holds Postgres connections, and this machine's are shared.
    afterAll(async () => {
      await Promise.all([a.close(), b.close()]);
    });

    it('admits exactly the daily quota out of 20 concurrent requests, then refuses from the gate', async () => {
      expect((await a.get('/readyz')).json).toEqual({ status: 'ok', checks: { postgres: 'ok', redis: 'ok' } });
      const user = await makeUser(a);
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => daily(i % 2 ? a : b, user)));
      expect(results.filter((r) => r.status === 200)).toHaveLength(DAILY);
      expect(results.filter((r) => r.status === 429)).toHaveLength(20 - DAILY);
      expect((await usage(user.id)).daily_usage).toBe(DAILY);
      const refusedByRedis = b.services.daily.stats.refusedByRedis;
      expect((await daily(b, user)).status).toBe(429);
      expect(b.services.daily.stats.refusedByRedis).toBe(refusedByRedis + 1);
      expect((await cluster.keysPerNode(`${prefix}daily:${user.id}:*`)).flat()).toHaveLength(1);
    });

    it('shares one per-minute budget between the instances', async () => {
      const user = await makeUser(b);
      // In-process buckets would admit PER_MINUTE on each instance.
      const results = await Promise.all(Array.from({ length: 3 * PER_MINUTE }, (_, i) => (i % 2 ? a : b).get(`/minute/${marker()}`, { headers: bearer(user.access) })));
      expect(results.filter((r) => r.status === 200)).toHaveLength(PER_MINUTE);
      expect((await cluster.keysPerNode(`${prefix}rate:${user.id}`)).flat()).toEqual([`${prefix}rate:${user.id}`]);
    });

    it('drops the stale gates of every master when the instances start again', async () => {
      // One user whose gate lives on each master: ids picked by their key's slot (sequential ids
      // hash to few slots), the accounts made by SQL as an operator would, under a known password.
      const model = await makeUser(a);
      const [{ password_hash: hash }] = (await sql<{ password_hash: string }>('SELECT password_hash FROM users WHERE id = $1', [model.id])) as [{ password_hash: string }];
      const day = utcDay(new Date());
      const users: TestUser[] = [];
      for (let id = 10_000_000 + Math.floor(Math.random() * 1_000_000); users.length < cluster.nodes.length; id++) {
        if ((await cluster.nodeOf(`${prefix}daily:${id}:${day}`)) !== users.length) continue;
        const email = newEmail();
        await sql('INSERT INTO users (id, email, password_hash) VALUES ($1, $2, $3)', [id, email, hash]);
        await sql("INSERT INTO subscriptions (user_id, plan) VALUES ($1, 'free')", [id]);
        const login = await a.post('/api/v1/auth/login', { email, password: model.password });
        expect(login.status).toBe(200);
        users.push({ id, email, password: model.password, access: login.json.access_token, refresh: login.json.refresh_token });
      }
      // Each refused by its gate after using its day.
      for (const [i, user] of users.entries()) {
        for (let n = 0; n < DAILY; n++) expect((await daily(i % 2 ? a : b, user)).status).toBe(200);
        expect((await daily(a, user)).status).toBe(429);
      }
      const gates = await cluster.keysPerNode(`${prefix}daily:1???????:*`);
      expect(gates.map((keys) => keys.length)).toEqual([1, 1, 1]);

      // Their counts lowered by SQL while no instance listens: the announcement is missed, and
      // the gates on all three masters would refuse them all day.
      await Promise.all([a.close(), b.close()]);
      await sql('UPDATE users SET daily_usage = 0 WHERE id = ANY($1)', [users.map((u) => u.id)]);
      [a, b] = [await start(), await start()];

      // Checked against Postgres on every master when the instances start: all three dropped.
      await eventually(async () => (await cluster.keysPerNode(`${prefix}daily:1???????:*`)).flat().length === 0, 5000);
      for (const [i, user] of users.entries()) expect((await daily(i % 2 ? a : b, user)).status, `user ${user.id}`).toBe(200);
    });

    it('logged no warning: no MOVED, no CROSSSLOT', () => {
      // A command slower than redisTimeout on this shared machine is not the Cluster's doing.
      for (const gw of running) expect(warnings(gw).filter((l) => !JSON.stringify(l).includes('did not answer within'))).toEqual([]);
    });
  });

  it('does not use one node given by URL, and says so', async () => {
    const node = cluster.nodes[0]!;
    const gw = await start({ ...config, storage: { ...config.storage, redis: node.url } });
    // Reported, never a 503 (CONTRACT §25): the guards hold on Postgres alone.
    const ready = await gw.get('/readyz');
    expect(ready.status).toBe(200);
    expect(ready.json).toEqual({ status: 'ok', checks: { postgres: 'ok', redis: 'down' } });
    // Exact on Postgres alone, with one line saying what is wrong, not one per request.
    const user = await makeUser(gw);
    const results = await Promise.all(Array.from({ length: 20 }, () => daily(gw, user)));
    expect(statusesOf(results)).toEqual([...Array(DAILY).fill(200), ...Array(20 - DAILY).fill(429)]);
    expect(warnings(gw).map((l) => l.msg)).toEqual([expect.stringContaining('names one node of a Redis Cluster')]);
    await gw.close();
  });

  // Last: it takes a master away for good.
  it('reports a Cluster that lost a master (CLUSTERDOWN) as down, and stays exact on Postgres', async () => {
    const gw = await start();
    const user = await makeUser(gw);
    expect((await gw.get('/readyz')).status).toBe(200);
    await cluster.nodes[2]!.stop();
    // Once the other masters mark it failed (cluster-node-timeout), every key answers CLUSTERDOWN.
    await eventually(async () => (await cluster.nodes[0]!.client.call('CLUSTER', 'INFO') as string).includes('cluster_state:fail'), 15_000, 100);
    const ready = await gw.get('/readyz');
    expect(ready.status).toBe(200);
    expect(ready.json).toEqual({ status: 'ok', checks: { postgres: 'ok', redis: 'down' } });
    const from = gw.logs.length;
    const results = await Promise.all(Array.from({ length: 20 }, () => daily(gw, user)));
    expect(statusesOf(results)).toEqual([...Array(DAILY).fill(200), ...Array(20 - DAILY).fill(429)]);
    expect((await usage(user.id)).daily_usage).toBe(DAILY);
    const lines = gw.logs.slice(from).map((l) => JSON.parse(l) as { level: number; msg: string }).filter((l) => l.level >= 40);
    expect(lines.length, JSON.stringify(lines.map((l) => l.msg))).toBeLessThanOrEqual(3);
  });
});
