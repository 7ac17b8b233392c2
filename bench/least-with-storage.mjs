// The contract's least (the shared reference, CONTRACT_LEAST in bench/common.mjs) in a process that
// also holds what every gateway process holds: a Postgres connection LISTENing, and a Redis
// connection, each asked something once a second (the gateway's keyrings, leases and reporter do
// at least that). Not a target: `npm run instructions` counts it beside the reference
// (INSTR_ONLY=storage), to tell how much of the distance from the least to the gateway comes from
// the sockets alone: V8 sees Node's stream and event code with more shapes of receiver, and
// property loads that one shape kept fast become generic ones.
// LEAST_REFERENCE (the script), STORAGE_POSTGRES and STORAGE_REDIS from env, besides the
// reference's own PORT, UPSTREAM and CONTRACT.
import { createRequire } from 'node:module';
import path from 'node:path';

// From the project, as the reference takes undici.
const require = createRequire(path.join(process.cwd(), 'package.json'));
const pg = require('pg');
const { Redis } = require('ioredis');

// Named, so that pg_stat_activity and CLIENT LIST tell them (test/bench/leastWithStorage.test.ts).
const postgres = new pg.Client({ connectionString: process.env.STORAGE_POSTGRES, application_name: 'least-with-storage' });
await postgres.connect();
await postgres.query('LISTEN least_with_storage');
const redis = new Redis(process.env.STORAGE_REDIS, { connectionName: 'least-with-storage' });
setInterval(() => {
  postgres.query('SELECT 1').catch(() => {});
  redis.get('least-with-storage').catch(() => {});
}, 1000).unref();

await import(process.env.LEAST_REFERENCE);
