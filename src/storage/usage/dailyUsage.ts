// The daily and monthly counts of uses (CONTRACT §12, §23), kept on their counter's row (a user's, or an organization's pooled one: counters.ts)
// (daily_usage, last_usage_date; monthly_usage, last_usage_month), the day's rolled up into
// usage_days: reserved in blocks by the daily limiter (pipeline/guards/dailyLimit/blocks.ts), handed back
// when unserved, and read for the user and operators.
import { COUNTER_SQL, type Counter } from './counters.js';
import type { Queryable } from '../database/db.js';
import { reserveWithOverage } from './meteredUses.js';

/** The windows a counted use is reserved on: the UTC day and month, each with its limit (null: the plan has none, not counted). */
export interface UseWindows {
  /** YYYY-MM-DD (users.last_usage_date). */
  day: string;
  daily: number | null;
  /** The first day of the month, YYYY-MM-DD (users.last_usage_month). */
  month: string;
  monthly: number | null;
  /** monthly is an allowance with metered overage: never refused, uses past it recorded (meteredUses.ts). */
  overage?: boolean;
}

/** Uses per window (handed back with a reservation). */
export interface UseWindowCounts { daily: number; monthly: number }

/** What a reservation did: the uses granted (0: refused), the counts after it, and which windows were spent. */
export interface Reserved {
  granted: number;
  /** users.daily_usage after it; null when the day is not counted. */
  daily: number | null;
  monthly: number | null;
  dailySpent: boolean;
  monthlySpent: boolean;
}

/**
 * Reserves a block of the user's remaining uses on every window at once, in one statement, handing
 * back first the uses an earlier block of today left unserved (`handback`, per window: only where it
 * was counted; pipeline/guards/dailyLimit/blocks.ts). Grants at most `wanted`, at most a `share`-th of what
 * remains in each window (at least one while any remains, so the last uses go one at a time) and
 * nothing when any window is spent: a use is counted on all of the user's windows or on none. The
 * row's lock is held for this one statement only, so concurrent reservations on any instance cannot
 * both pass it. Null: the row is gone, or on a later day or month (another instance's clock is
 * ahead). A refusal with nothing to hand back writes nothing.
 */
export async function reserveUses(db: Queryable, counter: Counter, w: UseWindows, handback: UseWindowCounts, wanted: number, share: number): Promise<Reserved | null> {
  if (w.overage && w.monthly !== null) return reserveWithOverage(db, counter, w, handback, wanted, share);
  const { id } = counter;
  const table = COUNTER_SQL[counter.ownerType].table;
  if (w.monthly === null && w.daily !== null) {
    const day = await reserveDayOnly(db, table, id, w.day, w.daily, handback.daily, wanted, share);
    return day && { granted: day.granted, daily: day.count, monthly: null, dailySpent: day.granted === 0, monthlySpent: false };
  }
  const rows = await db.query<Reserved>(
    `WITH cur AS (
       SELECT id, CASE WHEN $3::int IS NULL THEN NULL WHEN last_usage_date = $2::date THEN GREATEST(0, daily_usage - $6::int) ELSE 0 END AS dbase,
                  CASE WHEN $5::int IS NULL THEN NULL WHEN last_usage_month = $4::date THEN GREATEST(0, monthly_usage - $7::int) ELSE 0 END AS mbase
         FROM ${table} WHERE id = $1 AND ($3::int IS NULL OR last_usage_date IS NULL OR last_usage_date <= $2::date)
                              AND ($5::int IS NULL OR last_usage_month IS NULL OR last_usage_month <= $4::date) FOR UPDATE),
     s AS (SELECT id, dbase, mbase, COALESCE(dbase >= $3::int, false) AS dspent, COALESCE(mbase >= $5::int, false) AS mspent FROM cur),
     g AS (SELECT s.*, CASE WHEN dspent OR mspent THEN 0
                            ELSE LEAST($8::int, GREATEST(1, ($3::int - dbase) / $9::int), GREATEST(1, ($5::int - mbase) / $9::int)) END AS granted FROM s),
     upd AS (UPDATE ${table} u SET daily_usage = COALESCE(g.dbase + g.granted, u.daily_usage),
                                last_usage_date = CASE WHEN g.dbase IS NULL THEN u.last_usage_date ELSE $2::date END,
                                monthly_usage = COALESCE(g.mbase + g.granted, u.monthly_usage),
                                last_usage_month = CASE WHEN g.mbase IS NULL THEN u.last_usage_month ELSE $4::date END
               FROM g WHERE u.id = g.id AND (g.granted > 0 OR $6::int > 0 OR $7::int > 0) RETURNING u.id)
     SELECT granted, dbase + granted AS daily, mbase + granted AS monthly, dspent AS "dailySpent", mspent AS "monthlySpent" FROM g`,
    [id, w.day, w.daily, w.month, w.monthly, handback.daily, handback.monthly, wanted, share],
  );
  return rows[0] ?? null;
}

type DayReserved = { granted: number; count: number };

/**
 * reserveUses for a plan without a monthly quota: the statement of the day alone, as it was before
 * 027, so such a plan costs what it did (the windowed statement took about a third longer to plan
 * and run, measured on one connection). Null or 0 granted: refused.
 */
