// The outbox worker (src/webhooks/outbox.ts) driven directly (test/helpers/outboxWorker.ts):
// refusals, retries, their backoff and giving up; what is counted and logged; what wakes it (its
// start, a poll, the feed); the purge. What settled() and close() wait for: outbox.test.ts.
import pino from 'pino';
import { expect, it, vi } from 'vitest';
import { METER_EVENT_TYPE } from '../../src/billing/meterReporter.js';
import { failingStatements } from '../helpers/failingDatabase.js';
import { describeWithServices, eventually, loggedLines } from '../helpers/gateway.js';
import { outboxBench, type FeedHandlers, type Handler } from '../helpers/outboxWorker.js';

describeWithServices('the outbox worker, driven directly: retries, logs, wakes and the purge', () => {
  const bench = outboxBench();
  const { workers, worker, stored, finishedLongAgo, oldLeft, row, lastError, counted } = bench;

  it('a refusal is logged with its subject; a message whose attempts are used up gives up, counted as such', async () => {
    const w = await worker(async () => ({ outcome: 'rejected', error: 'HTTP 400' }));
    const refused = await stored();
    const spent = await stored(3); // its attempts used by instances that died mid-attempt
    const gaveUp = await counted('gave_up');
    await w.settled();
    await eventually(async () => (await row(refused))?.status === 'failed' && (await row(spent))?.status === 'failed');
    expect(loggedLines(bench.gw, 'webhook not delivered').find((l) => l.webhookId === refused))
      .toMatchObject({ level: 40, component: 'webhooks', subject: `meter:${refused}`, type: METER_EVENT_TYPE, error: 'HTTP 400' });
    expect(loggedLines(bench.gw, 'webhook not delivered: retries exhausted').find((l) => l.webhookId === spent)).toMatchObject({ subject: `meter:${spent}`, attempt: 4 });
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
    expect(loggedLines(bench.gw, 'webhook not delivered: retries exhausted').find((l) => l.webhookId === last))
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
        await eventually(async () => (await bench.own.db.sql<{ n: number }>(
          "SELECT count(*)::int AS n FROM webhook_deliveries WHERE id = ANY($1) AND last_error = 'HTTP 503' AND lease IS NULL", [ids]))[0]!.n === ids.length, 5000);
        return ids;
      };
      const firsts = await attempted(0, 0);
      const seconds = await attempted(0.99, 1); // of 3
      // Due again this long after the attempt began, within a second. A jitter computed otherwise
      // is half a minute or more away (the divided delay's 75 s and 100 s, the draw subtracted's
      // 48.5 s against 143.5 s, divided 393 s).
      const waits = async (ids: string[]) => (await bench.own.db.sql<{ ms: number }>(
        'SELECT (extract(epoch FROM next_attempt_at - last_attempt_at) * 1000)::float8 AS ms FROM webhook_deliveries WHERE id = ANY($1)', [ids])).map((r) => r.ms);
      const off = (ms: number[], expected: number) => ms.filter((v) => Math.abs(v - expected) > 1_000);
      expect(off(await waits(firsts), 48_000)).toEqual([]); // 0.8 × 60 s
      expect(off(await waits(seconds), 143_520)).toEqual([]); // (0.8 + 0.99 × 0.4) × 120 s
      expect(loggedLines(bench.gw, 'webhook attempt failed; will retry').find((l) => l.webhookId === seconds[0]))
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
    await eventually(() => loggedLines(bench.gw, 'webhook attempt failed unexpectedly').some((l) => l.webhookId === thrown));
    await broken.close();
    const w = await worker(async () => ({ outcome: 'success' }));
    const restore = failingStatements(bench.gw.services.db, /SET status = \$3/, () => new Error('the test\'s outage'));
    try {
      const id = await stored();
      await w.settled();
      await eventually(() => loggedLines(bench.gw, 'webhook attempt outcome could not be recorded; the message is attempted again').some((l) => l.webhookId === id));
      expect(loggedLines(bench.gw, 'webhook attempt outcome could not be recorded; the message is attempted again').find((l) => l.webhookId === id))
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
    await bench.own.db.sql('DELETE FROM webhook_deliveries WHERE subject = $1', ['meter:old']);
    await (await worker(async () => ({ outcome: 'success' }), {}, { start: false })).close();
  });

  it('purges every finished message past the 7 days, batch after batch (1000 a statement)', async () => {
    const w = await worker(async () => ({ outcome: 'success' }));
    await bench.own.db.sql(`INSERT INTO webhook_deliveries (id, user_id, subject, type, body, max_attempts, status, finished_at)
      SELECT 'msg_old_' || n, NULL, 'meter:old', $1, '{}', 1, 'delivered', now() - interval '8 days' FROM generate_series(1, 1001) AS n`, [METER_EVENT_TYPE]);
    expect(await w.purge()).toBe(1001);
    expect(await bench.own.db.sql('SELECT 1 FROM webhook_deliveries WHERE subject = $1', ['meter:old'])).toEqual([]);
  });
});
