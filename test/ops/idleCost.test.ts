// Idle cost per instance does not grow with the fleet (issue 28, CONTRACT §18): with N idle
// instances on one Postgres, the transactions Postgres runs per instance and second (the
// statements the instance sends, and the wake-ups of its LISTEN backend, one per NOTIFY in the
// database whatever the channel) and the notifications each hears per second are the same at N = 1
// and N = 8. Before, every instance beat on its own: 5·N² of both a second for a fleet doing nothing.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { closeSql, describeWithServices, sql, startTestGateway, testConfig, throwawayDatabase, type TestGateway, type ThrowawayDatabase } from '../helpers/gateway.js';

const SETTLE_MS = 2500;
const WINDOW_MS = 5000;

describeWithServices('idle cost per instance', () => {
  let db: ThrowawayDatabase;
  beforeAll(async () => { db = await throwawayDatabase(); });
  afterAll(async () => { await db?.drop(); await closeSql(); });

  const commits = async () => Number((await sql<{ n: string }>('SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = $1', [new URL(db.url).pathname.slice(1)]))[0]!.n);

  /** Per instance and per second, while `n` instances sit idle: transactions, and notifications heard. */
  async function idle(n: number): Promise<{ transactions: number; notifications: number }> {
    const gateways: TestGateway[] = [];
    try {
      for (let i = 0; i < n; i++) gateways.push(await startTestGateway(testConfig({ storage: db.storage })));
      // Autovacuum would otherwise analyze the freshly migrated tables in the middle of a window.
      await db.sql('VACUUM ANALYZE');
      await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
      const heardBefore = gateways.map((g) => g.services.feed.notificationsHeard);
      const before = await commits();
      await new Promise((resolve) => setTimeout(resolve, WINDOW_MS));
      // Statistics reach pg_stat_database within a second of the transaction.
      await new Promise((resolve) => setTimeout(resolve, 1200));
      const after = await commits();
      const heard = gateways.map((g, i) => g.services.feed.notificationsHeard - heardBefore[i]!);
      const seconds = (WINDOW_MS + 1200) / 1000;
      return { transactions: (after - before) / n / seconds, notifications: Math.max(...heard) / (WINDOW_MS / 1000) };
    } finally {
      await Promise.all(gateways.map((g) => g.close()));
    }
  }

  it('is the same for one instance and for eight', async () => {
    const one = await idle(1);
    const eight = await idle(8);
    expect(one.transactions).toBeGreaterThan(0);
    expect(one.notifications).toBeGreaterThan(0);
    // Measured on a shared machine: equal within a factor that N² (8×) or N (poll per instance per peer) could never fit.
    console.log(`idle, per instance and second: ${JSON.stringify({ one, eight })}`);
    // Measured on a shared machine: equal within a margin that N (8×) could never fit.
    expect(eight.transactions / one.transactions, JSON.stringify({ one, eight })).toBeLessThan(1.5);
    expect(eight.notifications / one.notifications, JSON.stringify({ one, eight })).toBeLessThan(1.5);
  }, 60_000);
});
