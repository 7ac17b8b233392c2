// A rolling upgrade from the previous release under load (issue 56; docs/operating.md, "Upgrading a
// running fleet"). Two instances of the previous release (PREVIOUS_RELEASE, built from git) serve
// a fresh database; a user with a session and a §4 API key, another with a session, and steady
// load on a quota-counted route through a balancer that follows /readyz. Then what an operator
// does: one instance of the new code starts on the same database, which applies this round's
// migrations while the old instances keep serving; each old instance is then replaced, drained
// with SIGTERM. The load sees not one 5xx nor a connection error, the database counts exactly the
// uses the load was served (none lost, none twice), the old instances work on the migrated
// schema (expand only), and the sessions and the key made by the old code work on the new one.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { migrationFiles } from '../../src/storage/database/migrations.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import {
  bearer, closeSql, describeWithServices, eventually, marker, newEmail, newPassword, rawTestConfig, throwawayDatabase,
  type ThrowawayDatabase,
} from '../helpers/gateway.js';
import { spawnGateway, type GatewayProcess } from '../helpers/gatewayProcess.js';
import { request, type HttpResponse } from '../helpers/http.js';
import { PREVIOUS_RELEASE, previousReleaseCli, previousReleaseMigrations } from '../helpers/previousRelease.js';

