// One database and one Redis key prefix per test run, dropped after it (DEVELOPERS: self-cleaning).
// Without Postgres or Redis the suites that need them skip, unless REQUIRE_SERVICES=1 (CI), where
// a missing service fails the run.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { Redis } from 'ioredis';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    services: { postgres: string; redis: string; redisPrefix: string } | null;
  }
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

export default async function setup(project: TestProject) {
  const missing = await reachable();
  if (missing) {
    if (process.env.REQUIRE_SERVICES === '1') throw new Error(`REQUIRE_SERVICES=1 but a service is missing: ${missing}`);
    console.warn(`\n[tests] ${missing}: suites that need Postgres and Redis are skipped\n`);
    project.provide('services', null);
    return;
  }
  const suffix = randomBytes(5).toString('hex');
  const dbName = `gw_test_${suffix}`;
  const admin = new pg.Client({ connectionString: BASE_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  await admin.end();
  const url = new URL(BASE_URL);
  url.pathname = `/${dbName}`;
  const redisPrefix = `gw_test_${suffix}:`;
  project.provide('services', { postgres: url.toString(), redis: REDIS_URL, redisPrefix });

  return async () => {
    const cleanup = new pg.Client({ connectionString: BASE_URL });
    await cleanup.connect();
    await cleanup.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
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
