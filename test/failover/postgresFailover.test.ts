// CONTRACT §32 on a real failover: pg_auto_failover (a monitor, a primary and a secondary of the
// test's own, helpers/pgAutoFailover.ts) under two instances configured with the formation's
// multi-host URI as `pg_autoctl show uri` prints it, under load (counted uses, refresh-token
// rotations, registrations that send operator hooks, API keys that send user webhooks, a plan
// change made during the switch). First a planned switchover, then the primary lost: its
// pg_autoctl and its Postgres killed together. After each: nothing but the documented 503 besides
// the expected answers, none slower than storage.queryTimeout, both instances ready within 10 s
// of the new primary taking writes, every counted 200 counted exactly once (counted − served ≤
// the uses in doubt of /metrics), no refresh token accepted twice, every hook and webhook
// delivered, the plan change seen on every instance.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { buildAdminApp } from '../../src/admin/app.js';
import { eventually, makeUser, marker, bearer, startTestGateway, testConfig, ownRedisPrefix, testServices, ADMIN_KEY, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { receiverCertificate, registerWebhook, startReceiver, type Receiver } from '../helpers/webhookReceiver.js';
import { newHookSecret } from '../helpers/hookReceiver.js';
import { request } from '../helpers/http.js';
import { hasPgAutoFailover, nodeQuery, startAutoFailover, synchronous, type AutoFailover, type FormationEvent, type FormationNode } from '../helpers/pgAutoFailover.js';
import { startFailoverLoad, type Answer, type FailoverLoad } from '../helpers/failoverLoad.js';
import { startCommitWitness } from '../helpers/commitWitness.js';

const QUERY_TIMEOUT_MS = 5000;
const UNAVAILABLE = { error: 'Service temporairement indisponible' };
// Under REQUIRE_SERVICES=1 (CI) a machine without pg_autoctl fails here rather than skipping.
const describeWithCluster = (hasPgAutoFailover || process.env.REQUIRE_SERVICES === '1') && testServices ? describe : describe.skip;

/** Answers by kind and status, e.g. { 'count 200': 812, 'count 503': 9 }. */
function tally(answers: readonly Answer[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const a of answers) out[`${a.kind} ${a.status}`] = (out[`${a.kind} ${a.status}`] ?? 0) + 1;
  return out;
}

describeWithCluster('Postgres failover under load (pg_auto_failover)', () => {
  let cluster: AutoFailover;
  let upstream: EchoUpstream;
  let receiver: Receiver;
  let gateways: TestGateway[];
  let adminApp: FastifyInstance;
  let adminUrl: string;
  const figures: Record<string, unknown>[] = [];

  beforeAll(async () => {
    cluster = await startAutoFailover();
    upstream = await startEchoUpstream();
    receiver = await startReceiver(receiverCertificate());
    const config = testConfig({
      storage: { postgres: cluster.uri, poolSize: 5, queryTimeout: `${QUERY_TIMEOUT_MS}ms`, redisKeyPrefix: ownRedisPrefix('pgaf') },
      plans: { limits: { free: { daily: 1_000_000 }, pro: { daily: 2_000_000 } } },
      upstreams: { app: { url: upstream.url } },
      routes: [{ path: '/count', upstream: 'app', auth: 'required', dailyLimit: true }],
      apiKeys: { maxPerOwner: 1000 },
      hooks: { url: receiver.url, secrets: [newHookSecret()], allowPrivateNetworks: true },
      webhooks: { retries: 8, timeout: '3s' },
    });
    gateways = [await startTestGateway(config), await startTestGateway(config)];
    adminApp = await buildAdminApp(gateways[0]!.services);
    adminUrl = await adminApp.listen({ host: '127.0.0.1', port: 0 });
  }, 180_000);

  afterAll(async () => {
    await adminApp?.close();
    await Promise.allSettled((gateways ?? []).map((gw) => gw.close()));
    await receiver?.close();
    await upstream?.close();
    await cluster?.stop();
    // The figures bench/failover.mjs prints, for a run of the file alone too.
    if (figures.length) console.log(`[failover] ${JSON.stringify(figures)}`);
  }, 60_000);

  /** A statement on whichever node takes writes now. */
  const primarySql = async <T>(text: string, params: unknown[] = []): Promise<T[]> => nodeQuery<T>((await cluster.primary()).port, 'app', text, params);

  /** The counted users' counts as each live node has them, and whether it is a standby, for a failure's message. */
  const countsOnEachNode = async (users: TestUser[]) => Promise.all(cluster.nodes.filter((n) => n.alive).map(async (node) => {
    try {
      const [row] = await nodeQuery<{ standby: boolean; counts: string }>(node.port, 'app',
        "SELECT pg_is_in_recovery() AS standby, coalesce(string_agg(id || ':' || daily_usage, ' ' ORDER BY id), '') AS counts FROM users WHERE id = ANY($1::int[])",
        [users.map((u) => u.id)]);
      return { node: node.name, ...row };
    } catch (err) {
      return { node: node.name, error: (err as Error).message };
    }
  }));

  const metric = async (gw: TestGateway, name: string) => Number(new RegExp(`^${name} (\\d+)`, 'm').exec(await gw.services.metrics.registry.metrics())?.[1] ?? 0);

  /** Both instances ready, and a counted use of `user` answered 200 on each: the time (Date.now()). */
  const readyAgain = async (user: TestUser): Promise<number> => {
    await eventually(async () => {
      for (const gw of gateways) {
        if ((await gw.get('/readyz')).status !== 200) return false;
        if ((await gw.get(`/count/${marker()}`, { headers: bearer(user.access) })).status !== 200) return false;
      }
      return true;
    }, 30_000, 50);
    return Date.now();
  };

  /** The monitor's events since `from`, one line each, for a failure's message. */
  const eventLines = (events: FormationEvent[], from: number) => events.filter((e) => e.at >= from)
    .map((e) => `${new Date(e.at).toISOString().slice(11, 23)} ${e.node} ${e.reported} → ${e.goal}: ${e.description}`).join('\n');

  async function underLoad(name: string, fail: (primary: FormationNode) => Promise<void>): Promise<void> {
    const [a] = gateways as [TestGateway, TestGateway];
    // CONTRACT §32's counts hold under synchronous replication: a primary and a secondary, each
    // scenario from there. After a switchover the new primary runs alone (wait_primary, whose
    // commits no standby confirms) until the old one has rejoined, which the next scenario must
    // not start before.
    await cluster.steady();
    const steadyAt = Date.now();
    const counted = await Promise.all([0, 1, 2, 3].map(() => makeUser(a)));
    const rotating = await Promise.all([0, 1].map(() => makeUser(a)));
    const keyMaker = await makeUser(a, { plan: 'pro' }); // webhooks are the pro plan's
    const planned = await makeUser(a);
    const prober = await makeUser(a); // readiness probes count uses too: not on a user whose count is compared
    const webhookSecret = await registerWebhook(a, keyMaker, receiver.url.replace('/hook', `/user-${keyMaker.id}`));
    expect(webhookSecret).toMatch(/^whsec_/);
    const inDoubtBefore = await Promise.all(gateways.map((gw) => metric(gw, 'gateway_quota_uses_in_doubt_total')));

    const witness = await startCommitWitness(cluster, name);
    const load: FailoverLoad = startFailoverLoad({ gateways, counted, rotating, keyMaker, route: '/count' });
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const old = await cluster.primary();
    const replicationAtSwitch = await cluster.replication(old);
    const failedAt = Date.now();
    const switched = fail(old);
    // The plan change is made during the switch, retried as a client would until it is taken.
    const planChange = (async () => {
      for (;;) {
        const res = await request(adminUrl, 'PUT', `/admin/v1/users/${planned.id}/plan`, { headers: bearer(ADMIN_KEY), json: { plan: 'pro' } }).catch(() => undefined);
        if (res?.status === 200) return Date.now();
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    })();
    const { at: primaryAt } = await cluster.newPrimary(old);
    // Measured from there, while pg_autoctl may still be rejoining the old primary as a secondary.
    const readyAt = await readyAgain(prober);
    await switched;
    await planChange;
    // The plan change is seen on every instance (x-user-plan, as the upstream reads it).
    for (const gw of gateways) {
      await eventually(async () => {
        const m = marker();
        await gw.get(`/count/${m}`, { headers: bearer(planned.access) });
        return upstream.last(m)?.headers['x-user-plan'] === 'pro';
      }, 5000, 50);
    }
    await new Promise((resolve) => setTimeout(resolve, 2000));
    await load.stop();
    await witness.stop();

    const unavailable = load.answers.filter((r) => r.status === 503);
    const during = unavailable.map((r) => r.at);
    const figure: Record<string, unknown> = {
      scenario: name, requests: load.answers.length, unavailable: unavailable.length,
      unavailableWindowMs: during.length ? Math.max(...during) - Math.min(...during) : 0,
      newPrimaryAfterMs: primaryAt - failedAt, readyAfterNewPrimaryMs: readyAt - primaryAt,
      slowestMs: Math.max(...load.answers.map((r) => r.ms)), statuses: tally(load.answers),
      refreshRotations: load.refreshAccepted.length, hooks: load.registered.length, webhooks: load.keysCreated.length,
    };
    figures.push(figure);

    // Only the documented 503 besides the expected answers, and none slower than queryTimeout.
    const expected: Record<string, number[]> = { count: [200], refresh: [200, 401], register: [201], apiKey: [201] };
    const unexpected = load.answers.filter((r) => !expected[r.kind]!.includes(r.status) && r.status !== 503);
    expect(unexpected.slice(0, 5), 'answers other than the expected ones and 503').toEqual([]);
    for (const r of unavailable) expect(JSON.parse(r.body)).toEqual(UNAVAILABLE);
    const slowest = Math.max(...load.answers.map((r) => r.ms));
    expect(slowest, 'the slowest answer (ms)').toBeLessThan(QUERY_TIMEOUT_MS);
    expect(readyAt - primaryAt, 'ready after the new primary took writes (ms)').toBeLessThanOrEqual(10_000);

    // Every counted 200 counted once: the blocks held through the switch are handed back.
    const inDoubtUses = (await Promise.all(gateways.map((gw) => metric(gw, 'gateway_quota_uses_in_doubt_total')))).reduce((s, v, i) => s + v - inDoubtBefore[i]!, 0);
    const inDoubtCommits = (await Promise.all(gateways.map((gw) => metric(gw, 'gateway_storage_in_doubt_commits_total')))).reduce((s, v) => s + v, 0);
    const compare = async () => {
      const rows = await primarySql<{ id: number; daily_usage: number }>('SELECT id, daily_usage FROM users WHERE id = ANY($1::int[])', [counted.map((u) => u.id)]);
      return rows.map((r) => ({ id: r.id, counted: r.daily_usage, served: load.served.get(r.id) ?? 0 }));
    };
    // The blocks held when the load stopped go back at the next sweeps (every second, retried
    // until Postgres answers): only a block in doubt may stay counted.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    await eventually(async () => (await compare()).reduce((s, c) => s + c.counted - c.served, 0) <= inDoubtUses, 8000, 250).catch(() => {});
    const counts = await compare();
    const lost = await witness.lost();
    Object.assign(figure, {
      counted: counts.reduce((s, c) => s + c.counted, 0), served: counts.reduce((s, c) => s + c.served, 0), inDoubtCommits, inDoubtUses,
      witness: { acknowledged: witness.acknowledged.size, unsure: witness.unsure, lost: lost.size }, replicationAtSwitch,
    });
    // The precondition first: the old primary answered every commit of the load synchronously, so
    // a count that differs is the gateway's. pg_auto_failover puts a primary whose secondary it
    // takes for lost in wait_primary, whose commits no standby confirms; and the witness
    // (helpers/commitWitness.ts) checks, outside the gateway, that no acknowledged commit was lost.
    // (Runs in CI served up to 1,939 uses the new primary did not have: a failure prints each
    // user's figures, each node's counts, each instance's tallies and the monitor's events.)
    const events = await cluster.events();
    const history = eventLines(events, steadyAt);
    const perUser = counts.map((c) => `user ${c.id}: served ${c.served}, counted ${c.counted}`).join('; ');
    const told = `${perUser}; counted − served ≤ in doubt (${inDoubtUses}); ${JSON.stringify(figure)}; on each node: ${JSON.stringify(await countsOnEachNode(counted))}`
      + `; each instance's daily limiter: ${JSON.stringify(gateways.map((gw) => gw.services.daily.stats))}; the monitor's events:\n${history}`;
    const asynchronous = events.filter((e) => e.node === old.name && e.goal === 'wait_primary' && e.at >= steadyAt && e.at <= failedAt);
    expect(asynchronous.map((e) => e.description), `the old primary stayed synchronous from the steady state to the switch; ${told}`).toEqual([]);
    expect(synchronous(replicationAtSwitch), `the old primary replicated synchronously when the switch began; ${told}`).toBe(true);
    const lostAt = [...lost].slice(0, 10).map(([seq, node]) => `${seq} on ${node}`).join(', ');
    expect(lost.size, `commits the formation acknowledged and lost (the witness's, outside the gateway: ${lostAt}); ${told}`).toBe(0);
    const over = counts.reduce((s, c) => s + c.counted - c.served, 0);
    for (const c of counts) expect(c.counted, `user ${c.id} under-counted: ${told}`).toBeGreaterThanOrEqual(c.served);
    expect(over, told).toBeLessThanOrEqual(inDoubtUses);
    for (const u of counted) expect(upstream.hits.filter((h) => h.headers['x-user-id'] === String(u.id)).length).toBeGreaterThanOrEqual(load.served.get(u.id) ?? 0);

    // No refresh token accepted twice.
    expect(load.refreshAccepted.length).toBe(new Set(load.refreshAccepted).size);
    expect(load.refreshAccepted.length).toBeGreaterThan(0);

    // Every hook (user.created of each registration) and webhook (api_token.created of each key)
    // delivered, at least once, under one id each.
    await eventually(() => load.registered.every((id) => receiver.deliveries.some((d) => d.path === '/hook' && (d.json as { type?: string; data?: { user_id?: number } }).type === 'user.created'
      && (d.json as { data: { user_id?: number } }).data.user_id === id)), 60_000, 200);
    const keyEvents = () => receiver.deliveries.filter((d) => d.path === `/user-${keyMaker.id}` && (d.json as { type?: string }).type === 'api_token.created');
    await eventually(() => load.keysCreated.every((id) => keyEvents().some((d) => String((d.json as { data: { id?: unknown } }).data.id) === id)), 60_000, 200);
    for (const d of receiver.deliveries) {
      const sameId = receiver.withId(String(d.headers['webhook-id']));
      expect(new Set(sameId.map((x) => x.body)).size, 'one id, one message').toBe(1);
    }

  }

  it('a planned switchover (pg_autoctl perform switchover) under load', async () => {
    await underLoad('switchover', () => cluster.switchover());
  }, 120_000);

  it('the primary lost (its pg_autoctl and Postgres killed together) under load', async () => {
    await underLoad('primary killed', async (primary) => cluster.kill(primary));
  }, 120_000);
});
