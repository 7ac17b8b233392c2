// Starts real gateways on port 0 against the run's Postgres database and Redis prefix, with
// captured logs and an injectable clock. Two gateways built from one config share the database
// and Redis, exactly like two instances behind a load balancer.
import { randomBytes, randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import pg from 'pg';
import { describe, inject } from 'vitest';
import { configSchema, type Config } from '../../src/config/schema.js';
import { createLogger } from '../../src/logger.js';
import { startGateway, type RunningGateway } from '../../src/server.js';
import type { Database } from '../../src/storage/db.js';
import { request, type HttpResponse, type RequestOptions } from './http.js';

export const testServices = inject('services');
/** describe() for suites that need Postgres and Redis; skipped (not failed) without them unless CI requires them. */
export const describeWithServices = testServices ? describe : describe.skip;

export const TEST_JWT_SECRET = 'test-secret-that-is-at-least-32-bytes-long!!';
export const ADMIN_KEY = 'test-admin-key-0123456789abcdef';

export interface TestClock {
  (): Date;
  advance(ms: number): void;
  set(date: Date): void;
}

/** A clock tests can move: starts at the real time and only moves when told (plus real time passing). */
export function testClock(): TestClock {
  let offset = 0;
  const clock = (() => new Date(Date.now() + offset)) as TestClock;
  clock.advance = (ms) => { offset += ms; };
  clock.set = (date) => { offset = date.getTime() - Date.now(); };
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

/** A validated config for tests: the run's Postgres and Redis, port 0, no admin listener, no rate limit. */
export function testConfig(overrides: Raw = {}): Config {
  const s = testServices;
  if (!s) throw new Error('testConfig needs Postgres and Redis (use describeWithServices)');
  const base: Raw = {
    server: { host: '127.0.0.1', port: 0 },
    storage: { postgres: s.postgres, redis: s.redis, redisKeyPrefix: s.redisPrefix },
    auth: { jwt: { secret: TEST_JWT_SECRET }, rateLimit: { max: 0 } },
    admin: { port: 0, apiKey: ADMIN_KEY },
    webhooks: { allowPrivateNetworks: true },
  };
  return configSchema.parse(merge(base, overrides));
}

export interface TestGateway extends RunningGateway {
  logs: string[];
  request(method: string, path: string, options?: RequestOptions): Promise<HttpResponse>;
  post(path: string, json?: unknown, options?: RequestOptions): Promise<HttpResponse>;
  get(path: string, options?: RequestOptions): Promise<HttpResponse>;
}

export async function startTestGateway(config: Config, options: { clock?: () => Date; db?: Database; logLevel?: string } = {}): Promise<TestGateway> {
  const logs: string[] = [];
  const sink = new Writable({ write(chunk, _enc, cb) { logs.push(String(chunk)); cb(); } });
  // The production logger, so every test that reads logs exercises the real redaction.
  const log = createLogger(options.logLevel ?? 'debug', sink);
  const running = await startGateway(config, { log, clock: options.clock, db: options.db });
  return {
    ...running,
    logs,
    request: (method, path, opts) => request(running.url, method, path, opts),
    post: (path, json, opts) => request(running.url, 'POST', path, { ...opts, json: json ?? {} }),
    get: (path, opts) => request(running.url, 'GET', path, opts),
  };
}

/** Two instances on one database and Redis, as behind a load balancer. */
export async function startTwoGateways(config: Config, options: { clock?: () => Date } = {}): Promise<[TestGateway, TestGateway]> {
  const a = await startTestGateway(config, options);
  const b = await startTestGateway(config, options);
  return [a, b];
}

/**
 * The statements a gateway sends to Postgres while fn runs, less the background ones that are
 * off the request path (API-key usage flushes, the identity cache's NOTIFY heartbeats).
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
  return seen.filter((text) => !text.includes('last_used_at') && !text.includes('pg_notify'));
}

let pool: pg.Pool | undefined;
/** Direct SQL on the run's database, for checking rows and making changes "by hand". */
export async function sql<T = Record<string, unknown>>(text: string, params: unknown[] = []): Promise<T[]> {
  pool ??= new pg.Pool({ connectionString: testServices!.postgres, max: 4 });
  return (await pool.query(text, params)).rows as T[];
}

/** A fresh, empty database beside the run's one (migration and first-start tests); drop() removes it. */
/** A user's daily counters as operators read them (CONTRACT §7), the date as YYYY-MM-DD. */
export async function usage(id: number): Promise<{ daily_usage: number; last_usage_date: string | null }> {
  const [row] = await sql<{ daily_usage: number; last_usage_date: string | null }>(
    "SELECT daily_usage, to_char(last_usage_date, 'YYYY-MM-DD') AS last_usage_date FROM users WHERE id = $1", [id]);
  return row!;
}

export async function throwawayDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `gw_tmp_${randomBytes(6).toString('hex')}`;
  await sql(`CREATE DATABASE ${name}`);
  const url = new URL(testServices!.postgres);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: async () => { await sql(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`); } };
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

/** Registers and logs in a new user; with `plan`, sets it by SQL first (as an operator would). */
export async function makeUser(gw: TestGateway, options: { plan?: 'free' | 'premium' | 'pro' } = {}): Promise<TestUser> {
  const email = newEmail();
  const password = newPassword();
  const reg = await gw.post('/api/v1/auth/register', { email, password });
  if (reg.status !== 201) throw new Error(`register failed: ${reg.status} ${reg.text}`);
  const id = reg.json.user_id as number;
  if (options.plan && options.plan !== 'free') {
    await sql('UPDATE users SET plan = $2 WHERE id = $1', [id, options.plan]);
    await sql('UPDATE subscriptions SET plan = $2 WHERE user_id = $1', [id, options.plan]);
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
