// One gateway on the run's database for the describe block that asks for it: started before the
// block's tests, closed after them with the run's SQL pool. What the housekeeping sweeps' tests
// (test/storage) each wrote by hand.
import { afterAll, beforeAll } from 'vitest';
import type { Config } from '../../src/config/schema.js';
import { closeSql, startTestGateway, testConfig, type TestGateway } from './gateway.js';

/** The block's gateway, to call inside its tests (before beforeAll there is none: it throws). */
export function blockGateway(config: Config = testConfig()): () => TestGateway {
  let gw: TestGateway | undefined;
  beforeAll(async () => {
    gw = await startTestGateway(config);
  });
  afterAll(async () => {
    await gw?.close();
    await closeSql();
  });
  return () => {
    if (!gw) throw new Error('blockGateway(): asked for outside the block\'s tests');
    return gw;
  };
}
