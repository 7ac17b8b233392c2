// The system tier (`npm run test:system`; its files: SYSTEM_TESTS in vitest.config.ts): run once in
// CI, on the Node the Dockerfile ships, one file at a time and no other test file beside it, so
// that a container build, a browser or a failover gets the machine to itself and its time bounds
// hold.
import { defineConfig } from 'vitest/config';
import { SYSTEM_TESTS, sharedTestOptions } from './vitest.config.js';

export default defineConfig({
  test: {
    ...sharedTestOptions,
    include: [...SYSTEM_TESTS],
    maxWorkers: 1,
    fileParallelism: false,
  },
});
