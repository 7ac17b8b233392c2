import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/helpers/globalSetup.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // expect.poll's default of 1 s is short for what the tests wait on through the database (a
    // webhook sent from the outbox, a mail): on a loaded 2-core CI machine such a wait has taken
    // over a second. Only a failing wait takes longer.
    expect: { poll: { timeout: 5_000 } },
    // Each file starts its own gateways; files run in parallel on two workers.
    fileParallelism: true,
  },
});
