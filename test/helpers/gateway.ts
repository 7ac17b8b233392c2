// Starts real gateways on port 0 against the run's Postgres database and Redis prefix, with
// captured logs and an injectable clock. Two gateways built from one config share the database
// and Redis, exactly like two instances behind a load balancer.
import { randomBytes, randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import pg from 'pg';
import { describe, inject } from 'vitest';
import { ConfigError, loadConfig, parseConfig } from '../../src/config/load.js';
import { configSchema, parseDuration, type Config } from '../../src/config/schema.js';
import { createLogger } from '../../src/telemetry/logger.js';
import { startGateway, type RunningGateway } from '../../src/server.js';
import type { LookupAll } from '../../src/webhooks/ssrf.js';
import { PG_TYPES, type Database } from '../../src/storage/database/db.js';
import { request, type HttpResponse, type RequestOptions } from './http.js';
import { sparePort } from './ports.js';
import { logLines } from './cli.js';

export const testServices = inject('services');
/** The certificate every webhook receiver of the tests presents, and every test gateway trusts (globalSetup.ts). */
export const webhookCertificate = inject('webhookCertificate');
/** describe() for suites that need Postgres and Redis; skipped (not failed) without them unless CI requires them. */
export const describeWithServices = testServices ? describe : describe.skip;

export const TEST_JWT_SECRET = 'test-secret-that-is-at-least-32-bytes-long!!';
export const ADMIN_KEY = 'test-admin-key-0123456789abcdef-0123456789';

export interface TestClock {
  (): Date;
  advance(ms: number): void;
  set(date: Date): void;
  /** Stops the clock at its reading (a bound tested to the millisecond); advance and set move the stopped reading. */
  freeze(): void;
  /** Back to the running clock, where it would be had it not been stopped. */
  thaw(): void;
}

/** A clock tests can move: starts at the real time and only moves when told (plus real time passing, unless frozen). */
export function testClock(): TestClock {
  let offset = 0;
  let frozen: number | undefined;
  const clock = (() => new Date(frozen ?? Date.now() + offset)) as TestClock;
  clock.advance = (ms) => {
    if (frozen === undefined) offset += ms;
    else frozen += ms;
  };
  clock.set = (date) => {
    if (frozen === undefined) offset = date.getTime() - Date.now();
    else frozen = date.getTime();
  };
  clock.freeze = () => { frozen = clock().getTime(); };
  clock.thaw = () => { frozen = undefined; };
  return clock;
}

type Raw = Record<string, unknown>;

function merge(base: Raw, over: Raw): Raw {
  const out: Raw = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const b = out[k];
    out[k] = v && typeof v === 'object' && !Array.isArray(v) && b && typeof b === 'object' && !Array.isArray(b) ? merge(b as Raw, v as Raw) : v;
  }
  return out;
}

/**
 * How long a test gateway waits for a Redis command: the client's own bound, not production's
 * 100 ms. This machine's two cores and its Redis are shared with other runs and benchmarks, and
 * answer slower than 100 ms at times; a test that is not about storage.redisTimeout must not see
 * that as Redis failing (test/storage/redisHang.test.ts is about it, and sets its own).
 */
export const TEST_REDIS_TIMEOUT = '1s';

/**
 * What every test gateway runs with: the run's Postgres and Redis, port 0, no admin listener, no rate
 * limit, and webhook settings under which it can deliver any test's message: the gateways of every
 * test file share the database, so each one's delivery worker claims whatever message is due.
 * A test that needs other webhook settings (private addresses refused, its own DNS answers) runs its
 * gateways on a throwawayDatabase().
 */
function testSettings(): Raw {
  const s = testServices;
  if (!s) throw new Error('test gateways need Postgres and Redis (use describeWithServices)');
  return {
    server: { host: '127.0.0.1', port: 0, shutdownDelay: '0s' },
    // A small pool: two files run at once, each with several gateways, on a Postgres that takes 100.
    storage: { postgres: s.postgres, poolSize: 5, redis: s.redis, redisKeyPrefix: s.redisPrefix, redisTimeout: TEST_REDIS_TIMEOUT },
    auth: { jwt: { secret: TEST_JWT_SECRET }, rateLimit: { max: 0 } },
    admin: { port: 0, apiKey: ADMIN_KEY },
    webhooks: { allowPrivateNetworks: true, caFile: webhookCertificate.certFile },
  };
}

