// The daily count of a user's uses (CONTRACT §12), kept on the users row (daily_usage,
// last_usage_date) and rolled up into usage_days: reserved in blocks by the daily limiter
// (pipeline/guards/dailyLimit.ts), handed back when unserved, and read for the user and operators.
import type { Queryable } from './db.js';

/**
 * Reserves a block of the user's remaining uses for today in one statement, handing back first
 * the `handback` uses an earlier block of today left unserved (pipeline/guards/dailyLimit.ts). Grants
 * at most `wanted`, at most a `share`-th of what remains (at least one while any remains, so the
 * last uses of a day are granted one at a time) and never past `limit`: the row's lock is held for
 * this one statement only, so concurrent reservations on any instance cannot both pass it.
 * Returns the uses granted and the count after it; null or 0 granted: refused (the day is used up,
 * the row is gone, or it is on a later day: another instance's clock is ahead). A refusal with
 * nothing to hand back writes nothing.
 */
export async function reserveDailyUses(db: Queryable, id: number, today: string, limit: number, handback: number, wanted: number, share: number): Promise<{ granted: number; count: number } | null> {
  const rows = await db.query<{ granted: number; count: number }>(
    `WITH cur AS (
       SELECT id, CASE WHEN last_usage_date = $2::date THEN GREATEST(0, daily_usage - $4::int) ELSE 0 END AS base
         FROM users WHERE id = $1 AND (last_usage_date IS NULL OR last_usage_date <= $2::date) FOR UPDATE),
     g AS (SELECT id, base, CASE WHEN base >= $3::int THEN 0 ELSE LEAST($5::int, GREATEST(1, ($3::int - base) / $6::int)) END AS granted FROM cur)
     UPDATE users u SET daily_usage = g.base + g.granted, last_usage_date = $2::date
       FROM g WHERE u.id = g.id AND (g.granted > 0 OR $4::int > 0)
     RETURNING g.granted, u.daily_usage AS count`,
    [id, today, limit, handback, wanted, share],
  );
  return rows[0] ?? null;
}

/** Hands back uses reserved today and never served (`ids[i]` gets `counts[i]` back). */
export async function handBackDailyUses(db: Queryable, ids: number[], counts: number[], today: string): Promise<void> {
  await db.query(
    `UPDATE users u SET daily_usage = GREATEST(0, u.daily_usage - b.n)
       FROM unnest($1::int[], $2::int[]) AS b(id, n) WHERE u.id = b.id AND u.last_usage_date = $3::date`,
    [ids, counts, today],
  );
}

/** Of these ids, the users whose day is not used up under their plan's limit (`limits`; a plan without one never is). */
export async function underDailyLimit(db: Queryable, ids: number[], today: string, limits: ReadonlyMap<string, number>): Promise<number[]> {
  const rows = await db.query<{ id: number }>(
    `SELECT u.id FROM users u LEFT JOIN unnest($3::text[], $4::int[]) AS l(plan, daily) ON l.plan = u.plan
      WHERE u.id = ANY($1::int[]) AND (l.daily IS NULL OR u.last_usage_date IS NULL OR u.last_usage_date < $2::date
                                       OR (u.last_usage_date = $2::date AND u.daily_usage < l.daily))`,
    [ids, today, [...limits.keys()], [...limits.values()]],
  );
  return rows.map((r) => r.id);
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
