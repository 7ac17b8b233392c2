// A row held by the test (a user's, an outbox message's), so that requests racing for it queue in an order the test chooses:
// Postgres grants a row lock to its waiters in the order they asked. A race test that only fires
// requests together leaves the dangerous interleaving to chance; this one puts it there.
import pg from 'pg';
import type { Queryable } from '../../src/storage/database/db.js';
import { eventually, testServices } from './gateway.js';

export interface HeldRow {
  /** Resolves once `count` other sessions wait for the row: the requests sent have reached their lock. */
  waiters(count: number): Promise<void>;
  /**
   * Whether `count` sessions wait for the row within `ms`. A waiter gives up after the gateway's
   * statement timeout (4 s): when one that must wait behind another comes later than that (an
   * argon2 check starved on a loaded machine), the queue never forms, and the test tries again.
   */
  queued(count: number, ms: number): Promise<boolean>;
  /** Resolves once no session waits for the row any more (the waiters seen have given up, or died). */
  noWaiters(): Promise<void>;
  /** A statement in the holding transaction, before release (a DELETE of the row, say); its rows. */
  run<T = Record<string, unknown>>(text: string, params?: unknown[]): Promise<T[]>;
  /** Commits: lets the queue go, first come first served. */
  release(): Promise<void>;
}

const QUEUE = `WITH RECURSIVE queue(pid) AS (
    SELECT a.pid FROM pg_stat_activity a WHERE $1 = ANY(pg_blocking_pids(a.pid))
    UNION SELECT a.pid FROM pg_stat_activity a JOIN queue ON queue.pid = ANY(pg_blocking_pids(a.pid)))
  SELECT count(*)::int AS n FROM queue`;

/** Locks users(id) FOR UPDATE in a transaction of the test's own until release(). */
export async function holdUserRow(id: number): Promise<HeldRow> {
  return holdRows('SELECT id FROM users WHERE id = $1 FOR UPDATE', [id]);
}

/**
 * Runs `lock` (a SELECT … FOR UPDATE) in a transaction of the test's own, on the run's database or
 * on `database` (a throwawayDatabase's url), and holds what it locked until release().
 */
export async function holdRows(lock: string, params: unknown[], database = testServices!.postgres): Promise<HeldRow> {
  const client = new pg.Client({ connectionString: database });
  await client.connect();
  await client.query('BEGIN');
  const { rowCount } = await client.query(lock, params);
  if (!rowCount) {
    await client.end();
    throw new Error(`nothing to hold: ${lock} locked no row`);
  }
  const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
  // The holder asks from inside its transaction, where Postgres keeps the first pg_stat_activity it
  // read until the transaction ends: each look clears that snapshot, or a waiter that came after the
  // first look would never be counted.
  const queueLength = async () => {
    await client.query('SELECT pg_stat_clear_snapshot()');
    return (await client.query<{ n: number }>(QUEUE, [pid])).rows[0]!.n;
  };
  return {
    async waiters(count) {
      // The first waiter waits for the holder, each later one for the waiter before it (it holds
      // the tuple's lock): the queue is everything blocked, step by step, behind the holder.
      await eventually(async () => await queueLength() >= count, 20_000);
    },
    async queued(count, ms) {
      return eventually(async () => await queueLength() >= count, ms).then(() => true, () => false);
    },
    async noWaiters() {
      await eventually(async () => await queueLength() === 0, 20_000);
    },
    async run<T>(text: string, params: unknown[] = []) {
      return (await client.query(text, params)).rows as T[];
    },
    async release() {
      try {
        await client.query('COMMIT');
      } finally {
        await client.end();
      }
    },
  };
}

/**
 * Resolves once exactly `count` statements of db's database wait for a lock, for a lock the test
 * holds some other way than holdRows (a LOCK TABLE in a transaction of its own, say), and to see
 * a queue shrink as well as grow. Asked from a pool outside any holding transaction, each look a
 * statement of its own, so no pg_stat_activity snapshot outlives it.
 */
export async function lockWaiters(db: Queryable, count: number): Promise<void> {
  await eventually(async () =>
    (await db.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"))[0]!.n === count);
}