/**
 * gateway.yaml for tests, before validation: the test settings with `overrides` merged in
 * (objects key by key, anything else replaced). What startTestGateway takes once parsed
 * (testConfig), and what spawnGateway writes to the config file of the built CLI.
 */
export function rawTestConfig(overrides: Raw = {}): Raw {
  return merge(testSettings(), overrides);
}

/**
 * A configuration written as YAML (a docs example: see helpers/docs.ts), read by the real loader
 * with `env` for its ${VAR} references, then put on the test settings (storage, ports).
 */
export function testConfigFromYaml(text: string, env: Record<string, string> = {}): Config {
  return withTestSettings(parseConfig(text, 'test configuration', env));
}

/**
 * The test settings laid over a loaded config. They are plain values, already in the form the
 * loader produces (but for the durations), so no second validation is needed.
 */
function withTestSettings(config: Config): Config {
  const settings = testSettings();
  (settings.server as Raw).shutdownDelay = 0;
  (settings.storage as Raw).redisTimeout = parseDuration(TEST_REDIS_TIMEOUT);
  return merge(config as unknown as Raw, settings) as unknown as Config;
}

/**
 * testConfigFromYaml for a configuration that names files: written as `dir`/gateway.yaml and read
 * by loadConfig, so its relative paths are read from `dir` as an operator's would be.
 */
export function testConfigFromFile(text: string, dir: string, env: Record<string, string> = {}): Config {
  const file = path.join(dir, 'gateway.yaml');
  writeFileSync(file, text);
  return withTestSettings(loadConfig(file, env).config);
}

