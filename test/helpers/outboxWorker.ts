// The outbox worker (src/webhooks/outbox.ts) driven directly, beside an instance on a database of
// its own (test/webhooks/outbox*.test.ts): its messages are of a handler-only type (billing's meter
// events), which the instance's own worker, having no handler for them, never claims, and its feed
// never announces anything, so only what the test asks (settled(), close(), purge()) and its own
// timers move it.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { Logger } from 'pino';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { METER_EVENT_TYPE } from '../../src/billing/meterReporter.js';
import type { Database } from '../../src/storage/database/db.js';
import type { ClaimedDelivery } from '../../src/storage/events/index.js';
import { CLAIM_LOCK } from '../../src/storage/events/webhookDeliveries.js';
import { DEFAULT_LIMITS, OutboxWorker, type DeliveryLimits } from '../../src/webhooks/outbox.js';
import type { AttemptResult } from '../../src/webhooks/sender.js';
import { closeSql, eventually, type TestGateway } from './gateway.js';
import { startIsolatedDeliveries, type IsolatedDeliveries } from './webhookReceiver.js';

export type Handler = (job: ClaimedDelivery, signal: AbortSignal) => Promise<AttemptResult>;
export type Feed = ConstructorParameters<typeof OutboxWorker>[0]['feed'];
export type FeedHandlers = Parameters<Feed['subscribe']>[0];

interface WorkerOptions {
  db?: Database;
  timeout?: number;
  log?: Logger;
  feed?: Feed;
  /** false: made, never started */
  start?: boolean;
  /** true: started, its start's own pass not waited for */
  unsettled?: boolean;
}

/** A change feed that never announces anything. */
const SILENT: Feed = { subscribe: () => () => {} };

/**
 * Registers the file's hooks (the instance for the file; after each test, its workers closed and
 * its messages deleted) and gives the tools its tests drive the worker with. `own` and `gw` are
 * there once the file's beforeAll has run.
 */
export function outboxBench() {
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

  /**
   * A started worker whose handler for the test's messages is `handler`; it polls once an hour, on
   * the instance's database and logger unless given others. webhooks.timeout 100 ms unless told:
   * an attempt's deadline is 2 × 100 ms + 1 s.
   */
  async function worker(handler: Handler, limits: Partial<DeliveryLimits> = {}, options: WorkerOptions = {}): Promise<OutboxWorker> {
    const { db = gw.services.db, timeout = 100, log = gw.services.log, feed = SILENT, start = true } = options;
    const { config, clock, metrics } = gw.services;
    const w = new OutboxWorker(
      { db, feed, config: { ...config.webhooks, timeout }, clock, log, metrics, handlers: { [METER_EVENT_TYPE]: handler } },
      { ...DEFAULT_LIMITS, pollMs: 3_600_000, ...limits },
    );
    workers.push(w);
    if (!start) return w;
    w.start();
    if (!options.unsettled) await w.settled(); // the start's own pass
    return w;
  }

  /** A message stored as a meter event is, of a subject of its own unless named (attempts are ordered within a subject); `attempts` used already. */
  async function stored(attempts = 0, subject?: string): Promise<string> {
    const id = `msg_${randomUUID()}`;
    await own.db.sql('INSERT INTO webhook_deliveries (id, user_id, subject, type, body, max_attempts, attempts) VALUES ($1, NULL, $2, $3, $4, 3, $5)',
      [id, subject ?? `meter:${id}`, METER_EVENT_TYPE, '{}', attempts]);
    return id;
  }

  /** Another handle of the instance's database, counting a worker's claims (each one transaction) and purges (a DELETE). */
  function countingDb(): { db: Database; claims: number; purges: number } {
    const counts = { claims: 0, purges: 0 };
    const { db } = gw.services;
    const counted = new Proxy(db, {
      get: (target, key) => {
        if (key === 'transaction') return (...args: Parameters<Database['transaction']>) => { counts.claims++; return target.transaction(...args); };
        if (key === 'query') {
          return (...args: Parameters<Database['query']>) => {
            if (args[0].trimStart().startsWith('DELETE')) counts.purges++;
            return target.query(...args);
          };
        }
        const value: unknown = Reflect.get(target, key);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    return Object.assign(counts, { db: counted });
  }

  /**
   * The outbox's claim lock (CLAIM_LOCK, which every claim takes first), held on a connection of the
   * test's once a claim waits behind it: the test puts itself between a pass's start and its claim.
   */
  async function holdClaimLock(): Promise<{ release(): Promise<void>; end(): Promise<void> }> {
    const locker = new pg.Client({ connectionString: own.db.url });
    await locker.connect();
    await locker.query('SELECT pg_advisory_lock($1)', [CLAIM_LOCK]);
    return {
      release: async () => { await locker.query('SELECT pg_advisory_unlock($1)', [CLAIM_LOCK]); },
      end: () => locker.end(),
    };
  }

  /** Until a claim waits for the lock (the instance's own worker's, maybe). */
  const claimWaiting = () => eventually(async () => (await own.db.sql(
    "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'SELECT pg_advisory_xact_lock%'")).length > 0);

  /** A message delivered 8 days ago, past the purge's 7; and how many such are left. */
  const finishedLongAgo = () => own.db.sql(`INSERT INTO webhook_deliveries (id, user_id, subject, type, body, max_attempts, status, finished_at)
    VALUES ($1, NULL, 'meter:old', $2, '{}', 1, 'delivered', now() - interval '8 days')`, [`msg_${randomUUID()}`, METER_EVENT_TYPE]);
  const oldLeft = async () => (await own.db.sql('SELECT 1 FROM webhook_deliveries WHERE subject = $1', ['meter:old'])).length;

  const row = async (id: string) => (await own.db.sql<{ status: string; attempts: number; leased: boolean }>(
    'SELECT status, attempts, lease IS NOT NULL AS leased FROM webhook_deliveries WHERE id = $1', [id]))[0];
  const lastError = async (id: string) => (await own.db.sql<{ last_error: string | null }>('SELECT last_error FROM webhook_deliveries WHERE id = $1', [id]))[0]!.last_error;

  /** The instance's count of billing attempts with this outcome (gateway_webhook_deliveries_total{kind="billing"}). */
  async function counted(outcome: string): Promise<number> {
    const { values } = await gw.services.metrics.webhookDeliveries.get();
    return values.find((v) => v.labels.kind === 'billing' && v.labels.outcome === outcome)?.value ?? 0;
  }

  return {
    get own() { return own; },
    get gw() { return gw; },
    workers, worker, stored, countingDb, holdClaimLock, claimWaiting, finishedLongAgo, oldLeft, row, lastError, counted,
  };
}
