// How the admin API shows what it reads, and how it reads what it is asked: the views of rows
// (never a password hash nor a webhook body) and the listings' checked parameters and pages.
// Apart from routes.ts so that file stays the endpoint map and its handlers (issue 48).
import type { AuditFilter, AuditRow, DeliveryRow } from '../storage/events/index.js';
import { parseUserId, type User, type UserFilter } from '../storage/accounts/index.js';
import { readIsoTime } from '../time.js';

export const iso = (date: Date | null) => (date ? date.toISOString() : null);

/** The user as the admin API shows it: the table's columns, never the password hash. */
export function adminView(user: User) {
  return {
    id: user.id,
    email: user.email,
    plan: user.plan,
    is_active: user.is_active,
    // The boolean the admin API takes (PUT …/active {"active": true}); is_active (0/1) stays for existing clients.
    active: user.is_active === 1,
    daily_usage: user.daily_usage,
    last_usage_date: user.last_usage_date,
    created_at: user.created_at instanceof Date ? user.created_at.toISOString() : user.created_at,
    email_verified_at: iso(user.email_verified_at),
    external_id: user.external_id ?? null,
  };
}

/** A webhook message as the admin API lists it: what happened to it, never its body. */
export function deliveryView(row: DeliveryRow) {
  return {
    id: row.id,
    type: row.type,
    status: row.status,
    attempts: row.attempts,
    last_error: row.last_error,
    created_at: iso(row.created_at),
    last_attempt_at: iso(row.last_attempt_at),
    next_attempt_at: row.status === 'pending' ? iso(row.next_attempt_at) : null,
    finished_at: iso(row.finished_at),
  };
}

/** A body field; a missing body (no content) reads as {} like any other. */
export function field(body: unknown, name: string): unknown {
  return body !== null && typeof body === 'object' ? (body as Record<string, unknown>)[name] : undefined;
}

const LIST_DEFAULT = 50;
const LIST_MAX = 200;

/** A query parameter as text: undefined when absent or empty, null when repeated or not text (a 400). */
export const queryText = (v: unknown) => (v === undefined || v === '' ? undefined : typeof v === 'string' ? v : null);

/**
 * A keyset listing's pages (newest first): `limit` and `cursor` checked, and the next cursor. A
 * cursor is the last id of the page read, tagged per listing; opaque to callers so its form may change.
 */
export function keysetPages(tag: string) {
  return {
    /** The page asked for; undefined when `limit` or `cursor` is malformed. */
    page(limit: string | undefined, cursor: string | undefined): { limit: number; beforeId?: number } | undefined {
      const n = limit === undefined ? LIST_DEFAULT : /^\d{1,3}$/.test(limit) ? Number(limit) : NaN;
      if (!(n >= 1 && n <= LIST_MAX)) return undefined;
      if (cursor === undefined) return { limit: n };
      const id = new RegExp(`^${tag}([1-9]\\d{0,14})$`).exec(Buffer.from(cursor, 'base64url').toString())?.[1];
      return id === undefined ? undefined : { limit: n, beforeId: Number(id) };
    },
    /** Rows read with one more than `limit` asked: the page, and the cursor of the next one (null: none). */
    split<T extends { id: number }>(rows: T[], limit: number): { page: T[]; next: string | null } {
      const page = rows.slice(0, limit);
      return { page, next: rows.length > limit ? Buffer.from(`${tag}${page.at(-1)!.id}`).toString('base64url') : null };
    },
  };
}
export const userPages = keysetPages('u');
export const auditPages = keysetPages('a');

/** The listing's parameters, checked; undefined when one is malformed (a 400, not a guess). */
export function listFilter(q: Record<string, unknown>, plans: readonly string[]): UserFilter | undefined {
  const [query, plan, active, limit, cursor] = [q.query, q.plan, q.active, q.limit, q.cursor].map(queryText);
  if ([query, plan, active, limit, cursor].includes(null)) return undefined;
  const page = userPages.page(limit ?? undefined, cursor ?? undefined);
  if (!page) return undefined;
  if (plan !== undefined && !plans.includes(plan!)) return undefined;
  if (active !== undefined && active !== 'true' && active !== 'false') return undefined;
  return {
    ...(query?.trim() ? { query: query.trim() } : {}),
    ...(plan !== undefined ? { plan: plan! } : {}),
    ...(active !== undefined ? { active: active === 'true' } : {}),
    ...page,
  };
}

/** GET /admin/v1/audit's parameters, checked; undefined when one is malformed. */
export function auditFilter(q: Record<string, unknown>): AuditFilter | undefined {
  const [userId, type, since, limit, cursor] = [q.user_id, q.type, q.since, q.limit, q.cursor].map(queryText);
  if ([userId, type, since, limit, cursor].includes(null)) return undefined;
  const id = userId === undefined ? undefined : parseUserId(userId!);
  // ISO 8601 only, and UTC without an offset (time.ts): new Date() reads other text in the host's zone.
  const at = since === undefined ? undefined : readIsoTime(since!);
  const page = auditPages.page(limit ?? undefined, cursor ?? undefined);
  if ((userId !== undefined && id === undefined) || (since !== undefined && !at) || !page) return undefined;
  return {
    ...(id !== undefined ? { userId: id } : {}),
    ...(type !== undefined ? { type: type! } : {}),
    ...(at !== undefined ? { since: at } : {}),
    ...page,
  };
}

export const auditView = (row: AuditRow) => ({
  id: row.id, at: row.at.toISOString(), type: row.type, actor: row.actor, actor_id: row.actor_id, user_id: row.user_id, ip: row.ip, user_agent: row.user_agent, data: row.data,
});

/** Rows from tables other branches own: their dates as ISO strings like every other answer. */
export const datesAsIso = (row: object) =>
  Object.fromEntries(Object.entries(row).map(([k, v]) => [k, v instanceof Date ? v.toISOString() : typeof v === 'bigint' ? Number(v) : v]));
