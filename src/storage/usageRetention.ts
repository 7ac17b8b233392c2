// Usage records kept only as long as something reads them (CONTRACT §23, §21), purged by the
// hourly sweep (housekeeping.ts): without it they grow with traffic for ever.
// - usage_refunds: a row counts one owner's refunds of one UTC day against capPerDay; once the day
//   is over nothing reads it. Kept a week for an operator looking into a day's refunds.
// - metered_uses: a row reported (delivery_id set: its meter event queued in the outbox, which
//   holds the event's identifier and value from then on, or 'refunded') is read by nothing; kept
//   through the month it bills and the next (the invoice of a month is finalised in the next),
//   for reconciling an invoice against the uses. Rows not yet reported are never purged: they are
//   billing still to do (an owner without a customer waits for one).
// - api_key_usage: the key usage endpoint and the console's overview read the last 30 days; kept
//   90, for an operator's reports over a quarter.
// Deleted in batches: a month's worth of metered uses can be millions of rows, more than one
// statement may take under the storage's statement timeout.
import type { Queryable } from './db.js';
import { DAY_MS, utcDay, utcMonth } from '../time.js';

export const REFUNDS_KEPT_DAYS = 7;
export const KEY_USAGE_KEPT_DAYS = 90;
const BATCH = 10_000;

/** Deletes what its retention no longer keeps, as of `now`; how many rows went, by table. */
export async function purgeUsageRecords(db: Queryable, now: Date): Promise<Record<string, number>> {
  const daysAgo = (n: number) => utcDay(new Date(now.getTime() - n * DAY_MS));
  // The first day of last month: rows of months before it go.
  const lastMonth = utcMonth(new Date(Date.parse(utcMonth(now)) - DAY_MS));
  return {
    usage_refunds: await purgeInBatches(db, 'usage_refunds', 'day < $1::date', daysAgo(REFUNDS_KEPT_DAYS)),
    metered_uses: await purgeInBatches(db, 'metered_uses', 'delivery_id IS NOT NULL AND month < $1::date', lastMonth),
    api_key_usage: await purgeInBatches(db, 'api_key_usage', 'day < $1::date', daysAgo(KEY_USAGE_KEPT_DAYS)),
  };
}

async function purgeInBatches(db: Queryable, table: string, where: string, bound: string): Promise<number> {
  let total = 0;
  for (;;) {
    const [row] = await db.query<{ n: number }>(
      `WITH gone AS (DELETE FROM ${table} WHERE ctid IN (SELECT ctid FROM ${table} WHERE ${where} LIMIT ${BATCH}) RETURNING 1) SELECT count(*)::int AS n FROM gone`, [bound]);
    const n = row?.n ?? 0;
    total += n;
    if (n < BATCH) return total;
  }
}
