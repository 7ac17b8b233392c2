// The outbox worker (src/webhooks/outbox.ts) driven directly, beside an instance on a database of
// its own: its messages are of a handler-only type (billing's meter events), which the instance's
// own worker, having no handler for them, never claims, and its feed never announces anything, so
// only what the test asks (settled(), close(), purge()) moves it. What settled() waits for, what
// close() waits for and what it hands back, a claim that a close overtakes, and a purge of more
// than one batch.
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { METER_EVENT_TYPE } from '../../src/billing/meterReporter.js';
import type { ClaimedDelivery } from '../../src/storage/events/index.js';
import { DEFAULT_LIMITS, OutboxWorker } from '../../src/webhooks/outbox.js';
import type { AttemptResult } from '../../src/webhooks/sender.js';
import { closeSql, describeWithServices, loggedLines, type TestGateway } from '../helpers/gateway.js';
import { startIsolatedDeliveries, type IsolatedDeliveries } from '../helpers/webhookReceiver.js';

type Handler = (job: ClaimedDelivery, signal: AbortSignal) => Promise<AttemptResult>;

describeWithServices('the outbox worker, driven directly', () => {
  let own: IsolatedDeliveries;
  let gw: TestGateway;
  const workers: OutboxWorker[] = [];

  beforeAll(async () => {
    own = await startIsolatedDeliveries({ retries: 2, timeout: '2s' });
    gw = own.gateways[0]!;
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.close()));
    await own.db.sql('DELETE FROM webhook_deliveries WHERE type = $1', [METER_EVENT_TYPE]);
  });
  afterAll(async () => {
    await own?.close();
    await closeSql();
  });

  /** A started worker whose handler for the test's messages is `handler`; it polls once an hour. */
  async function worker(handler: Handler): Promise<OutboxWorker> {
    const { db, config, clock, log, metrics } = gw.services;
    const w = new OutboxWorker(
      { db, feed: { subscribe: () => () => {} }, config: config.webhooks, clock, log, metrics, handlers: { [METER_EVENT_TYPE]: handler } },
      { ...DEFAULT_LIMITS, pollMs: 3_600_000 },
    );
    workers.push(w);
    w.start();
    await w.settled(); // the start's own pass, over nothing yet
    return w;
  }

  /** A message stored as a meter event is, of a subject of its own (attempts are ordered within a subject). */
  async function stored(): Promise<string> {
    const id = `msg_${randomUUID()}`;
    await own.db.sql('INSERT INTO webhook_deliveries (id, user_id, subject, type, body, max_attempts) VALUES ($1, NULL, $2, $3, $4, 3)', [id, `meter:${id}`, METER_EVENT_TYPE, '{}']);
    return id;
  }

  const row = async (id: string) => (await own.db.sql<{ status: string; attempts: number; leased: boolean }>(
    'SELECT status, attempts, lease IS NOT NULL AS leased FROM webhook_deliveries WHERE id = $1', [id]))[0];

  it('settled() resolves once a pass begun after the call has looked at what was stored before it: the handler has its message', async () => {
    const seen: string[] = [];
    const w = await worker(async (job) => {
      seen.push(job.id);
      return { outcome: 'success' };
    });
    const id = await stored();
    await w.settled();
    expect(seen).toEqual([id]);
    // And once more, with the message's attempt still being recorded or recorded: nothing new to hand over.
    await w.settled();
    expect(seen).toEqual([id]);
  });

  it('close() gives an attempt in flight a moment: one that ends within it is recorded, not handed back', async () => {
    const w = await worker(async () => {
      await new Promise((resolve) => setTimeout(resolve, 300));
      return { outcome: 'success' };
    });
    const id = await stored();
    await w.settled();
    expect(await row(id)).toEqual({ status: 'pending', attempts: 1, leased: true });
    await w.close();
    expect(await row(id)).toEqual({ status: 'delivered', attempts: 1, leased: false });
    expect(loggedLines(gw, 'shutting down: webhook attempts in flight handed back to the other instances')).toEqual([]);
  });

  it('close() cuts an attempt that outlasts the moment: its signal aborts for the shutdown, and it is handed back uncounted', async () => {
    const reasons: unknown[] = [];
    const w = await worker((_job, signal) => new Promise(() => {
      signal.addEventListener('abort', () => reasons.push(signal.reason));
    }));
    const id = await stored();
    await w.settled();
    const started = Date.now();
    await w.close();
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(reasons).toEqual(['shutdown']);
    expect(await row(id)).toEqual({ status: 'pending', attempts: 0, leased: false });
    expect(loggedLines(gw, 'shutting down: webhook attempts in flight handed back to the other instances').at(-1)).toMatchObject({ handedBack: 1 });
  });

  it('a claim that a close overtakes hands its messages back at once: none is attempted', async () => {
    const seen: string[] = [];
    const w = await worker(async (job) => {
      seen.push(job.id);
      return { outcome: 'success' };
    });
    const id = await stored();
    // The pass starts (its claim goes to the database); the close begins before it answers.
    const passed = w.settled();
    await w.close();
    await passed;
    expect(seen).toEqual([]);
    expect(await row(id)).toEqual({ status: 'pending', attempts: 0, leased: false });
  });

  it('purges every finished message past the 7 days, batch after batch (1000 a statement)', async () => {
    const w = await worker(async () => ({ outcome: 'success' }));
    await own.db.sql(`INSERT INTO webhook_deliveries (id, user_id, subject, type, body, max_attempts, status, finished_at)
      SELECT 'msg_old_' || n, NULL, 'meter:old', $1, '{}', 1, 'delivered', now() - interval '8 days' FROM generate_series(1, 1001) AS n`, [METER_EVENT_TYPE]);
    expect(await w.purge()).toBe(1001);
    expect(await own.db.sql('SELECT 1 FROM webhook_deliveries WHERE subject = $1', ['meter:old'])).toEqual([]);
  });
});
