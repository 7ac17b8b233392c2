// webhook_deliveries (010): the outbox of webhook messages. Every statement that ends or hands back
// an attempt names the lease it was claimed under, so an instance whose lease lapsed (and was taken
// by another) can no longer change the row.
import type { Database, Queryable } from '../database/db.js';

export type DeliveryStatus = 'pending' | 'delivered' | 'failed' | 'skipped';
export type FinalStatus = Exclude<DeliveryStatus, 'pending'>;

/** Claims are serialized by this transaction-level advisory lock (arbitrary, fixed; migrations use 7_414_201). */
/** The advisory lock every claim takes first (exported for the tests that hold it). */
export const CLAIM_LOCK = 7_414_202;

export interface NewDelivery {
  id: string;
  /** Null for a message of no user's (an organization's meter event). */
  userId: number | null;
  type: string;
  body: string;
  maxAttempts: number;
  /** The traceparent of the traced request that caused the message (migration 020). */
  traceparent: string | null;
}

/** Stores a message for delivery; inside the caller's transaction when `db` is one. */
export async function insertDelivery(db: Queryable, d: NewDelivery): Promise<void> {
  await db.query(
    'INSERT INTO webhook_deliveries (id, user_id, type, body, max_attempts, traceparent) VALUES ($1, $2, $3, $4, $5, $6)',
    [d.id, d.userId, d.type, d.body, d.maxAttempts, d.traceparent],
  );
}

/** Stores an operator hook message (030): no user, ordered within its subject; inside the change's transaction. */
export async function insertHookDelivery(db: Queryable, d: Omit<NewDelivery, 'userId'> & { subject: string }): Promise<void> {
  await db.query(
    'INSERT INTO webhook_deliveries (id, user_id, subject, type, body, max_attempts, traceparent) VALUES ($1, NULL, $2, $3, $4, $5, $6)',
    [d.id, d.subject, d.type, d.body, d.maxAttempts, d.traceparent],
  );
}

export interface ClaimedDelivery {
  id: string;
  /** null for an operator hook (030) */
  user_id: number | null;
  /** an operator hook's subject (030): sent to hooks.url, not to a user's webhook */
  subject: string | null;
  type: string;
  body: string;
  /** this attempt's number, from 1 */
  attempts: number;
  max_attempts: number;
  /** The trace the attempt continues (insertDelivery). */
  traceparent: string | null;
  /**
   * The user's webhook and its owner's plan and active flag, read by the claim, that is at the
   * start of this attempt (null: no webhook).
   */
  url: string | null;
  secret: string | null;
  plan: string | null;
  is_active: number | null;
}

export interface ClaimOptions {
  /** written on the claimed rows: what every later statement on them must name */
  lease: string;
  leaseMs: number;
  limit: number;
  /** attempts in flight at once for one user, all instances together */
  perUser: number;
  /** Types the caller cannot send (a handler's it lacks): left for an instance that can, never touched. */
  unsendable: readonly string[];
}

// Due rows nobody holds, at most `perUser` in flight per user counting those other instances hold,
// oldest first. FOR UPDATE SKIP LOCKED: a row that a settle, a hand-back or the purge is writing
// right now is passed over rather than waited for; the lease taken here is what keeps every other
// instance off the row for the whole attempt, long after this statement's row lock is gone.
const CLAIM = `
WITH held AS (
  SELECT user_id, count(*) AS n FROM webhook_deliveries
   WHERE status = 'pending' AND leased_until > now()
   GROUP BY user_id
), eligible AS (
  SELECT id FROM (
    SELECT d.id, d.subject, coalesce(h.n, 0) + row_number() OVER (PARTITION BY d.user_id ORDER BY d.next_attempt_at, d.id) AS slot
      FROM webhook_deliveries d LEFT JOIN held h ON h.user_id = d.user_id
     WHERE d.status = 'pending' AND d.next_attempt_at <= now() AND (d.leased_until IS NULL OR d.leased_until <= now())
       AND d.type <> ALL($5::text[])
       -- Operator hooks (030): only a subject's oldest pending message, so one at a time, in order.
       AND (d.subject IS NULL OR NOT EXISTS (
         SELECT 1 FROM webhook_deliveries e WHERE e.subject = d.subject AND e.status = 'pending' AND e.seq < d.seq))
  ) ranked
   WHERE slot <= $4 OR subject IS NOT NULL
), claimed AS (
  UPDATE webhook_deliveries d
     SET attempts = d.attempts + 1, lease = $1, leased_until = now() + $2 * interval '1 millisecond', last_attempt_at = now()
   WHERE d.id IN (
     SELECT id FROM webhook_deliveries
      WHERE id IN (SELECT id FROM eligible)
        AND status = 'pending' AND next_attempt_at <= now() AND (leased_until IS NULL OR leased_until <= now())
      ORDER BY next_attempt_at
      LIMIT $3
      FOR UPDATE SKIP LOCKED)
  RETURNING d.id, d.user_id, d.type, d.body, d.attempts, d.max_attempts, d.traceparent, d.subject
)
SELECT c.*, w.url, w.secret, u.plan, u.is_active
  FROM claimed c LEFT JOIN webhooks w ON w.user_id = c.user_id LEFT JOIN users u ON u.id = c.user_id`;

