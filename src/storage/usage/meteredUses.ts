// metered_uses (032): the served-use records of plans with an included monthly allowance and
// metered overage (CONTRACT §23, `monthly: {limit, overage: meter}`). Written by the statement that
// counts the use, never derived from counter deltas; read by the meter reporter
// (billing/meterReporter.ts) once their refund can no longer happen.
import { COUNTER_SQL, type Counter } from './counters.js';
import type { Queryable } from '../database/db.js';

/** dailyUsage.ts's UseWindows, the month's limit being the allowance (said again here: that file calls this one). */
interface OverageWindows { day: string; daily: number | null; month: string; monthly: number | null }
/** Uses handed back per window with a reservation. */
type HandedBack = Record<'daily' | 'monthly', number>;
/** dailyUsage.ts's Reserved: the month is never spent. */
interface OverageReserved { granted: number; daily: number | null; monthly: number | null; dailySpent: boolean; monthlySpent: false }

/**
 * reserveUses (dailyUsage.ts) for a plan whose `monthly` is an allowance with overage: the month
 * never refuses. Within the allowance a block never crosses it; past it, uses are counted one at a
 * time and each gets its served-use record in the same statement, so no block of metered uses is
 * ever held (and lost, or billed unserved, by an instance that dies). Uses handed back past the
 * allowance take back as many of the month's newest unreported records (`refunded`): the records
 * billed stay the uses counted past the allowance.
 */
export async function reserveWithOverage(db: Queryable, counter: Counter, w: OverageWindows, handback: HandedBack, wanted: number, share: number): Promise<OverageReserved | null> {
  const { table, owner } = COUNTER_SQL[counter.ownerType];
  const rows = await db.query<OverageReserved>(
    `WITH cur AS (
       SELECT id, CASE WHEN $3::int IS NULL THEN NULL WHEN last_usage_date = $2::date THEN GREATEST(0, daily_usage - $6::int) ELSE 0 END AS dbase,
                  CASE WHEN last_usage_month = $4::date THEN GREATEST(0, monthly_usage - $7::int) ELSE 0 END AS mbase
         FROM ${table} WHERE id = $1 AND ($3::int IS NULL OR last_usage_date IS NULL OR last_usage_date <= $2::date)
                              AND (last_usage_month IS NULL OR last_usage_month <= $4::date) FOR UPDATE),
     g AS (SELECT cur.*, COALESCE(dbase >= $3::int, false) AS dspent,
                  CASE WHEN COALESCE(dbase >= $3::int, false) THEN 0
                       WHEN mbase >= $5::int THEN 1
                       ELSE LEAST($8::int, $5::int - mbase, GREATEST(1, ($3::int - dbase) / $9::int), GREATEST(1, ($5::int - mbase) / $9::int)) END AS granted FROM cur),
     unbilled AS (UPDATE metered_uses SET refunded = true WHERE id IN (
                    SELECT id FROM metered_uses WHERE ${owner} = $1 AND month = $4::date AND delivery_id IS NULL AND NOT refunded ORDER BY id DESC LIMIT $7::int)
                  RETURNING id),
     upd AS (UPDATE ${table} u SET daily_usage = COALESCE(g.dbase + g.granted, u.daily_usage),
                                last_usage_date = CASE WHEN g.dbase IS NULL THEN u.last_usage_date ELSE $2::date END,
                                monthly_usage = g.mbase + g.granted, last_usage_month = $4::date
               FROM g WHERE u.id = g.id AND (g.granted > 0 OR $6::int > 0 OR $7::int > 0) RETURNING u.id),
     rec AS (INSERT INTO metered_uses (${owner}, month) SELECT id, $4::date FROM g WHERE g.granted = 1 AND g.mbase >= $5::int RETURNING id)
     SELECT granted, dbase + granted AS daily, mbase + granted AS monthly, dspent AS "dailySpent", false AS "monthlySpent" FROM g`,
    [counter.id, w.day, w.daily, w.month, w.monthly, handback.daily, handback.monthly, wanted, share],
  );
  // (Data-modifying CTEs run whether or not the SELECT reads them: rec and unbilled always apply.)
  return rows[0] ?? null;
}

/** A group of records put into one meter event: the owner's (a user, or an organization: `orgId`), of one month. */
export interface MeterBatch {
  /** The user whose records these are; null for an organization's. */
  userId: number | null;
  orgId: number | null;
  month: string;
  customer: string | null;
  /** The identifier of the Stripe meter event: derived from the records (owner, month, first and last id). */
  identifier: string;
  /** The uses to bill: the records not refunded. */
  value: number;
  /** The newest record's time (seconds): the event's timestamp, inside the month it bills. */
  timestamp: number;
  ids: string[];
}

/**
 * Takes the records no reporter has taken, counted at least `settleMs` ago (no refund can come for
 * them any more), at most `limit`, grouped per owner and month. FOR UPDATE SKIP LOCKED: another
 * instance's reporter takes other records, or none; the caller marks them in the same transaction.
 */
export async function takeSettled(tx: Queryable, settleMs: number, limit: number): Promise<MeterBatch[]> {
  const rows = await tx.query<{ id: string; user_id: number | null; org_id: number | null; month: string; refunded: boolean; created: number; customer: string | null }>(
    `SELECT m.id::text AS id, m.user_id, m.org_id, to_char(m.month, 'YYYY-MM-DD') AS month, m.refunded, extract(epoch FROM m.created_at)::float8 AS created,
            (SELECT stripe_customer_id FROM billing_customers c
              WHERE (c.owner_type = 'user' AND c.owner_id = m.user_id) OR (c.owner_type = 'org' AND c.owner_id = m.org_id)) AS customer
       FROM metered_uses m
      WHERE m.id IN (SELECT id FROM metered_uses WHERE delivery_id IS NULL AND created_at < now() - $1 * interval '1 millisecond'
                      ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)
      ORDER BY m.id`,
    [settleMs, limit],
  );
  const batches = new Map<string, MeterBatch>();
  for (const r of rows) {
    // An organization's identifiers say so (`org`): user 7's and organization 7's records are different uses.
    const owner = r.org_id !== null ? `org${r.org_id}` : String(r.user_id);
    const key = `${owner}:${r.month}`;
    let b = batches.get(key);
    if (!b) batches.set(key, (b = { userId: r.user_id, orgId: r.org_id, month: r.month, customer: r.customer, identifier: owner, value: 0, timestamp: 0, ids: [] }));
    b.ids.push(r.id);
    if (!r.refunded) b.value++;
    b.timestamp = Math.max(b.timestamp, Math.floor(r.created));
  }
  for (const b of batches.values()) b.identifier = `gw_${b.identifier}_${b.month}_${b.ids[0]}_${b.ids.at(-1)}`;
  return [...batches.values()];
}

/** Marks the batch's records as reported by this outbox message (or by none, when all were refunded). */
export async function markReported(tx: Queryable, ids: string[], deliveryId: string): Promise<void> {
  await tx.query('UPDATE metered_uses SET delivery_id = $2 WHERE id = ANY($1::bigint[])', [ids, deliveryId]);
}
