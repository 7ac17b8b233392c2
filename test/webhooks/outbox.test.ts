// The outbox worker (src/webhooks/outbox.ts) driven directly (test/helpers/outboxWorker.ts): what
// settled() and close() wait for and what a close hands back; what wakes the worker for a freed
// slot and what never does (a full worker, a message held back, polled a second apart); its
// concurrency; an attempt's deadline. Retries, logs, wakes and the purge: outboxRetries.test.ts.
import { randomUUID } from 'node:crypto';
import { expect, it } from 'vitest';
import type { Database } from '../../src/storage/database/db.js';
import { describeWithServices, eventually, loggedLines } from '../helpers/gateway.js';
import { outboxBench } from '../helpers/outboxWorker.js';

describeWithServices('the outbox worker, driven directly', () => {
  const bench = outboxBench();
  const { worker, stored, countingDb, holdClaimLock, claimWaiting, row, lastError, counted } = bench;

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
    const { db } = bench.gw.services;
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
    expect(loggedLines(bench.gw, 'shutting down: webhook attempts in flight handed back to the other instances')).toEqual([]);
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
    expect(loggedLines(bench.gw, 'shutting down: webhook attempts in flight handed back to the other instances').at(-1)).toMatchObject({ handedBack: 1 });
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
});