/** The problems the loader reports for a configuration written as YAML (none: []). */
export function configProblems(yaml: string): string[] {
  try {
    parseConfig(yaml, 'gateway.yaml');
    return [];
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
}

/** rawTestConfig validated by the real schema. */
export function testConfig(overrides: Raw = {}): Config {
  return configSchema.parse(rawTestConfig(overrides));
}

/** Redis keys of this test alone (cleaned with the run's prefix by globalSetup). */
/** A test gateway's log lines whose message is `msg`, parsed (cli.ts's logLines). */
export function loggedLines(gw: { logs: string[] }, msg: string) {
  return logLines(gw.logs.join('')).filter((line) => line.msg === msg);
}

export const ownRedisPrefix = (tag: string) => `${testServices!.redisPrefix}${tag}-${randomBytes(4).toString('hex')}:`;

export interface TestGateway extends RunningGateway {
  logs: string[];
  request(method: string, path: string, options?: RequestOptions): Promise<HttpResponse>;
  post(path: string, json?: unknown, options?: RequestOptions): Promise<HttpResponse>;
  get(path: string, options?: RequestOptions): Promise<HttpResponse>;
  /** A request to the decisions listener (startDecidingGateway). */
  decide(method: string, path: string, options?: RequestOptions): Promise<HttpResponse>;
}

export interface TestGatewayOptions {
  clock?: () => Date;
  db?: Database;
  logLevel?: string;
  /** How webhook hosts are resolved at delivery (the instance's test seam); only on a throwawayDatabase(). */
  webhookLookup?: LookupAll;
  /** How often the clean-up of expired rows runs (the instance's test seam; hourly otherwise). */
  housekeepingEveryMs?: number;
}

export async function startTestGateway(config: Config, options: TestGatewayOptions = {}): Promise<TestGateway> {
  const logs: string[] = [];
  const sink = new Writable({ write(chunk, _enc, cb) { logs.push(String(chunk)); cb(); } });
  // The production logger, so every test that reads logs exercises the real redaction.
  const log = createLogger(options.logLevel ?? 'debug', sink);
  const running = await startGateway(config, { log, clock: options.clock, db: options.db, webhookLookup: options.webhookLookup, housekeepingEveryMs: options.housekeepingEveryMs });
  return {
    ...running,
    logs,
    request: (method, path, opts) => request(running.url, method, path, opts),
    post: (path, json, opts) => request(running.url, 'POST', path, { ...opts, json: json ?? {} }),
    get: (path, opts) => request(running.url, 'GET', path, opts),
    decide: (method, path, opts) => {
      if (!running.decisionsUrl) throw new Error('this gateway has no decisions listener: use startDecidingGateway');
      return request(running.decisionsUrl, method, path, opts);
    },
  };
}

/**
 * A gateway of testConfig(overrides) with a decisions listener (CONTRACT §11) on a spare port
 * (decisions.port cannot be 0, which means none). Call it twice for two instances.
 */
export async function startDecidingGateway(overrides: Raw, options: { clock?: () => Date } = {}): Promise<TestGateway> {
  // A spare port is free when picked, not when bound: another process may take it in between
  // (EADDRINUSE, seen in CI). Another port then; any other failure is the test's.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startTestGateway(testConfig(merge(overrides, { decisions: { host: '127.0.0.1', port: await sparePort() } })), options);
    } catch (err) {
      if (attempt >= 3 || (err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    }
  }
}

/** Two instances on one database and Redis, as behind a load balancer. */
export async function startTwoGateways(config: Config, options: { clock?: () => Date } = {}): Promise<[TestGateway, TestGateway]> {
  const a = await startTestGateway(config, options);
  const b = await startTestGateway(config, options);
  return [a, b];
}

/** storage/usage/ownerDenials.ts's statement: refusals added to the day's row, once a second. */
const REFUSALS_FLUSH = /denied = d\.denied \+ excluded\.denied/;

/**
 * The statements a gateway sends to Postgres while fn runs, less the background ones that are
 * off the request path (API-key usage flushes, the quota refusals' once-a-second flush, the identity
 * cache's NOTIFY heartbeats, the webhook delivery worker, which may be delivering another test
 * file's messages). The refusals' flush was missing from this list: it lands in a measured window
 * about once in fourteen runs of a 70 ms window, and failed CI's fast tier for it.
 */
export async function queriesDuring(gw: TestGateway, fn: () => Promise<unknown>): Promise<string[]> {
  const db = gw.services.db;
  const original = db.query.bind(db);
  const seen: string[] = [];
  db.query = (async (text: string, params?: unknown[]) => { seen.push(text); return original(text, params); }) as typeof db.query;
  try {
    await fn();
  } finally {
    db.query = original;
  }
  return seen.filter((text) => !text.includes('last_used_at') && !text.includes('api_key_usage') && !text.includes('pg_notify') && !text.includes('webhook')
    && !REFUSALS_FLUSH.test(text));
}

/**
 * Runs a measurement of what a trusted cache does, retaking it (up to three times) when one of the
 * gateways' change feed was distrusted meanwhile, or told of any change the identity cache or the
 * daily gates heed. On a loaded machine a heartbeat can come back late, and the feed then reads
 * the database on purpose (its documented fail-safe), which says nothing of the cache; when it
 * resumes, today's Redis gates are checked against Postgres, and one checked while its uses were
 * being counted is dropped (harmless: Postgres refuses and sets it again). And a read that a
 * change raced is not kept (IdentityCache's generation), whatever the change: other test files
 * make users and keys in the same database all the time, so a first sight inside `measure` may
 * be read again. Likewise a Redis command slower than storage.redisTimeout under load: the guard
 * falls back to Postgres on purpose (storage/redis/breaker.ts). A measurement that fails with none
 * of these fails the test. Never wrap a safety check (a use admitted past a limit) in it: assert
 * those over every attempt. The daily gates are shared in Redis, so a measurement of them watches
 * every instance that could drop one (each one's feed resuming checks them all again).
 */
export async function whileFeedTrusted(gws: TestGateway | readonly TestGateway[], measure: () => Promise<void>): Promise<void> {
  const gateways: readonly TestGateway[] = Array.isArray(gws) ? gws : [gws as TestGateway];
  for (let attempt = 1; ; attempt++) {
    let disturbed = false;
    const disturb = () => { disturbed = true; };
    const handlers = {
      interrupted: disturb, resumed: disturb, userChanged: disturb, apiKeyChanged: disturb, dailyUsageReset: disturb, orgChanged: disturb, orgUsageReset: disturb, truncated: disturb,
    };
    const unsubscribes = gateways.map((gw) => gw.services.feed.subscribe(handlers));
    const unwatches = gateways.map((gw) => onRedisFallback(gw, disturb));
    try {
      await measure();
      return;
    } catch (err) {
      if (!disturbed || attempt === 3) throw err;
    } finally {
      for (const undo of [...unsubscribes, ...unwatches]) undo();
    }
  }
}

/** Calls `seen` whenever one of the instance's Redis commands answers "use your fallback" (undefined); returns the undo. */
function onRedisFallback(gw: TestGateway, seen: () => void): () => void {
  const breaker = gw.services.redis;
  if (!breaker) return () => {};
  const original = breaker.call.bind(breaker);
  breaker.call = (async (...args: Parameters<typeof original>) => {
    const answer = await original(...args);
    if (answer === undefined) seen();
    return answer;
  }) as typeof breaker.call;
  return () => { breaker.call = original; };
}

let pool: pg.Pool | undefined;
/** Direct SQL on the run's database, for checking rows and making changes "by hand". */
export async function sql<T = Record<string, unknown>>(text: string, params: unknown[] = []): Promise<T[]> {
  pool ??= new pg.Pool({ connectionString: testServices!.postgres, types: PG_TYPES, max: 4 });
  return (await pool.query(text, params)).rows as T[];
}

/** A user's daily counters as operators read them (CONTRACT §7), the date as YYYY-MM-DD. */
export async function usage(id: number): Promise<{ daily_usage: number; last_usage_date: string | null }> {
  const [row] = await sql<{ daily_usage: number; last_usage_date: string | null }>(
    "SELECT daily_usage, to_char(last_usage_date, 'YYYY-MM-DD') AS last_usage_date FROM users WHERE id = $1", [id]);
  return row!;
}

export interface ThrowawayDatabase {
  url: string;
  /** storage settings for gateways on it, with a Redis prefix of their own (user ids start again from 1 here) */
  storage: { postgres: string; redisKeyPrefix: string };
  /** Direct SQL on this database, as sql() on the run's one. */
  sql<T = Record<string, unknown>>(text: string, params?: unknown[]): Promise<T[]>;
  drop(): Promise<void>;
}

/**
 * A fresh, empty database beside the run's one (migration and first-start tests, gateways with
 * webhook settings of their own); drop() removes it. A gateway on it: testConfig({ storage: db.storage }).
 * `migrated`: a copy of the one globalSetup migrated, as a database is after a gateway's first
 * start but for what the start itself writes (keys, secrets): for a test about neither the
 * migrations nor a first start, which then spends no seconds applying them.
 */
export async function throwawayDatabase({ migrated = false }: { migrated?: boolean } = {}): Promise<ThrowawayDatabase> {
  const name = `gw_tmp_${randomBytes(6).toString('hex')}`;
  await sql(migrated ? `CREATE DATABASE ${name} TEMPLATE ${testServices!.migrated}` : `CREATE DATABASE ${name}`);
  const url = new URL(testServices!.postgres);
  url.pathname = `/${name}`;
  let own: pg.Pool | undefined;
  return {
    url: url.toString(),
    storage: { postgres: url.toString(), redisKeyPrefix: ownRedisPrefix(name) },
    async sql<T>(text: string, params: unknown[] = []) {
      own ??= new pg.Pool({ connectionString: url.toString(), types: PG_TYPES, max: 2 });
      return (await own.query(text, params)).rows as T[];
    },
    async drop() {
      await own?.end();
      // A pool's end() resolves before its connections are gone: terminated now (FORCE), they would
      // surface as an uncaught error in the process that just closed them. They get a moment.
      await eventually(async () => (await sql<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1', [name]))[0]!.n === 0, 2000)
        .catch(() => { /* what is left is terminated */ });
      await sql(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    },
  };
}

export async function closeSql(): Promise<void> {
  await pool?.end();
  pool = undefined;
}

export const newEmail = (tag = 'u') => `${tag}-${randomUUID()}@example.test`;
export const newPassword = () => `Pass-${randomBytes(6).toString('hex')}`;
export const marker = () => `m${randomBytes(6).toString('hex')}`;

export interface TestUser {
  id: number;
  email: string;
  password: string;
  access: string;
  refresh: string;
}

/** Registers and logs in a new user; with `plan`, sets it by SQL first (as an operator would), on the gateway's database. */
export async function makeUser(gw: TestGateway, options: { plan?: string } = {}): Promise<TestUser> {
  const email = newEmail();
  const password = newPassword();
  const reg = await gw.post('/api/v1/auth/register', { email, password });
  if (reg.status !== 201) throw new Error(`register failed: ${reg.status} ${reg.text}`);
  const id = reg.json.user_id as number;
  if (options.plan && options.plan !== 'free') {
    await gw.services.db.query('UPDATE users SET plan = $2 WHERE id = $1', [id, options.plan]);
    await gw.services.db.query('UPDATE subscriptions SET plan = $2 WHERE user_id = $1', [id, options.plan]);
  }
  const login = await gw.post('/api/v1/auth/login', { email, password });
  if (login.status !== 200) throw new Error(`login failed: ${login.status} ${login.text}`);
  return { id, email, password, access: login.json.access_token, refresh: login.json.refresh_token };
}

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** Polls until check() is truthy or the time is up; returns the elapsed milliseconds. */
export async function eventually(check: () => Promise<boolean> | boolean, timeoutMs = 3000, stepMs = 20): Promise<number> {
  const start = Date.now();
  while (Date.now() - start < timeoutMs) {
    if (await check()) return Date.now() - start;
    await new Promise((r) => setTimeout(r, stepMs));
  }
  throw new Error(`condition not met within ${timeoutMs} ms`);
}

/**
 * "Seen by every instance within ms": polls check on all instances at once against ONE deadline,
 * ms after the call, so call it right after the change returns. Polling them one after the other
 * would give each instance a fresh window after the previous one passed. Fails naming every
 * instance that missed it (or whose check threw).
 */
export async function everywhereWithin<T>(
  instances: readonly T[],
  check: (instance: T, index: number) => Promise<boolean> | boolean,
  ms: number,
  stepMs = 20,
): Promise<void> {
  const deadline = Date.now() + ms;
  const outcomes = await Promise.allSettled(instances.map((instance, i) => eventually(() => check(instance, i), deadline - Date.now(), stepMs)));
  const misses = outcomes.flatMap((outcome, i) => {
    if (outcome.status === 'fulfilled') return [];
    const url = (instances[i] as { url?: unknown }).url;
    return [`instance ${i}${typeof url === 'string' ? ` (${url})` : ''}: ${(outcome.reason as Error).message}`];
  });
  if (misses.length) throw new Error(`not seen everywhere within ${ms} ms: ${misses.join('; ')}`);
}

/** The claims of a JWT as a client reads them (no verification: the gateway's answer is under test). */
export const claims = (token: string) => JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as Record<string, unknown>;

/**
 * Holds the gateway's change notifications until `release()`, as a loaded machine delivers a
 * NOTIFY late: every one but its heartbeats, so that the feed stays trusted and its caches in use.
 * What a change must do at once on the instance that made it (forget what it cached) is then seen
 * alone; `release()` delivers what was held, in order.
 */
export function holdNotifications(gw: TestGateway): { release(): void } {
  type Notified = (channel: string, payload: string) => void;
  const feed = gw.services.feed as unknown as { notified: Notified };
  const deliver = feed.notified;
  const held: Array<[string, string]> = [];
  feed.notified = function hold(this: unknown, channel, payload) {
    if (channel === 'gw_heartbeat') return deliver.call(this, channel, payload);
    held.push([channel, payload]);
  };
  return {
    release() {
      delete (feed as Partial<{ notified: Notified }>).notified;
      for (const [channel, payload] of held.splice(0)) feed.notified(channel, payload);
    },
  };
}
