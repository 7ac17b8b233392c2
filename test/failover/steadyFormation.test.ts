// helpers/pgAutoFailover.ts's steady(), which the failover tests start each scenario from (CONTRACT
// §32's counts hold only under synchronous replication): a formation whose monitor reports a
// primary and a secondary is not steady while the primary acknowledges commits its standby never
// confirmed, and steady() has such a primary apply its settings again. pg_auto_failover leaves a
// primary so when the standby's goal was not `secondary` as the primary entered `primary`; here
// the primary is made asynchronous by hand, as that race leaves it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testServices } from '../helpers/gateway.js';
import { hasPgAutoFailover, nodeQuery, startAutoFailover, synchronous, type AutoFailover } from '../helpers/pgAutoFailover.js';

const describeWithCluster = (hasPgAutoFailover || process.env.REQUIRE_SERVICES === '1') && testServices ? describe : describe.skip;

describeWithCluster('a steady pg_auto_failover formation', () => {
  let cluster: AutoFailover;

  beforeAll(async () => {
    cluster = await startAutoFailover();
  }, 180_000);

  afterAll(async () => {
    await cluster?.stop();
  }, 60_000);

  it('is one whose primary replicates synchronously: an asynchronous one is made to apply its settings again', async () => {
    const primary = await cluster.primary();
    expect(synchronous(await cluster.replication(primary))).toBe(true);
    // As pg_auto_failover's keeper writes it (ALTER SYSTEM), with the value the race leaves.
    await nodeQuery(primary.port, 'postgres', "ALTER SYSTEM SET synchronous_standby_names = ''");
    await nodeQuery(primary.port, 'postgres', 'SELECT pg_reload_conf()');
    await expect.poll(async () => (await cluster.replication(primary)).names, { timeout: 5000 }).toBe('');

    await cluster.steady();
    const after = await cluster.replication(primary);
    expect(after.names).toMatch(/^ANY 1 \(pgautofailover_standby_\d+\)$/);
    expect(after.states).toContain('quorum');
    const events = await cluster.events();
    expect(events.some((e) => e.node === primary.name && e.goal === 'apply_settings')).toBe(true);
  }, 120_000);
});