/**
 * Leases up to `limit` due messages to the caller, each with its webhook as it is now. Claims run
 * one at a time across instances (a few milliseconds each), so the per-user count they read cannot
 * be raced by another claim.
 */
export async function claimDue(db: Database, o: ClaimOptions): Promise<ClaimedDelivery[]> {
  return db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [CLAIM_LOCK]);
    return tx.query<ClaimedDelivery>(CLAIM, [o.lease, o.leaseMs, o.limit, o.perUser, o.unsendable]);
  });
}

/**
 * In how many milliseconds (by Postgres' clock) the next pending message the caller can send falls
 * due for a claim: its retry time, or the end of the lease an instance holds on it (one that died
 * lets it lapse). Undefined when nothing is pending. What lets an idle worker sleep until then
 * instead of polling.
 */
export async function nextDueInMs(db: Queryable, unsendable: readonly string[]): Promise<number | undefined> {
  const [row] = await db.query<{ ms: number | null }>(
    `SELECT (extract(epoch FROM min(greatest(next_attempt_at, coalesce(leased_until, next_attempt_at))) - now()) * 1000)::float8 AS ms
       FROM webhook_deliveries WHERE status = 'pending' AND type <> ALL($1::text[])`,
    [unsendable],
  );
  return row?.ms ?? undefined;
}

/** Seconds the oldest pending message (webhook, hook, meter event) has waited since it was stored; 0 when none (gateway_outbox_oldest_pending_seconds). */
export async function oldestPendingSeconds(db: Queryable): Promise<number> {
  const [row] = await db.query<{ age: number | null }>(
    "SELECT extract(epoch FROM now() - min(created_at))::float8 AS age FROM webhook_deliveries WHERE status = 'pending'",
  );
  return Math.max(0, row?.age ?? 0);
}

/** The attempt ended the message: delivered, failed or skipped. */
export async function finishDelivery(db: Queryable, id: string, lease: string, status: FinalStatus, error: string | null): Promise<void> {
  await db.query(
    `UPDATE webhook_deliveries
        SET status = $3, last_error = coalesce($4, last_error), lease = NULL, leased_until = NULL, finished_at = now()
      WHERE id = $1 AND lease = $2`,
    [id, lease, status, error],
  );
}

/** An attempt that failed in a way worth retrying: due again in `delayMs`, for whichever instance is there. */
export async function retryDeliveryLater(db: Queryable, id: string, lease: string, delayMs: number, error: string): Promise<void> {
  await db.query(
    `UPDATE webhook_deliveries
        SET last_error = $3, lease = NULL, leased_until = NULL, next_attempt_at = now() + $4 * interval '1 millisecond'
      WHERE id = $1 AND lease = $2`,
    [id, lease, error, delayMs],
  );
}

/**
 * Hands back attempts cut short (a shutdown): due at once, and not counted, since nobody knows how
 * they ended. The trigger's NOTIFY wakes the other instances.
 */
export async function releaseDeliveries(db: Queryable, claims: Array<{ id: string; lease: string }>): Promise<void> {
  if (claims.length === 0) return;
  await db.query(
    `UPDATE webhook_deliveries d
        SET attempts = d.attempts - 1, lease = NULL, leased_until = NULL, next_attempt_at = now()
       FROM unnest($1::text[], $2::text[]) AS c(id, lease)
      WHERE d.id = c.id AND d.lease = c.lease`,
    [claims.map((c) => c.id), claims.map((c) => c.lease)],
  );
}

export interface DeliveryRow {
  id: string;
  type: string;
  status: DeliveryStatus;
  attempts: number;
  last_error: string | null;
  created_at: Date;
  last_attempt_at: Date | null;
  next_attempt_at: Date;
  finished_at: Date | null;
}

/** A user's messages, newest first. */
export async function listDeliveries(db: Queryable, userId: number, limit: number): Promise<DeliveryRow[]> {
  return db.query<DeliveryRow>(
    `SELECT id, type, status, attempts, last_error, created_at, last_attempt_at, next_attempt_at, finished_at
       FROM webhook_deliveries WHERE user_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2`,
    [userId, limit],
  );
}

/**
 * Deletes up to `batch` messages finished more than `days` days ago; returns how many. Rows another
 * instance is purging at the same moment are skipped, not waited for.
 */
export async function purgeFinished(db: Queryable, days: number, batch: number): Promise<number> {
  const rows = await db.query(
    `DELETE FROM webhook_deliveries WHERE id IN (
       SELECT id FROM webhook_deliveries
        WHERE status <> 'pending' AND finished_at < now() - $1 * interval '1 day'
        LIMIT $2 FOR UPDATE SKIP LOCKED)
     RETURNING id`,
    [days, batch],
  );
  return rows.length;
}
