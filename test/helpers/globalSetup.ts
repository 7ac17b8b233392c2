// One database and one Redis key prefix per test run, dropped after it: a run leaves nothing behind.
// Without Postgres or Redis the suites that need them skip, unless REQUIRE_SERVICES=1 (CI), where
// a missing service fails the run. The same goes for the proxies the decisions tests put in front
// of the gateway (nginx, Caddy) and the PgBouncer behind it: found here once, started by the
// tests themselves. And one certificate for webhook receivers that every test gateway trusts
// (webhooks.caFile): any gateway's delivery worker may deliver any test's message, since they all
// share the database.
import { randomBytes } from 'node:crypto';
import { accessSync, constants } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { Redis } from 'ioredis';
import type { TestProject } from 'vitest/node';
import { postgresDatabase } from '../../src/storage/database/db.js';
import { migrate } from '../../src/storage/database/migrations.js';
import { makeCertificate } from './certificate.js';
import { ensureBuilt } from './cli.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** `migrated`: a database the run's migrations were applied to, never connected to again: the template of throwawayDatabase({ migrated: true }). */
    services: { postgres: string; redis: string; redisPrefix: string; migrated: string } | null;
    /** Paths of the proxy binaries, null where one is missing. */
    proxies: Record<Proxy, string | null>;
    /** The webhook receivers' certificate, which every test gateway trusts (helpers/webhookReceiver.ts). */
    webhookCertificate: { certFile: string; keyFile: string };
  }
}

/** The real parts the tests put beside the gateway: proxies in front (decisions) and a pooler behind it. */
export type Proxy = 'nginx' | 'caddy' | 'pgbouncer';

/** The binary of a proxy (Debian puts nginx and pgbouncer in /usr/sbin, often off a user's PATH), or null. */
function findProxy(name: Proxy): string | null {
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter), '/usr/sbin', '/usr/bin', '/usr/local/sbin', '/usr/local/bin'];
  for (const dir of dirs.filter(Boolean)) {
    try {
      accessSync(path.join(dir, name), constants.X_OK);
      return path.join(dir, name);
    } catch {
      // not here
    }
  }
  return null;
}

const BASE_URL = process.env.DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

async function reachable(): Promise<string | null> {
  const client = new pg.Client({ connectionString: BASE_URL, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.end();
  } catch (err) {
    return `Postgres at ${BASE_URL}: ${(err as Error).message}`;
  }
  const redis = new Redis(REDIS_URL, { lazyConnect: true, connectTimeout: 3000, maxRetriesPerRequest: 0, retryStrategy: () => null });
  try {
    await redis.connect();
    await redis.ping();
  } catch (err) {
    return `Redis at ${REDIS_URL}: ${(err as Error).message}`;
  } finally {
    redis.disconnect();
  }
  return null;
}

/** Names the receivers' certificate is also valid for (DNS rebinding tests resolve them their own way). */
const WEBHOOK_TEST_NAMES = ['hooks.rebind.test'];

/**
 * The migrations applied once to `name`, by the code a gateway's start runs: the template that
 * throwawayDatabase({ migrated: true }) copies in a fraction of a second, where a gateway's first
 * start on an empty database spends seconds applying them (dozens of databases a run). Closed
 * after: Postgres copies a template only while no one is connected to it.
 */
async function migrateTemplate(name: string): Promise<void> {
  const url = new URL(BASE_URL);
  url.pathname = `/${name}`;
  const db = postgresDatabase(url.toString(), { poolSize: 1 });
  try {
    await migrate(db);
  } finally {
    await db.close();
  }
  // A pool's close() resolves before its connections are gone: until they are, CREATE DATABASE
  // ... TEMPLATE refuses ("being accessed by other users").
  const admin = new pg.Client({ connectionString: BASE_URL });
  await admin.connect();
  try {
    for (let tries = 0; tries < 100; tries++) {
      const { rows } = await admin.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1', [name]);
      if (rows[0]!.n === 0) return;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  } finally {
    await admin.end();
  }
}

export default async function setup(project: TestProject) {
  // A file run alone (`npx vitest run FILE`) on a fresh clone or after an edit gets the dist/ that
  // its spawned CLIs and workers need, as `npm test` builds it first.
  ensureBuilt();
  const cert = makeCertificate(WEBHOOK_TEST_NAMES);
  project.provide('webhookCertificate', { certFile: cert.certFile, keyFile: cert.keyFile });
  const proxies = { nginx: findProxy('nginx'), caddy: findProxy('caddy'), pgbouncer: findProxy('pgbouncer') };
  const absent = Object.entries(proxies).filter(([, found]) => !found).map(([name]) => name);
  if (absent.length) {
    if (process.env.REQUIRE_SERVICES === '1') throw new Error(`REQUIRE_SERVICES=1 but ${absent.join(' and ')} cannot be found (.ci/run installs them)`);
    console.warn(`\n[tests] ${absent.join(' and ')} not found: the tests that run ${absent.length > 1 ? 'them' : 'it'} are skipped\n`);
  }
  project.provide('proxies', proxies);
  const missing = await reachable();
  if (missing) {
    if (process.env.REQUIRE_SERVICES === '1') throw new Error(`REQUIRE_SERVICES=1 but a service is missing: ${missing}`);
    console.warn(`\n[tests] ${missing}: suites that need Postgres and Redis are skipped\n`);
    project.provide('services', null);
    return () => cert.remove();
  }
  const suffix = randomBytes(5).toString('hex');
  const dbName = `gw_test_${suffix}`;
  const migrated = `gw_migrated_${suffix}`;
  const admin = new pg.Client({ connectionString: BASE_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  await admin.query(`CREATE DATABASE ${migrated}`);
  await admin.end();
  const url = new URL(BASE_URL);
  url.pathname = `/${dbName}`;
  await migrateTemplate(migrated);
  const redisPrefix = `gw_test_${suffix}:`;
  project.provide('services', { postgres: url.toString(), redis: REDIS_URL, redisPrefix, migrated });

  return async () => {
    cert.remove();
    const cleanup = new pg.Client({ connectionString: BASE_URL });
    await cleanup.connect();
    await cleanup.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await cleanup.query(`DROP DATABASE IF EXISTS ${migrated} WITH (FORCE)`);
    await cleanup.end();
    const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${redisPrefix}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length) await redis.del(...keys);
    } while (cursor !== '0');
    redis.disconnect();
  };
}