async function reserveDayOnly(db: Queryable, table: string, id: number, today: string, limit: number, handback: number, wanted: number, share: number): Promise<DayReserved | null> {
  const rows = await db.query<DayReserved>(
    `WITH cur AS (
       SELECT id, CASE WHEN last_usage_date = $2::date THEN GREATEST(0, daily_usage - $4::int) ELSE 0 END AS base
         FROM ${table} WHERE id = $1 AND (last_usage_date IS NULL OR last_usage_date <= $2::date) FOR UPDATE),
     g AS (SELECT id, base, CASE WHEN base >= $3::int THEN 0 ELSE LEAST($5::int, GREATEST(1, ($3::int - base) / $6::int)) END AS granted FROM cur)
     UPDATE ${table} u SET daily_usage = g.base + g.granted, last_usage_date = $2::date
       FROM g WHERE u.id = g.id AND (g.granted > 0 OR $4::int > 0)
     RETURNING g.granted, u.daily_usage AS count`,
    [id, today, limit, handback, wanted, share],
  );
  return rows[0] ?? null;
}

/**
 * Hands back uses reserved and never served: the counter of `ownerType` and `ids[i]` gets `daily[i]`
 * back on today and `monthly[i]` on this month. On a plan with metered overage, as many of the month's newest unreported
 * served-use records go too (meteredUses.ts): the uses past the allowance are one fewer each.
 */
export async function handBackUses(db: Queryable, ownerType: Counter['ownerType'], ids: number[], daily: number[], monthly: number[], today: string, month: string): Promise<void> {
  const { table, owner } = COUNTER_SQL[ownerType];
  await db.query(
    `WITH unbilled AS (UPDATE metered_uses SET refunded = true WHERE id IN (
        SELECT x.id FROM unnest($1::int[], $3::int[]) AS b(id, m)
          CROSS JOIN LATERAL (SELECT id FROM metered_uses WHERE ${owner} = b.id AND month = $5::date AND delivery_id IS NULL AND NOT refunded
                               ORDER BY id DESC LIMIT b.m) x WHERE b.m > 0) RETURNING id)
     UPDATE ${table} u SET daily_usage = CASE WHEN u.last_usage_date = $4::date THEN GREATEST(0, u.daily_usage - b.d) ELSE u.daily_usage END,
                        monthly_usage = CASE WHEN u.last_usage_month = $5::date THEN GREATEST(0, u.monthly_usage - b.m) ELSE u.monthly_usage END
       FROM unnest($1::int[], $2::int[], $3::int[]) AS b(id, d, m)
      WHERE u.id = b.id AND ((b.d > 0 AND u.last_usage_date = $4::date) OR (b.m > 0 AND u.last_usage_month = $5::date))`,
    [ids, daily, monthly, today, month],
  );
}

/** The columns of each window's count and of the day (or month's first day) it counts. */
const WINDOW_COLUMNS = { daily: ['daily_usage', 'last_usage_date'], monthly: ['monthly_usage', 'last_usage_month'] } as const;

/**
 * Of these counters, the ones whose `window` (the day or month starting `unit`) is not used up under
 * their plan's limit (`limits`; a plan without one never is).
 */
export async function underLimit(db: Queryable, counters: readonly Counter[], window: keyof typeof WINDOW_COLUMNS, unit: string, limits: ReadonlyMap<string, number>): Promise<Counter[]> {
  const [count, date] = WINDOW_COLUMNS[window];
  const under: Counter[] = [];
  for (const ownerType of ['user', 'org'] as const) {
    const ids = counters.filter((c) => c.ownerType === ownerType).map((c) => c.id);
    if (!ids.length) continue;
    const rows = await db.query<{ id: number }>(
      `SELECT u.id FROM ${COUNTER_SQL[ownerType].table} u LEFT JOIN unnest($3::text[], $4::int[]) AS l(plan, lim) ON l.plan = u.plan
        WHERE u.id = ANY($1::int[]) AND (l.lim IS NULL OR u.${date} IS NULL OR u.${date} < $2::date
                                         OR (u.${date} = $2::date AND u.${count} < l.lim))`,
      [ids, unit, [...limits.keys()], [...limits.values()]],
    );
    for (const r of rows) under.push({ ownerType, id: r.id });
  }
  return under;
}

/** Uses counted per day since `fromDay` (YYYY-MM-DD): finished days from usage_days, the current one from users. */
export async function usageSince(db: Queryable, id: number, fromDay: string): Promise<Map<string, number>> {
  const rows = await db.query<{ day: string; uses: number; current: boolean }>(
    `SELECT to_char(day, 'YYYY-MM-DD') AS day, uses, false AS current FROM usage_days WHERE user_id = $1 AND day >= $2::date
     UNION ALL
     SELECT to_char(last_usage_date, 'YYYY-MM-DD'), daily_usage, true FROM users WHERE id = $1 AND last_usage_date >= $2::date`,
    [id, fromDay],
  );
  const uses = new Map<string, number>();
  // The users row is the authority for its day (a day moved back by hand may also have a rollup row).
  for (const row of rows.sort((a, b) => Number(a.current) - Number(b.current))) uses.set(row.day, row.uses);
  return uses;
}
