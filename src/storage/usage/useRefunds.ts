// usage_refunds (032): uses given back when the upstream failed them (CONTRACT §23, refundOn).
import { COUNTER_SQL, type Counter } from './counters.js';
import type { Queryable } from '../database/db.js';

/** A refund to make: the counter (a user's, or an organization's pooled one), today (the cap's day), and the windows the use goes back to. */
export interface RefundRequest {
  counter: Counter;
  /** Today, YYYY-MM-DD: the cap counts per UTC day, and the day's count moves only if the use was counted today. */
  day: string;
  /** Give the use back to today's count (it was counted today). */
  daily: boolean;
  /** The first day of this month, and whether the use was counted in it. */
  month: string;
  monthly: boolean;
  /** At most this many refunds per owner and day; null: no cap. */
  cap: number | null;
}

/**
 * Gives one use back, in one statement: the day's refund count goes up only while under the cap
 * (the upsert's row lock serializes every instance's refunds of that user and day), and only then
 * do the counters go down, each in the window it was counted in while that window is still the
 * row's. On a plan with metered overage (meteredUses.ts) the month's newest unreported record goes
 * with it: the count is one lower, so one use fewer lies past the allowance. Lowering a count fires 004's and 027's triggers, whose NOTIFY drops the Redis gates. False:
 * the cap was reached, nothing changed.
 */
export async function refundUse(db: Queryable, r: RefundRequest): Promise<boolean> {
  const { table, owner, refunds } = COUNTER_SQL[r.counter.ownerType];
  const rows = await db.query<{ refunded: boolean }>(
    `WITH cap AS (
       INSERT INTO ${refunds} AS r (${owner}, day, refunds) VALUES ($1, $2::date, 1)
       ON CONFLICT (${owner}, day) DO UPDATE SET refunds = r.refunds + 1 WHERE $3::int IS NULL OR r.refunds < $3::int
       RETURNING r.${owner}),
     rec AS (UPDATE metered_uses SET refunded = true WHERE id = (
               SELECT id FROM metered_uses WHERE $6::boolean AND ${owner} = $1 AND month = $5::date AND delivery_id IS NULL AND NOT refunded
                ORDER BY id DESC LIMIT 1) AND EXISTS (SELECT 1 FROM cap) RETURNING id),
     upd AS (UPDATE ${table} u
                SET daily_usage = CASE WHEN $4::boolean AND u.last_usage_date = $2::date THEN GREATEST(0, u.daily_usage - 1) ELSE u.daily_usage END,
                    monthly_usage = CASE WHEN $6::boolean AND u.last_usage_month = $5::date THEN GREATEST(0, u.monthly_usage - 1) ELSE u.monthly_usage END
              WHERE u.id = $1 AND EXISTS (SELECT 1 FROM cap) RETURNING u.id)
     SELECT EXISTS (SELECT 1 FROM cap) AS refunded, (SELECT count(*) FROM rec) + (SELECT count(*) FROM upd) AS touched`,
    [r.counter.id, r.day, r.cap, r.daily, r.month, r.monthly],
  );
  return rows[0]?.refunded === true;
}
