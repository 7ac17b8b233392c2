// The outbox worker (src/webhooks/outbox.ts) when its database fails or its instance stops, in this
// process (deliveries.durability.test.ts stops instances that are processes of their own): a claim
// the database refuses (one warning an outage, one line when claims work again, the messages
// stored meanwhile sent then), a message whose attempts instances that died used up, a stop with an
// attempt in flight (handed back, or left to its lease when the database refuses that too), and the
// purge of finished messages, failing and not.
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Database } from '../../src/storage/database/index.js';
import { failingStatements } from '../helpers/failingDatabase.js';
import type { OutboxWorker } from '../../src/webhooks/outbox.js';
import { closeSql, describeWithServices, eventually, loggedLines, makeUser, type TestGateway } from '../helpers/gateway.js';
import { outboxRows, registerWebhook, startIsolatedDeliveries, type Behaviour, type IsolatedDeliveries } from '../helpers/webhookReceiver.js';

/** Until the returned function is called, `db` refuses every transaction, and each statement whose text matches `statements`. */
const outage = (db: Database, statements = /^$/) => failingStatements(db, statements, () => new Error('the test\'s outage'), { transactions: true });

const worker = (gw: TestGateway) => gw.services.deliveries as unknown as OutboxWorker;

describeWithServices('the outbox worker through outages and stops', () => {
  let own: IsolatedDeliveries | undefined;
  afterEach(async () => {
    await own?.close();
    own = undefined;
  });
  afterAll(closeSql);

  /** An instance on a database of its own, a receiver answering `behaviour`, a pro user whose webhook it is (webhook.test under way). */
  async function subscribed(behaviour: Behaviour, timeout = '5s') {
    own = await startIsolatedDeliveries({ retries: 2, timeout });
    const gw = own.gateways[0]!;
    const r = await own.receiver(behaviour);
    const user = await makeUser(gw, { plan: 'pro' });
    await registerWebhook(gw, user, r.url);
    return { gw, r, user, db: own.db };
  }

  it('claims refused: one warning an outage, one line when they work again; then what was stored meanwhile is sent, a message whose attempts are used up fails unsent', async () => {
    const { gw, r, user, db } = await subscribed(() => 200);
    await eventually(() => r.deliveries.length === 1);

    const restore = outage(gw.services.db);
    try {
      for (let n = 0; n < 3; n++) await worker(gw).settled();
      await gw.services.events.emit(user.id, 'security.alert', { n: 1 });
      await gw.services.events.emit(user.id, 'security.alert', { n: 2 });
      // The second: its attempts used by instances that died mid-attempt (each claim counts one).
      await db.sql("UPDATE webhook_deliveries SET attempts = max_attempts WHERE user_id = $1 AND body::jsonb->'data'->>'n' = '2'", [user.id]);
    } finally {
      restore();
    }
    await worker(gw).settled();
    expect(loggedLines(gw, 'webhook deliveries: cannot claim messages; retrying every poll')).toMatchObject([{ level: 40, err: 'the test\'s outage' }]);
    await eventually(async () => (await outboxRows(user.id, db.sql)).every((row) => row.status !== 'pending'));
    expect(loggedLines(gw, 'webhook deliveries: claiming messages again')).toHaveLength(1);
    const rows = await db.sql<{ n: string; status: string; last_error: string | null }>(
      "SELECT body::jsonb->'data'->>'n' AS n, status, last_error FROM webhook_deliveries WHERE user_id = $1 AND type = 'security.alert' ORDER BY n", [user.id]);
    expect(rows).toEqual([{ n: '1', status: 'delivered', last_error: null }, { n: '2', status: 'failed', last_error: 'retries exhausted' }]);
    expect(r.deliveries.map((d) => (JSON.parse(d.body) as { data: { n?: number } }).data.n)).toEqual([undefined, 1]);
    expect(loggedLines(gw, 'webhook not delivered: retries exhausted')).toMatchObject([{ level: 40, userId: user.id, type: 'security.alert' }]);
  });

  describe('a stop with an attempt in flight', () => {
    async function inFlight() {
      const { gw, r, user, db } = await subscribed(() => 'hang', '30s');
      await eventually(() => r.hanging === 1);
      return { gw, user, leases: () => db.sql<{ status: string; attempts: number; leased: boolean }>(
        'SELECT status, attempts, lease IS NOT NULL AS leased FROM webhook_deliveries WHERE user_id = $1', [user.id]) };
    }

    it('hands it back: due at once for the other instances, the attempt not counted', async () => {
      const { gw, leases } = await inFlight();
      expect(await leases()).toEqual([{ status: 'pending', attempts: 1, leased: true }]);
      await gw.close();
      expect(await leases()).toEqual([{ status: 'pending', attempts: 0, leased: false }]);
      expect(loggedLines(gw, 'shutting down: webhook attempts in flight handed back to the other instances')).toMatchObject([{ level: 30, handedBack: 1 }]);
    });

    it('the database refusing the hand-back: said, and the message left to its lease', async () => {
      const { gw, leases } = await inFlight();
      const restore = outage(gw.services.db, /unnest/);
      try {
        await gw.close();
      } finally {
        restore();
      }
      expect(await leases()).toEqual([{ status: 'pending', attempts: 1, leased: true }]);
      expect(loggedLines(gw, 'shutting down: webhook attempts in flight could not be handed back; they are retried when their lease lapses'))
        .toMatchObject([{ level: 40, inFlight: 1 }]);
    });
  });

  it('purges messages finished over 7 days ago, says how many; a purge the database refuses is said and tried again later', async () => {
    const { gw, r, user, db } = await subscribed(() => 200);
    await gw.services.events.emit(user.id, 'security.alert', {});
    await eventually(() => r.deliveries.length === 2);
    await eventually(async () => (await outboxRows(user.id, db.sql)).every((row) => row.status === 'delivered'));
    await db.sql("UPDATE webhook_deliveries SET finished_at = now() - interval '7 days 1 minute' WHERE user_id = $1 AND type = 'security.alert'", [user.id]);

    const restore = outage(gw.services.db, /^DELETE FROM webhook_deliveries/);
    try {
      expect(await worker(gw).purge()).toBe(0);
    } finally {
      restore();
    }
    expect(loggedLines(gw, 'webhook deliveries: purge of old messages failed; tried again later')).toMatchObject([{ level: 40, err: 'the test\'s outage' }]);
    expect(await worker(gw).purge()).toBe(1);
    expect(loggedLines(gw, 'webhook deliveries: messages finished over 7 days ago purged')).toMatchObject([{ level: 30, purged: 1 }]);
    expect((await outboxRows(user.id, db.sql)).map((row) => row.type)).toEqual(['webhook.test']);
  });
});
