// An owner's counted uses and quota refusals per UTC day and month (CONTRACT §30: GET
// /api/v1/user/usage and /api/v1/orgs/{id}/usage), and its keys' requests per day, from the
// gateway's own counts: the finished days of usage_days / org_usage_days (008, 035, with 041's
// refusals), the current day and month from the counter's row (the authority for its day, as
// dailyUsage.ts's usageSince reads it), and api_key_usage for the keys.
import { COUNTER_SQL, type Counter } from './counters.js';
import type { Queryable } from '../database/db.js';

/** The rollup table of each owner type and its owner column; the keys' owner column in api_tokens. */
const TABLES: Record<Counter['ownerType'], { days: string; owner: string }> = {
  user: { days: 'usage_days', owner: 'user_id' },
  org: { days: 'org_usage_days', owner: 'org_id' },
};

export interface OwnerDay { uses: number; denied: number }

export interface OwnerCounts {
  /** By day (YYYY-MM-DD), from `fromDay` on. */
  days: Map<string, OwnerDay>;
  /** The current month's count on the counter's row (a plan with a monthly window only), and its month. */
  month: { month: string; uses: number } | null;
}

/** The owner's uses and refusals per day since `fromDay`, and the month its row counts. */
export async function ownerCounts(db: Queryable, counter: Counter, fromDay: string): Promise<OwnerCounts> {
  const { days, owner } = TABLES[counter.ownerType];
  const table = COUNTER_SQL[counter.ownerType].table;
  const rows = await db.query<{ day: string; uses: number; denied: number }>(
    `SELECT to_char(d.day, 'YYYY-MM-DD') AS day,
            CASE WHEN d.day = o.last_usage_date THEN o.daily_usage ELSE d.uses END AS uses, d.denied
       FROM ${days} d JOIN ${table} o ON o.id = d.${owner}
      WHERE d.${owner} = $1 AND d.day >= $2::date
     UNION ALL
     SELECT to_char(last_usage_date, 'YYYY-MM-DD'), daily_usage, 0 FROM ${table} o
      WHERE id = $1 AND last_usage_date >= $2::date
        AND NOT EXISTS (SELECT 1 FROM ${days} d WHERE d.${owner} = o.id AND d.day = o.last_usage_date)`,
    [counter.id, fromDay],
  );
  const [row] = await db.query<{ month: string | null; uses: number }>(
    `SELECT to_char(last_usage_month, 'YYYY-MM-DD') AS month, monthly_usage AS uses FROM ${table} WHERE id = $1`, [counter.id]);
  return {
    days: new Map(rows.map((r) => [r.day, { uses: r.uses, denied: r.denied }])),
    month: row?.month ? { month: row.month, uses: row.uses } : null,
  };
}

export interface KeyDays {
  id: number;
  name: string;
  /** By day: requests and refusals. */
  days: Map<string, { requests: number; denied: number }>;
}

/**
 * The owner's keys (a user's personal keys, or an organization's keys) that are live, or were used
 * in the window (a revoked or rolled key keeps its history: it shows who still calls with it),
 * oldest first, each with its counts between two UTC days, both included.
 */
export async function ownerKeyDays(db: Queryable, counter: Counter, from: string, to: string): Promise<KeyDays[]> {
  const mine = counter.ownerType === 'user' ? 't.user_id = $1 AND t.org_id IS NULL' : 't.org_id = $1';
  const rows = await db.query<{ id: string | number; name: string; day: string | null; requests: string | number | null; denied: string | number | null }>(
    `SELECT t.id, t.name, to_char(u.day, 'YYYY-MM-DD') AS day, u.requests, u.denied
       FROM api_tokens t LEFT JOIN api_key_usage u ON u.key_id = t.id AND u.day BETWEEN $2::date AND $3::date
      WHERE ${mine} AND (t.revoked = 0 OR u.key_id IS NOT NULL)
      ORDER BY t.id, u.day`,
    [counter.id, from, to],
  );
  const keys = new Map<number, KeyDays>();
  for (const r of rows) {
    const id = Number(r.id);
    let key = keys.get(id);
    if (!key) keys.set(id, (key = { id, name: r.name, days: new Map() }));
    if (r.day !== null) key.days.set(r.day, { requests: Number(r.requests), denied: Number(r.denied) });
  }
  return [...keys.values()];
}
