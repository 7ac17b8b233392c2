// The suite in two tiers (issue 69): `npm test` runs the fast tier, on both Nodes CI promises;
// `npm run test:system` (vitest.system.config.ts) runs the system tier once, on the shipped Node,
// one file at a time, so that what it starts (containers, browsers, proxies, clusters of processes,
// previous releases) neither competes with another file for the two cores nor makes another file's
// time bounds flake. Which tier a file is in is decided here and checked by
// test/architecture/testTiers.test.ts; the convention for new files is in test/README.md.
import { configDefaults, defineConfig } from 'vitest/config';

/**
 * Where the system tier's future files go, by folder or by name: every file they match is in the
 * system tier, none in the fast one.
 */
export const SYSTEM_CONVENTION = [
  'test/browser/**/*.test.ts',
  'test/ship/**/*.test.ts',
  'test/failover/**/*.test.ts',
  'test/release/**/*.test.ts',
  'test/**/*.browser.test.ts',
  'test/**/*.system.test.ts',
];

/** The system tier's files outside the convention's folders and names, each with what it starts. */
export const SYSTEM_FILES = [
  'test/decisions/proxies.test.ts', // nginx and Caddy in front of the decisions listener
  'test/decisions/reservedHeaders.test.ts', // nginx and Caddy, as documented today and before organizations
  'test/ops/pgbouncer.test.ts', // a PgBouncer in transaction mode
  'test/ops/rollingDeploy.test.ts', // nginx in front of built CLIs replaced one by one
  'test/ops/rollingUpgrade.test.ts', // the previous release built from git archive, then this one
  'test/storage/expandThenContract.test.ts', // the previous release's CLI on this release's migrations
  'test/ops/npmPack.test.ts', // the release: npm pack, installed in an empty directory and started
  'test/ops/dockerRun.test.ts', // docs/operating.md's docker run recipe on the built CLI
  'test/docs/commands.test.ts', // the docs' pasted commands: curl, the gateway command, openssl
  'test/decisions/twoInstances.test.ts', // docs/decisions.md's two-instance recipe in real processes
  'test/demo/demo.test.ts', // npm run demo and every command it prints
  'test/auth/oidcDocs.test.ts', // docs/identity-providers.md's npm run idp beside a gateway
  'test/ops/backup.test.ts', // docs/operating.md's backups: gateway backup/restore, pg_dump/pg_restore
  'test/storage/redisCluster.test.ts', // a 3-master Redis Cluster of redis-servers
  'test/storage/redisSentinel.test.ts', // a Sentinel group forced through a failover under load
  'test/ops/workers.test.ts', // server.workers: N gateway processes, killed and replaced
  'test/ops/idleCost.test.ts', // 8 instances' per-second rates, which a loaded machine skews
];

export const SYSTEM_TESTS = [...SYSTEM_CONVENTION, ...SYSTEM_FILES];

/** What both tiers share (vitest.system.config.ts and vitest.stryker.config.ts start from this file). */
export const sharedTestOptions = {
  globalSetup: ['test/helpers/globalSetup.ts'],
  pool: 'forks' as const,
  testTimeout: 30_000,
  hookTimeout: 60_000,
  // expect.poll's default of 1 s is short for what the tests wait on through the database (a
  // webhook sent from the outbox, a mail): on a loaded 2-core CI machine such a wait has taken
  // over a second. Only a failing wait takes longer.
  expect: { poll: { timeout: 5_000 } },
};

export default defineConfig({
  test: {
    ...sharedTestOptions,
    include: ['test/**/*.test.ts'],
    exclude: [...configDefaults.exclude, ...SYSTEM_TESTS],
    maxWorkers: 2,
    // Each file starts its own gateways; files run in parallel on two workers.
    fileParallelism: true,
    // A worker runs file after file in one process, so the gateway's modules (fastify, ajv, pg,
    // undici, jose…) are imported once a worker, not once a file: importing them was a quarter of
    // the tier's time (test/orgs/: 92 s of CPU with a process a file, 61 s without). Every file
    // starts and closes its own gateways, databases and Redis prefixes, and restores the timers,
    // spies and environment it changes, so a file finds the process as the one before left it.
    isolate: false,
  },
});
