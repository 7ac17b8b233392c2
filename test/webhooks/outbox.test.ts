// The outbox worker (src/webhooks/outbox.ts) driven directly, beside an instance on a database of
// its own: its messages are of a handler-only type (billing's meter events), which the instance's
// own worker, having no handler for them, never claims, and its feed never announces anything, so
// only what the test asks (settled(), close(), purge()) and its own timers move it. What settled()
// and close() wait for and what a close hands back; what wakes the worker (its start, a poll, the
// feed, a freed slot, a message's retry time) and what never does (a full worker, a message held
// back, polled a second apart); the concurrency; retries, their backoff and giving up; what is
// counted and logged; the purge.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import pino, { type Logger } from 'pino';
import { afterAll, afterEach, beforeAll, expect, it, vi } from 'vitest';
import { METER_EVENT_TYPE } from '../../src/billing/meterReporter.js';
import type { Database } from '../../src/storage/database/db.js';
import type { ClaimedDelivery } from '../../src/storage/events/index.js';
import { CLAIM_LOCK } from '../../src/storage/events/webhookDeliveries.js';
import { DEFAULT_LIMITS, OutboxWorker, type DeliveryLimits } from '../../src/webhooks/outbox.js';
import type { AttemptResult } from '../../src/webhooks/sender.js';
import { failingStatements } from '../helpers/failingDatabase.js';
import { closeSql, describeWithServices, eventually, loggedLines, type TestGateway } from '../helpers/gateway.js';
import { startIsolatedDeliveries, type IsolatedDeliveries } from '../helpers/webhookReceiver.js';

