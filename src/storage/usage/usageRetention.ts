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
// - usage_days, org_usage_days: each owner's counted uses and refusals per day (CONTRACT §30: the
//   usage endpoints show the last 12 months, this one included); kept 13 months, from the first
//   day of the month twelve months before this one, so the oldest month shown is always whole.
// Deleted in batches: a month's worth of metered uses can be millions of rows, more than one
// statement may take under the storage's statement timeout.
import type { Queryable } from '../database/db.js';
import { DAY_MS, utcDay, utcMonth } from '../../time.js';

export const REFUNDS_KEPT_DAYS = 7;
export const KEY_USAGE_KEPT_DAYS = 90;
/** Months of daily counts kept before the current one. */
export const OWNER_DAYS_KEPT_MONTHS = 12;
const BATCH = 10_000;

/** Deletes what its retention no longer keeps, as of `now`; how many rows went, by table. */
export async function purgeUsageRecords(db: Queryable, now: Date): Promise<Record<string, number>> {
  const daysAgo = (n: number) => utcDay(new Date(now.getTime() - n * DAY_MS));
  // The first day of last month: rows of months before it go.
  const lastMonth = utcMonth(new Date(Date.parse(utcMonth(now)) - DAY_MS));
  const firstKeptMonth = new Date(utcMonth(now));
  firstKeptMonth.setUTCMonth(firstKeptMonth.getUTCMonth() - OWNER_DAYS_KEPT_MONTHS);
  const ownerDaysFrom = utcMonth(firstKeptMonth);
  return {
    usage_refunds: await purgeInBatches(db, 'usage_refunds', 'day < $1::date', daysAgo(REFUNDS_KEPT_DAYS)),
    metered_uses: await purgeInBatches(db, 'metered_uses', 'delivery_id IS NOT NULL AND month < $1::date', lastMonth),
    api_key_usage: await purgeInBatches(db, 'api_key_usage', 'day < $1::date', daysAgo(KEY_USAGE_KEPT_DAYS)),
    usage_days: await purgeInBatches(db, 'usage_days', 'day < $1::date', ownerDaysFrom),
    org_usage_days: await purgeInBatches(db, 'org_usage_days', 'day < $1::date', ownerDaysFrom),
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