const QUOTA = 100_000; // a daily quota the test never reaches: every use is counted, none refused
const CLIENTS = 4;
const PAUSE_MS = 40; // between a client's requests: a steady, bounded load (hundreds, not tens of thousands)
const MAX_REQUESTS = 4_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * What a load balancer does for the fleet: sends each request to the next instance whose /readyz
 * answered 200 at its last look, every 100 ms (as nginx's controller in rollingDeploy.test.ts, or
 * Kubernetes' endpoints): a draining instance leaves the rotation, a new one joins once ready.
 */
class Balancer {
  members: GatewayProcess[] = [];
  private ready: string[] = [];
  private next = 0;
  private running = true;
  private readonly loop: Promise<void>;

  constructor() {
    this.loop = (async () => {
      while (this.running) {
        const now = await Promise.all(this.members.map(async (gw) => {
          const res = await request(gw.url, 'GET', '/readyz', { freshConnection: true, timeout: 1000 }).catch(() => undefined);
          return res?.status === 200 ? [gw.url] : [];
        }));
        this.ready = now.flat();
        await sleep(100);
      }
    })();
  }

  /** Waits until the rotation is exactly `members`' URLs. */
  async settle(members: GatewayProcess[]): Promise<void> {
    this.members = members;
    const want = members.map((gw) => gw.url).sort().join();
    await eventually(() => [...this.ready].sort().join() === want, 20_000);
  }

  /** The next ready instance's URL; undefined when none is ready. */
  pick(): string | undefined {
    return this.ready[this.next++ % this.ready.length];
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }
}

/** Every answer of the counted route, wherever it came from: the load's and the checks'. */
interface Tally { ok: number; sent: number; failures: string[] }

describeWithServices('a rolling upgrade from the previous release under load', () => {
  const spawned: GatewayProcess[] = [];
  const tally: Tally = { ok: 0, sent: 0, failures: [] };
  const m = marker();
  let upstream: EchoUpstream;
  let db: ThrowawayDatabase;
  let oldCli: string;
  let balancer: Balancer | undefined;
  let config: Record<string, unknown>;
  /** The load's clients run while this holds (afterAll ends them too, when the test failed midway). */
  let loading = false;

  beforeAll(async () => {
    [upstream, db, oldCli] = await Promise.all([startEchoUpstream(), throwawayDatabase(), previousReleaseCli()]);
    // A config both releases read alike: the one an operator keeps across the upgrade.
    config = rawTestConfig({
      // Longer than the balancer takes to see /readyz turn 503, even on a busy machine (production.md).
      server: { shutdownDelay: '3s' },
      storage: db.storage,
      upstreams: { app: { url: upstream.url } },
      plans: { limits: { free: { daily: QUOTA }, pro: { daily: QUOTA } } },
      routes: [{ path: '/api/v1/search', upstream: 'app', dailyLimit: true }],
    });
  }, 180_000);

  afterAll(async () => {
    loading = false;
    await balancer?.stop();
    // Each stop() sends SIGTERM, then SIGKILL if the process outlives 15 s.
    await Promise.all(spawned.map((gw) => gw.stop()));
    await upstream?.close();
    await db?.drop();
    await closeSql();
  });

  async function start(release: 'previous' | 'new'): Promise<GatewayProcess> {
    // A minute to start: the machine's cores are shared with the load and the other instances.
    const gw = await spawnGateway(config, { startTimeoutMs: 60_000, ...(release === 'previous' ? { cli: oldCli } : {}) });
    spawned.push(gw);
    return gw;
  }

  /** SIGTERM: the instance drains, leaves the rotation, and exits 0; `rest` is the rotation after. */
  async function drain(gw: GatewayProcess, rest: GatewayProcess[]): Promise<void> {
    gw.child.kill('SIGTERM');
    expect(await gw.exited).toEqual({ code: 0, signal: null });
    await balancer!.settle(rest);
  }

  /** One use of the counted route on `url`, tallied: anything but a 200 is a failure. */
  async function use(url: string, headers: Record<string, string>, what: string): Promise<void> {
    const n = tally.sent++;
    try {
      const res = await request(url, 'GET', `/api/v1/search/${m}/${n}`, { headers, freshConnection: true, timeout: 10_000 });
      if (res.status === 200) tally.ok++;
      else tally.failures.push(`${what} #${n} on ${url}: ${res.status} ${res.text}`);
    } catch (err) {
      tally.failures.push(`${what} #${n} on ${url}: ${(err as Error).message}`);
    }
  }

  /** A user as the previous release's clients make one: registered, then signed in. */
  async function account(url: string, plan?: string): Promise<{ id: number; access: string; refresh: string }> {
    const email = newEmail('upgrade');
    const password = newPassword();
    const reg = await request(url, 'POST', '/api/v1/auth/register', { json: { email, password } });
    expect(reg.status, reg.text).toBe(201);
    const id = reg.json.user_id as number;
    // By SQL, as helpers/gateway.ts's makeUser (and an operator) does: both releases see it through the change feed.
    if (plan) {
      await db.sql('UPDATE users SET plan = $2 WHERE id = $1', [id, plan]);
      await db.sql('UPDATE subscriptions SET plan = $2 WHERE user_id = $1', [id, plan]);
    }
    const login = await request(url, 'POST', '/api/v1/auth/login', { json: { email, password } });
    expect(login.status, login.text).toBe(200);
    return { id, access: login.json.access_token as string, refresh: login.json.refresh_token as string };
  }

  /** A §4 API key (POST /api/v1/user/api-token), the only kind the previous release makes. */
  async function apiToken(url: string, access: string): Promise<string> {
    const res = await request(url, 'POST', '/api/v1/user/api-token', { headers: bearer(access) });
    expect(res.status, res.text).toBe(201);
    return res.json.api_token as string;
  }

  async function refreshed(url: string, refresh: string): Promise<HttpResponse> {
    return request(url, 'POST', '/api/v1/auth/refresh', { json: { refresh_token: refresh } });
  }

  const applied = async () => (await db.sql<{ name: string }>('SELECT name FROM schema_migrations ORDER BY name')).map((r) => r.name);

  it(`keeps serving, counting each use once, from ${PREVIOUS_RELEASE.slice(0, 12)} to this code`, { timeout: 240_000 }, async () => {
    // Started together, as a fleet's instances are: the previous release's migration lock lets
    // one migrate the fresh database while the other waits, then finds nothing to apply.
    const old = await Promise.all([start('previous'), start('previous')]);
    expect(await applied()).toEqual(await previousReleaseMigrations());
    // Alice: pro, with a session and a §4 key; Bob: free, with a session. Made by the old code.
    const alice = await account(old[0].url, 'pro');
    const bob = await account(old[1].url);
    const aliceKey = await apiToken(old[0].url, alice.access);

    balancer = new Balancer();
    await balancer.settle([...old]);
    loading = true;
    const client = async (c: number) => {
      while (loading && tally.sent < MAX_REQUESTS) {
        const headers: Record<string, string> = c % 2 ? { 'x-api-key': aliceKey } : bearer(bob.access);
        const url = balancer!.pick();
        if (url) await use(url, headers, `load ${c}`);
        else tally.failures.push(`load ${c}: no instance ready`);
        await sleep(PAUSE_MS);
      }
    };
    const clients = Array.from({ length: CLIENTS }, (_, c) => client(c));
    await eventually(() => tally.ok >= 50, 20_000);

    // The first new instance migrates the database as it starts, the old ones serving meanwhile.
    const first = await start('new');
    expect(await applied()).toEqual(migrationFiles());
    await balancer.settle([...old, first]);
    await oldCodeOnTheNewSchema(old, aliceKey, bob.access);
    // And the other way: a named key the new code makes (§21, no scopes nor expiry) works on the old.
    const named = await request(first.url, 'POST', '/api/v1/user/api-keys', { headers: bearer(alice.access), json: { name: 'ci' } });
    expect(named.status, named.text).toBe(201);
    await use(old[1].url, { 'x-api-key': named.json.key as string }, 'a named key of the new code on an old instance');

    // Each old instance in turn: drained with SIGTERM (it leaves the rotation), exits 0, replaced.
    // Meanwhile an old instance starts on the migrated database, as a crashed one restarted by its
    // orchestrator (or a rollback) would: the previous release finds nothing to migrate, and serves.
    await drain(old[0], [old[1], first]);
    const [second, late] = await Promise.all([start('new'), start('previous')]);
    await balancer.settle([old[1], first, second, late]);
    await use(late.url, { 'x-api-key': aliceKey }, 'an old instance started after the migration');
    await drain(old[1], [first, second, late]);
    await drain(late, [first, second]);
    const served = tally.ok;
    await eventually(() => tally.ok >= served + 50, 20_000);
    loading = false;
    await Promise.all(clients);

    await newCodeKeepsOldCredentials([first, second], { alice, bob, aliceKey });
    expect(tally.failures).toEqual([]);
    expect(tally.sent).toBeGreaterThan(200);
    expect(upstream.count(m)).toBe(tally.ok);
    // Counted exactly: an instance hands back the uses it reserved and did not serve within a
    // second, and at its shutdown (pipeline/guards/dailyLimit/blocks.ts); the sum settles on the uses served. (The count
    // is the UTC day's: a run across midnight would split it.)
    const counted = async () => (await db.sql<{ n: number }>('SELECT coalesce(sum(daily_usage), 0)::int AS n FROM users'))[0]!.n;
    await eventually(async () => await counted() === tally.ok, 10_000).catch(() => undefined);
    expect(await counted()).toBe(tally.ok);
  });

  /** The old code, once the new code's migrations ran: it still serves, signs up, signs in and makes keys. */
  async function oldCodeOnTheNewSchema(old: readonly GatewayProcess[], aliceKey: string, bobAccess: string): Promise<void> {
    for (const gw of old) {
      await use(gw.url, { 'x-api-key': aliceKey }, 'old key on an old instance after the migration');
      await use(gw.url, bearer(bobAccess), 'old session on an old instance after the migration');
    }
    // Rows the old code writes into the expanded tables (users, refresh_tokens, api_tokens).
    const carol = await account(old[1]!.url, 'pro');
    const carolKey = await apiToken(old[1]!.url, carol.access);
    const again = await refreshed(old[0]!.url, carol.refresh);
    expect(again.status, again.text).toBe(200);
    await use(old[0]!.url, { 'x-api-key': carolKey }, 'a key the old code made after the migration');
    const [row] = await db.sql<{ name: string }>('SELECT name FROM api_tokens WHERE user_id = $1 AND revoked = 0', [carol.id]);
    expect(row?.name).toBe('default');
  }

  /** The new code: the sessions and the key the old code made are still good. */
  async function newCodeKeepsOldCredentials(
    [first, second]: readonly GatewayProcess[],
    { alice, bob, aliceKey }: { alice: { refresh: string }; bob: { refresh: string }; aliceKey: string },
  ): Promise<void> {
    const access: string[] = [];
    for (const [gw, refresh] of [[first!, alice.refresh], [second!, bob.refresh]] as const) {
      const res = await refreshed(gw.url, refresh);
      expect(res.status, res.text).toBe(200);
      access.push(res.json.access_token as string);
      await use(gw.url, bearer(res.json.access_token as string), 'a session of the old code, refreshed by the new');
    }
    await use(second!.url, { 'x-api-key': aliceKey }, 'the old key on the new code');
    // The new code sees the §4 key as the user's `default` key (CONTRACT §21), beside the named one.
    const keys = await request(second!.url, 'GET', '/api/v1/user/api-keys', { headers: bearer(access[0]!) });
    expect(keys.status, keys.text).toBe(200);
    expect((keys.json.api_keys as Array<{ name: string }>).map((k) => k.name).sort()).toEqual(['ci', 'default']);
  }
});
