// CONTRACT §32, Redis: the master of a Sentinel group of the test's own killed (SIGKILL, not
// SENTINEL FAILOVER: nothing tells the clients, the sentinels find out after
// down-after-milliseconds) under two instances configured as docs/production.md shows, loaded as
// the Postgres failover is (counted uses, refresh rotations, registrations, API keys): no 5xx at
// all (Postgres is the authority; Redis is only the fast gate), every counted 200 counted once
// and no more, and both instances on the new master within 5 s of its promotion.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { closeSql, eventually, makeUser, startTestGateway, testServices, usage, type TestGateway } from '../helpers/gateway.js';
import { describeWithRedisServers, productionExampleConfig, requireRedisBinaries, startSentinelGroup, type SentinelGroup } from '../helpers/redisServers.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { startFailoverLoad } from '../helpers/failoverLoad.js';

const role = async (client: { call(...args: string[]): Promise<unknown> }) => String(((await client.call('ROLE')) as unknown[])[0]);

describeWithRedisServers('Redis master killed under Sentinel, under load', () => {
  let group: SentinelGroup;
  let upstream: EchoUpstream;
  let gateways: TestGateway[];
  const prefix = `${testServices!.redisPrefix}sentinel-kill:`;

  beforeAll(async () => {
    requireRedisBinaries();
    group = await startSentinelGroup('mymaster');
    upstream = await startEchoUpstream();
    const config = productionExampleConfig('redis-sentinel', {
      REDIS_SENTINEL_1: group.sentinels[0]!.address,
      REDIS_SENTINEL_2: group.sentinels[1]!.address,
      REDIS_SENTINEL_3: group.sentinels[2]!.address,
    }, { upstream: upstream.url, daily: 100_000, perMinute: 100_000, keyPrefix: prefix });
    config.apiKeys.maxPerOwner = 1000;
    gateways = [await startTestGateway(config), await startTestGateway(config)];
  }, 60_000);
  afterAll(async () => {
    await Promise.allSettled((gateways ?? []).map((gw) => gw.close()));
    await group?.stop();
    await upstream?.close();
    await closeSql();
  });

  it('answers no 5xx, loses and doubles no count, and follows the new master within 5 s', async () => {
    const [a] = gateways as [TestGateway, TestGateway];
    for (const gw of gateways) expect((await gw.get('/readyz')).json).toEqual({ status: 'ok', checks: { postgres: 'ok', redis: 'ok' } });
    const counted = await Promise.all([0, 1, 2, 3].map(() => makeUser(a)));
    const rotating = await Promise.all([0, 1].map(() => makeUser(a)));
    const keyMaker = await makeUser(a, { plan: 'pro' });
    const [oldMaster, replica] = group.servers as [typeof group.servers[0], typeof group.servers[0]];
    expect(await group.master()).toBe(oldMaster);

    const load = startFailoverLoad({ gateways, counted, rotating, keyMaker, route: '/daily' });
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const killedAt = Date.now();
    await oldMaster.kill();
    await eventually(async () => (await role(replica.client).catch(() => '')) === 'master', 30_000, 50);
    const promotedAt = Date.now();
    // Each instance on the new master: connected, its breaker closed, and its writes landing there.
    const followed = await Promise.all(gateways.map(async (gw) => {
      await eventually(async () => gw.services.redis!.usable && (await gw.get('/readyz')).json.checks?.redis === 'ok', 30_000, 50);
      return Date.now() - promotedAt;
    }));
    await new Promise((resolve) => setTimeout(resolve, 2000));
    await load.stop();
    const figures = { killedToPromotedMs: promotedAt - killedAt, followedAfterPromotionMs: followed, requests: load.answers.length };
    console.log(`[failover] redis ${JSON.stringify(figures)}`);

    const expected: Record<string, number[]> = { count: [200], refresh: [200], register: [201], apiKey: [201] };
    expect(load.answers.filter((r) => !expected[r.kind]!.includes(r.status)).slice(0, 5), 'answers other than the expected ones').toEqual([]);
    for (const ms of followed) expect(ms, 'on the new master after its promotion (ms)').toBeLessThanOrEqual(5000);
    // Postgres counted each 200 once: no use lost with the gates, none counted twice.
    await eventually(async () => {
      for (const u of counted) if ((await usage(u.id)).daily_usage !== (load.served.get(u.id) ?? 0)) return false;
      return true;
    }, 5000, 200).catch(() => {});
    for (const u of counted) expect((await usage(u.id)).daily_usage, `user ${u.id}`).toBe(load.served.get(u.id) ?? 0);
    expect(load.refreshAccepted.length).toBe(new Set(load.refreshAccepted).size);
  }, 90_000);

  it('connects again when ioredis gives up because a +switch-master cut an attempt short (the race a killed master makes likely)', async () => {
    // The race, made certain: the failover detector's disconnect() lands while the connector
    // waits for a sentinel's answer, as a +switch-master does when it arrives then. ioredis takes
    // the attempt's "Connection is closed" as final (status end) and never reconnects by itself.
    const gw = gateways[1]!;
    const client = gw.services.redis!.client;
    type Connector = { resolve(endpoint: unknown): Promise<unknown>; disconnect(): void };
    const connector = (client as unknown as { connector: Connector }).connector;
    const resolve = connector.resolve.bind(connector);
    connector.resolve = async (endpoint) => {
      connector.resolve = resolve;
      const answer = await resolve(endpoint);
      connector.disconnect();
      return answer;
    };
    const ended = new Promise((done) => client.once('end', done));
    client.disconnect(true); // a lost connection: ioredis reconnects through the sentinels
    await ended;
    await eventually(async () => gw.services.redis!.usable && (await gw.get('/readyz')).json.checks?.redis === 'ok', 5000, 50);
    expect(gw.logs.some((l) => l.includes('the client gave up reconnecting; connecting again'))).toBe(true);
  });
});
