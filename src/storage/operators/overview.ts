// What the console's overview reads (CONTRACT §24, GET /admin/v1/overview): the last days across
// every user, key and organization, from the tables that already count them. One statement per
// series; the day ranges use usage_days_by_day and api_key_usage_by_day (034).
import type { Queryable } from '../database/db.js';

/** A plan's number on a day (YYYY-MM-DD). */
export interface PlanDay {
  day: string;
  plan: string;
  n: number;
}

/**
 * Counted uses per plan per day since `fromDay`: the rolled-up days (usage_days) and each user's
 * current day (users.daily_usage of last_usage_date, the authority for its day, as usageSince reads
 * them), and the same of organizations' pooled counters (035). By the owner's plan now: a day is
 * not kept with the plan it was counted on.
 */
export async function usesPerPlanDay(db: Queryable, fromDay: string): Promise<PlanDay[]> {
  return (await db.query<{ day: string; plan: string; n: string }>(
    `SELECT to_char(day, 'YYYY-MM-DD') AS day, plan, sum(uses)::bigint AS n FROM (
       SELECT d.day, u.plan, d.uses FROM usage_days d JOIN users u ON u.id = d.user_id
        WHERE d.day >= $1::date AND d.day IS DISTINCT FROM u.last_usage_date
       UNION ALL
       SELECT last_usage_date, plan, daily_usage FROM users WHERE last_usage_date >= $1::date AND daily_usage > 0
       UNION ALL
       SELECT d.day, o.plan, d.uses FROM org_usage_days d JOIN organizations o ON o.id = d.org_id
        WHERE d.day >= $1::date AND d.day IS DISTINCT FROM o.last_usage_date
       UNION ALL
       SELECT last_usage_date, plan, daily_usage FROM organizations WHERE last_usage_date >= $1::date AND daily_usage > 0
     ) counted GROUP BY day, plan`,
    [fromDay],
  )).map((r) => ({ day: r.day, plan: r.plan, n: Number(r.n) }));
}

/** API-key requests and denials per plan per day since `fromDay` (api_key_usage), by the key owner's plan now: the organization's for an organization key. */
export async function keyTrafficPerPlanDay(db: Queryable, fromDay: string): Promise<Array<{ day: string; plan: string; requests: number; denied: number }>> {
  return (await db.query<{ day: string; plan: string; requests: string; denied: string }>(
    `SELECT to_char(k.day, 'YYYY-MM-DD') AS day, COALESCE(o.plan, u.plan) AS plan, sum(k.requests)::bigint AS requests, sum(k.denied)::bigint AS denied
       FROM api_key_usage k JOIN api_tokens t ON t.id = k.key_id
       LEFT JOIN organizations o ON o.id = t.org_id LEFT JOIN users u ON u.id = t.user_id
      WHERE k.day >= $1::date GROUP BY 1, 2`,
    [fromDay],
  )).filter((r) => r.plan !== null).map((r) => ({ day: r.day, plan: r.plan, requests: Number(r.requests), denied: Number(r.denied) }));
}

/** The users with the most counted uses since `fromDay`, most first. */
export async function topUsers(db: Queryable, fromDay: string, limit: number): Promise<Array<{ id: number; email: string; plan: string; uses: number }>> {
  return (await db.query<{ id: number; email: string; plan: string; uses: string }>(
    `SELECT u.id, u.email, u.plan, c.uses FROM (
       SELECT user_id, sum(uses)::bigint AS uses FROM (
         SELECT d.user_id, d.uses FROM usage_days d JOIN users u ON u.id = d.user_id
          WHERE d.day >= $1::date AND d.day IS DISTINCT FROM u.last_usage_date AND d.uses > 0
         UNION ALL
         SELECT id, daily_usage FROM users WHERE last_usage_date >= $1::date AND daily_usage > 0
       ) counted GROUP BY user_id ORDER BY uses DESC, user_id LIMIT $2
     ) c JOIN users u ON u.id = c.user_id ORDER BY c.uses DESC, u.id`,
    [fromDay, limit],
  )).map((r) => ({ id: r.id, email: r.email, plan: r.plan, uses: Number(r.uses) }));
}

/** The organizations whose keys made the most requests since `fromDay`, most first (an organization's use is its keys'). */
export async function topOrgs(db: Queryable, fromDay: string, limit: number): Promise<Array<{ id: number; name: string; plan: string; requests: number }>> {
  return (await db.query<{ id: number; name: string; plan: string; requests: string }>(
    `SELECT o.id, o.name, o.plan, sum(k.requests)::bigint AS requests
       FROM api_key_usage k JOIN api_tokens t ON t.id = k.key_id JOIN organizations o ON o.id = t.org_id
      WHERE k.day >= $1::date GROUP BY o.id ORDER BY requests DESC, o.id LIMIT $2`,
    [fromDay, limit],
  )).map((r) => ({ id: r.id, name: r.name, plan: r.plan, requests: Number(r.requests) }));
}

/** How many users (or organizations) each plan has, most first. */
export async function planMix(db: Queryable, table: 'users' | 'organizations'): Promise<Array<{ plan: string; count: number }>> {
  return (await db.query<{ plan: string; count: string }>(`SELECT plan, count(*) AS count FROM ${table} GROUP BY plan ORDER BY count(*) DESC, plan`))
    .map((r) => ({ plan: r.plan, count: Number(r.count) }));
}