type Handler = (job: ClaimedDelivery, signal: AbortSignal) => Promise<AttemptResult>;
type Feed = ConstructorParameters<typeof OutboxWorker>[0]['feed'];
type FeedHandlers = Parameters<Feed['subscribe']>[0];

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

  it('settled() waits for the pass it asked for, not for the passes asked after it', async () => {
    // The worker's own database, whose transactions (its claims) wait for `gate` while it is set.
    const { db } = gw.services;
    let gate: Promise<void> | undefined;
    const gated: Database = Object.assign(Object.create(db) as Database, {
      transaction: (async (work: Parameters<Database['transaction']>[0]) => {
        await gate;
        return db.transaction(work);
      }) as Database['transaction'],
    });
    const w = await worker(async () => ({ outcome: 'success' }), {}, { db: gated });
    // The claim lock held: the pass that settled() began waits in the database.
    const lock = await holdClaimLock();
    let open = () => {};
    try {
      let settled = false;
      const mine = w.settled().then(() => { settled = true; });
      await claimWaiting();
      await new Promise((resolve) => setTimeout(resolve, 100)); // (the waiter seen may be the instance's own worker's)
      // Another caller asks meanwhile: a second pass is to follow the first, and its claim waits
      // at the gate while the first pass, the lock let go, is answered.
      const later = w.settled();
      gate = new Promise((resolve) => { open = resolve; });
      await lock.release();
      await eventually(() => settled, 1500);
      open();
      await Promise.all([mine, later]);
    } finally {
      open();
      await lock.end();
    }
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

  it('a claim that a close overtakes is waited for, and hands its messages back at once: none is attempted', async () => {
    const seen: string[] = [];
    const w = await worker(async (job) => {
      seen.push(job.id);
      return { outcome: 'success' };
    });
    const id = await stored();
    // The claim lock held: the pass's claim waits in the database, and the close begins before it answers.
    const lock = await holdClaimLock();
    try {
      const passed = w.settled();
      await claimWaiting();
      let closed = false;
      const closing = w.close().then(() => { closed = true; });
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(closed).toBe(false);
      await lock.release();
      await Promise.all([closing, passed]);
    } finally {
      await lock.end();
    }
    expect(seen).toEqual([]);
    expect(await row(id)).toEqual({ status: 'pending', attempts: 0, leased: false });
  });

  it('an attempt past its deadline (2 × webhooks.timeout + 1 s) is cut: its signal aborts, it counts as a timeout and is retried later', async () => {
    const aborted: string[] = [];
    const w = await worker((_job, signal) => new Promise(() => {
      signal.addEventListener('abort', () => aborted.push((signal.reason as Error).name));
    }));
    const before = await counted('timeout');
    const id = await stored();
    await w.settled();
    await eventually(async () => (await row(id))?.leased === false, 5000);
    expect(aborted).toEqual(['TimeoutError']);
    expect(await row(id)).toEqual({ status: 'pending', attempts: 1, leased: false });
    expect(await lastError(id)).toBe('no outcome within 1200 ms');
    expect(await counted('timeout')).toBe(before + 1);
  });

  it('a slot freed wakes the worker: with one slot, the second message follows the first without waiting for a poll', async () => {
    const seen: string[] = [];
    const w = await worker(async (job) => {
      seen.push(job.id);
      await new Promise((resolve) => setTimeout(resolve, 200));
      return { outcome: 'success' };
    }, { concurrency: 1 });
    const ids = [await stored(), await stored()];
    await w.settled();
    await eventually(() => seen.length === 2, 5000);
    expect(seen.sort()).toEqual(ids.sort());
  });

  it('never has more attempts in flight than its concurrency, however many wakes come at once, and a full worker claims nothing', async () => {
    const counting = countingDb();
    let inFlight = 0;
    let most = 0;
    const releases: Array<() => void> = [];
    const w = await worker(async () => {
      most = Math.max(most, ++inFlight);
      await new Promise<void>((resolve) => releases.push(resolve));
      inFlight--;
      return { outcome: 'success' };
    }, { concurrency: 1 }, { db: counting.db, timeout: 10_000 });
    const ids = [await stored(), await stored(), await stored()];
    // Three wakes at once, each of which could claim the one free slot.
    await Promise.all([w.settled(), w.settled(), w.settled()]);
    expect([inFlight, releases.length]).toEqual([1, 1]);
    // Full: no claim until a slot frees (its poll is an hour away, and nothing else is due).
    const before = counting.claims;
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(counting.claims - before).toBe(0);
    for (let released = 0; released < ids.length; released++) {
      await eventually(() => releases.length > released, 5000);
      releases[released]!();
    }
    await eventually(async () => (await Promise.all(ids.map(row))).every((r) => r?.status === 'delivered'), 5000);
    expect(most).toBe(1);
  });

  it('a message that its subject\'s attempt in flight holds back is looked at again about once a second, not in a loop', async () => {
    const counting = countingDb();
    let release!: () => void;
    const held = new Promise<void>((resolve) => { release = resolve; });
    const subject = `meter:${randomUUID()}`;
    const first = await stored(0, subject);
    const second = await stored(0, subject);
    const w = await worker(async (job) => {
      if (job.id === first) await held;
      return { outcome: 'success' };
    }, {}, { db: counting.db, timeout: 10_000 }); // its attempt's deadline (21 s) is not what wakes it
    await w.settled();
    expect([await row(first), await row(second)]).toEqual([{ status: 'pending', attempts: 1, leased: true }, { status: 'pending', attempts: 0, leased: false }]);
    const [before, purgesBefore] = [counting.claims, counting.purges]; // the start's own purge aside
    await new Promise((resolve) => setTimeout(resolve, 2500));
    // Due, not claimable: looked at again (another instance's attempt may end), a second apart, where
    // a worker that woke at once would have claimed hundreds of times.
    expect(counting.claims - before).toBeGreaterThanOrEqual(1);
    expect(counting.claims - before).toBeLessThanOrEqual(5);
    expect(counting.purges - purgesBefore).toBe(0); // an hour apart
    release();
    await eventually(async () => (await row(second))?.status === 'delivered', 5000);
  });

  it('a refusal is logged with its subject; a message whose attempts are used up gives up, counted as such', async () => {
    const w = await worker(async () => ({ outcome: 'rejected', error: 'HTTP 400' }));
    const refused = await stored();
    const spent = await stored(3); // its attempts used by instances that died mid-attempt
    const gaveUp = await counted('gave_up');
    await w.settled();
    await eventually(async () => (await row(refused))?.status === 'failed' && (await row(spent))?.status === 'failed');
    expect(loggedLines(gw, 'webhook not delivered').find((l) => l.webhookId === refused))
      .toMatchObject({ level: 40, component: 'webhooks', subject: `meter:${refused}`, type: METER_EVENT_TYPE, error: 'HTTP 400' });
    expect(loggedLines(gw, 'webhook not delivered: retries exhausted').find((l) => l.webhookId === spent)).toMatchObject({ subject: `meter:${spent}`, attempt: 4 });
    expect(await lastError(spent)).toBe('retries exhausted');
    expect(await counted('gave_up')).toBe(gaveUp + 1);
  });

  it('the last attempt allowed, failed in a way worth retrying, gives up: failed with its error, counted, warned with it', async () => {
    const w = await worker(async () => ({ outcome: 'server_error', error: 'HTTP 503' }));
    const last = await stored(2); // of 3
    const gaveUp = await counted('gave_up');
    await w.settled();
    await eventually(async () => (await row(last))?.status === 'failed');
    expect(await row(last)).toEqual({ status: 'failed', attempts: 3, leased: false });
    expect(await lastError(last)).toBe('HTTP 503');
    expect(await counted('gave_up')).toBe(gaveUp + 1);
    expect(loggedLines(gw, 'webhook not delivered: retries exhausted').find((l) => l.webhookId === last))
      .toMatchObject({ level: 40, subject: `meter:${last}`, type: METER_EVENT_TYPE, attempt: 3, error: 'HTTP 503' });
  });

  it('a failed attempt worth retrying is due again after the backoff, doubled at each attempt, ±20 %; said with its error', async () => {
    // A minute's backoff: no message is due again while the test runs, however slow the machine.
    const w = await worker(async () => ({ outcome: 'server_error', error: 'HTTP 503' }), { backoffMs: 60_000, maxBackoffMs: 3_600_000 });
    // The jitter's draw pinned for the whole test (the lowest, then one near the highest: Math.random
    // is below 1), so that no attempt, however late, draws at random.
    const random = vi.spyOn(Math, 'random');
    try {
      /**
       * Five messages stored after the draw is pinned (the worker may attempt one as soon as it is
       * stored: CI saw a second round's message attempted under the first round's draw), attempted
       * and put back for later (a pass claims as many as the worker has slots: the rest follow).
       */
      const attempted = async (draw: number, attemptsBefore: number) => {
        random.mockReturnValue(draw);
        const ids: string[] = [];
        for (let i = 0; i < 5; i++) ids.push(await stored(attemptsBefore));
        await w.settled();
        await eventually(async () => (await own.db.sql<{ n: number }>(
          "SELECT count(*)::int AS n FROM webhook_deliveries WHERE id = ANY($1) AND last_error = 'HTTP 503' AND lease IS NULL", [ids]))[0]!.n === ids.length, 5000);
        return ids;
      };
      const firsts = await attempted(0, 0);
      const seconds = await attempted(0.99, 1); // of 3
      // Due again this long after the attempt began, within a second. A jitter computed otherwise
      // is half a minute or more away (the divided delay's 75 s and 100 s, the draw subtracted's
      // 48.5 s against 143.5 s, divided 393 s).
      const waits = async (ids: string[]) => (await own.db.sql<{ ms: number }>(
        'SELECT (extract(epoch FROM next_attempt_at - last_attempt_at) * 1000)::float8 AS ms FROM webhook_deliveries WHERE id = ANY($1)', [ids])).map((r) => r.ms);
      const off = (ms: number[], expected: number) => ms.filter((v) => Math.abs(v - expected) > 1_000);
      expect(off(await waits(firsts), 48_000)).toEqual([]); // 0.8 × 60 s
      expect(off(await waits(seconds), 143_520)).toEqual([]); // (0.8 + 0.99 × 0.4) × 120 s
      expect(loggedLines(gw, 'webhook attempt failed; will retry').find((l) => l.webhookId === seconds[0]))
        .toMatchObject({ level: 30, subject: `meter:${seconds[0]}`, attempt: 2, error: 'HTTP 503' });
    } finally {
      random.mockRestore();
    }
  });

  it('at debug level, says each message delivered or skipped, with its subject', async () => {
    const lines: Array<Record<string, unknown>> = [];
    const log = pino({ level: 'debug' }, { write: (line: string) => { lines.push(JSON.parse(line) as Record<string, unknown>); } });
    const w = await worker(async (job) => ({ outcome: job.id === skipped ? 'skipped' : 'success' }), {}, { log });
    const delivered = await stored();
    const skipped = await stored();
    await w.settled();
    await eventually(async () => (await row(delivered))?.status === 'delivered' && (await row(skipped))?.status === 'skipped');
    const said = (id: string) => lines.filter((l) => l.webhookId === id).map((l) => [l.level, l.msg, l.subject]);
    expect(said(delivered)).toEqual([[20, 'webhook delivered', `meter:${delivered}`]]);
    expect(said(skipped)).toEqual([[20, 'webhook not sent: no webhook or owner not an active pro user', `meter:${skipped}`]]);
  });

  it('a handler that throws is logged as such; an outcome that cannot be recorded is said, and the message left to its lease', async () => {
    const broken = await worker(async () => { throw new Error('the handler broke'); });
    const thrown = await stored();
    await broken.settled();
    await eventually(() => loggedLines(gw, 'webhook attempt failed unexpectedly').some((l) => l.webhookId === thrown));
    await broken.close();
    const w = await worker(async () => ({ outcome: 'success' }));
    const restore = failingStatements(gw.services.db, /SET status = \$3/, () => new Error('the test\'s outage'));
    try {
      const id = await stored();
      await w.settled();
      await eventually(() => loggedLines(gw, 'webhook attempt outcome could not be recorded; the message is attempted again').some((l) => l.webhookId === id));
      expect(loggedLines(gw, 'webhook attempt outcome could not be recorded; the message is attempted again').find((l) => l.webhookId === id))
        .toMatchObject({ level: 40, subject: `meter:${id}`, outcome: 'success', err: 'the test\'s outage' });
      expect(await row(id)).toEqual({ status: 'pending', attempts: 1, leased: true });
    } finally {
      restore();
    }
  });

  it('wakes by itself: at its start for what is due already, at each poll, and at the feed\'s webhookDue and resumed', async () => {
    const seen: string[] = [];
    const handler: Handler = async (job) => {
      seen.push(job.id);
      return { outcome: 'success' };
    };
    const due = await stored();
    const first = await worker(handler, {}, { unsettled: true }); // polls once an hour
    await eventually(() => seen.includes(due), 5000);
    await first.close();
    const polling = await worker(handler, { pollMs: 200 });
    const polled = await stored();
    await eventually(() => seen.includes(polled), 5000);
    await polling.close();
    let told: FeedHandlers | undefined;
    let unsubscribed = false;
    const announcing = await worker(handler, {}, { feed: { subscribe: (handlers) => { told = handlers; return () => { unsubscribed = true; }; } } });
    const announced = await stored();
    told!.webhookDue!();
    // Recorded, then a pass after that: the slot it freed woke the worker, which finds nothing more.
    await eventually(async () => (await row(announced))?.status === 'delivered', 5000);
    await announcing.settled();
    const missed = await stored(); // stored while the feed was down: its announcement lost
    told!.resumed!();
    await eventually(() => seen.includes(missed), 5000);
    await Promise.all(workers.splice(0).map((w) => w.close()));
    expect(unsubscribed).toBe(true);
  });

  it('purges on its own timer; a worker never started closes at once', async () => {
    await finishedLongAgo();
    await worker(async () => ({ outcome: 'success' }), { purgeEveryMs: 200 });
    // The start's own purge may have taken it already; another finished meanwhile goes at the next.
    await finishedLongAgo();
    await eventually(async () => (await oldLeft()) === 0, 5000);
    // Closed, it purges no more.
    await Promise.all(workers.splice(0).map((w) => w.close()));
    await finishedLongAgo();
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(await oldLeft()).toBe(1);
    await own.db.sql('DELETE FROM webhook_deliveries WHERE subject = $1', ['meter:old']);
    await (await worker(async () => ({ outcome: 'success' }), {}, { start: false })).close();
  });

  it('purges every finished message past the 7 days, batch after batch (1000 a statement)', async () => {
    const w = await worker(async () => ({ outcome: 'success' }));
    await own.db.sql(`INSERT INTO webhook_deliveries (id, user_id, subject, type, body, max_attempts, status, finished_at)
      SELECT 'msg_old_' || n, NULL, 'meter:old', $1, '{}', 1, 'delivered', now() - interval '8 days' FROM generate_series(1, 1001) AS n`, [METER_EVENT_TYPE]);
    expect(await w.purge()).toBe(1001);
    expect(await own.db.sql('SELECT 1 FROM webhook_deliveries WHERE subject = $1', ['meter:old'])).toEqual([]);
  });
});
