// users and subscriptions: plain parameterized SQL, one statement per operation where possible.
import type { Plan } from '../config/schema.js';
import { parseIntegerId, type Queryable } from './db.js';

export interface User {
  id: number;
  email: string;
  plan: Plan;
  is_active: number;
  daily_usage: number;
  last_usage_date: string | null;
  created_at: Date;
  /** null: the user never proved the address is theirs (migration 009). */
  email_verified_at: Date | null;
}

/** What the account flows read besides the identity: the password and its state, the email's. */
export interface UserWithHash extends User {
  /** null: no password (an account made by an identity provider, until its user sets one) */
  password_hash: string | null;
  /** null: the password chosen at registration (migration 009) */
  password_changed_at: Date | null;
}

/** A user id from outside (a token's `sub`, a URL, a body): a decimal or number within users.id's range, else undefined. */
export const parseUserId = parseIntegerId;

const USER_COLUMNS = 'id, email, plan, is_active, daily_usage, last_usage_date, created_at, email_verified_at';

/**
 * Creates the user and its subscription in one unit (with `created`'s writes: its audit event); null
 * when the email is taken. A null hash: an account without a password (made by an identity provider).
 */
export async function createUser(
  db: { transaction: <T>(fn: (tx: Queryable) => Promise<T>) => Promise<T> }, email: string, passwordHash: string | null,
  created?: (tx: Queryable, id: number) => Promise<void>,
): Promise<number | null> {
  return db.transaction(async (tx) => {
    // ON CONFLICT makes a race of registrations of one email end in one row and 409s, not a 500.
    const rows = await tx.query<{ id: number }>(
      `INSERT INTO users (email, password_hash) VALUES ($1, $2) ON CONFLICT (email) DO NOTHING RETURNING id`,
      [email, passwordHash],
    );
    const id = rows[0]?.id;
    if (id === undefined) return null;
    await tx.query(`INSERT INTO subscriptions (user_id, plan) VALUES ($1, 'free')`, [id]);
    await created?.(tx, id);
    return id;
  });
}

export async function emailExists(db: Queryable, email: string): Promise<boolean> {
  return (await db.query('SELECT 1 FROM users WHERE email = $1', [email])).length > 0;
}

const ACCOUNT_COLUMNS = `${USER_COLUMNS}, password_hash, password_changed_at`;

export async function findByEmailWithHash(db: Queryable, email: string): Promise<UserWithHash | undefined> {
  return (await db.query<UserWithHash>(`SELECT ${ACCOUNT_COLUMNS} FROM users WHERE email = $1`, [email]))[0];
}

export async function findByIdWithHash(db: Queryable, id: number): Promise<UserWithHash | undefined> {
  return (await db.query<UserWithHash>(`SELECT ${ACCOUNT_COLUMNS} FROM users WHERE id = $1`, [id]))[0];
}

export async function findActiveById(db: Queryable, id: number): Promise<User | undefined> {
  return (await db.query<User>(`SELECT ${USER_COLUMNS} FROM users WHERE id = $1 AND is_active = 1`, [id]))[0];
}

export async function findById(db: Queryable, id: number): Promise<User | undefined> {
  return (await db.query<User>(`SELECT ${USER_COLUMNS} FROM users WHERE id = $1`, [id]))[0];
}

export async function findByEmail(db: Queryable, email: string): Promise<User | undefined> {
  return (await db.query<User>(`SELECT ${USER_COLUMNS} FROM users WHERE email = $1`, [email]))[0];
}

/** The same password hashed again with the current parameters (login): not a change of password. */
/**
 * Accounts whose address has a character a plain ASCII mailbox lacks or not exactly one `@`: the
 * only ones that can fail the single-mailbox rule (CONTRACT §19). A scan: run off the start path.
 */
export async function emailsToRecheck(db: Queryable, limit: number): Promise<Array<{ id: number; email: string }>> {
  return db.query<{ id: number; email: string }>(
    "SELECT id, email FROM users WHERE email !~ '^[A-Za-z0-9.!#$&''*+/=?^_`{|}~-]+@[A-Za-z0-9.-]+$' ORDER BY id LIMIT $1",
    [limit],
  );
}

export async function updatePasswordHash(db: Queryable, id: number, passwordHash: string): Promise<void> {
  await db.query('UPDATE users SET password_hash = $2 WHERE id = $1', [id, passwordHash]);
}

/**
 * Locks the user's row for the rest of the transaction and returns what the account flows check.
 * The order every transaction touching a user's sessions or links follows: the user's row first,
 * then their tokens (so two of them never wait on each other). `share`: this transaction starts or
 * continues a session (login, refresh); `update`: it ends sessions or changes the password. A
 * refresh and a password change on one user therefore never overlap: the change sees the
 * refresh's new token and revokes it, or the refresh starts after and finds its token revoked.
 */
export async function lockUser(tx: Queryable, id: number, mode: 'share' | 'update'): Promise<UserWithHash | undefined> {
  return (await tx.query<UserWithHash>(`SELECT ${ACCOUNT_COLUMNS} FROM users WHERE id = $1 ${mode === 'share' ? 'FOR SHARE' : 'FOR NO KEY UPDATE'}`, [id]))[0];
}

/** Whether the password is still the one a caller checked (read with the row it verified). */
export function samePassword(checked: Pick<UserWithHash, 'password_changed_at'>, now: Pick<UserWithHash, 'password_changed_at'>): boolean {
  return (checked.password_changed_at?.getTime() ?? null) === (now.password_changed_at?.getTime() ?? null);
}

/** A new password (change or reset); `now` is kept to the millisecond, as samePassword() compares it. */
export async function setPassword(tx: Queryable, id: number, passwordHash: string, now: Date): Promise<void> {
  await tx.query('UPDATE users SET password_hash = $2, password_changed_at = $3 WHERE id = $1', [id, passwordHash, now]);
}

/** Removes the user's password (a sign-in link handing the account to its mailbox, links.ts); whether it had one. */
export async function removePassword(tx: Queryable, id: number, now: Date): Promise<boolean> {
  const rows = await tx.query('UPDATE users SET password_hash = NULL, password_changed_at = $2 WHERE id = $1 AND password_hash IS NOT NULL RETURNING id', [id, now]);
  return rows.length === 1;
}

/** Marks the email verified, if it is still `email` (a link proves only the address it went to). */
export async function markEmailVerified(tx: Queryable, id: number, email: string, now: Date): Promise<boolean> {
  const rows = await tx.query('UPDATE users SET email_verified_at = COALESCE(email_verified_at, $3) WHERE id = $1 AND email = $2 RETURNING id', [id, email, now]);
  return rows.length === 1;
}

/**
 * Deletes the user; its subscription, refresh tokens, sessions, API keys, webhook, links and usage
 * history go with it (ON DELETE CASCADE), and the email is free again. The users and api_tokens triggers announce
 * the user and each key gone to every instance (001, 005). With `unchangedSince` (a row read when
 * the password was checked), only if the password has not changed since. The deleted user, or
 * undefined.
 */
export async function deleteUser(db: Queryable, id: number, unchangedSince?: Pick<UserWithHash, 'password_changed_at'>): Promise<User | undefined> {
  const condition = unchangedSince ? 'AND password_changed_at IS NOT DISTINCT FROM $2' : '';
  const params = unchangedSince ? [id, unchangedSince.password_changed_at] : [id];
  return (await db.query<User>(`DELETE FROM users WHERE id = $1 ${condition} RETURNING ${USER_COLUMNS}`, params))[0];
}

/** Sets the plan on the user and its subscription record together. */
export async function setPlan(
  db: { transaction: <T>(fn: (tx: Queryable) => Promise<T>) => Promise<T> }, id: number, plan: Plan,
  changed?: (tx: Queryable, user: User) => Promise<void>,
): Promise<User | undefined> {
  return db.transaction(async (tx) => {
    const user = (await tx.query<User>(`UPDATE users SET plan = $2 WHERE id = $1 RETURNING ${USER_COLUMNS}`, [id, plan]))[0];
    if (!user) return undefined;
    await tx.query(
      `INSERT INTO subscriptions (user_id, plan) VALUES ($1, $2)
       ON CONFLICT (user_id) DO UPDATE SET plan = EXCLUDED.plan, updated_at = now()`,
      [id, plan],
    );
    await changed?.(tx, user);
    return user;
  });
}

export async function setActive(db: Queryable, id: number, active: boolean): Promise<User | undefined> {
  return (await db.query<User>(`UPDATE users SET is_active = $2 WHERE id = $1 RETURNING ${USER_COLUMNS}`, [id, active ? 1 : 0]))[0];
}

/**
 * Reserves a block of the user's remaining uses for today in one statement, handing back first
 * the `handback` uses an earlier block of today left unserved (src/guards/dailyLimit.ts). Grants
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

export interface UserFilter {
  /** An email substring (case-insensitive), or an exact id when it is one. */
  query?: string;
  plan?: string;
  active?: boolean;
  /** Only users with a smaller id: the keyset page after one already read. */
  beforeId?: number;
  limit: number;
}

/**
 * Users newest first. Pages are keyed on the id, not on an offset: users registered while an
 * operator pages get larger ids, so they never push a row into a later page twice or hide one.
 */
export async function listUsers(db: Queryable, filter: UserFilter): Promise<User[]> {
  const where: string[] = [];
  const params: unknown[] = [];
  const add = (condition: (p: string) => string, value: unknown) => {
    params.push(value);
    where.push(condition(`$${params.length}`));
  };
  if (filter.query) {
    const id = parseUserId(filter.query);
    // LIKE's own characters in the text are literal: an operator searching "a_b" means that.
    const pattern = `%${filter.query.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    params.push(pattern);
    const like = `lower(email) LIKE $${params.length}`;
    if (id === undefined) where.push(like);
    else add((p) => `(${like} OR id = ${p})`, id);
  }
  if (filter.plan !== undefined) add((p) => `plan = ${p}`, filter.plan);
  if (filter.active !== undefined) add((p) => `is_active = ${p}`, filter.active ? 1 : 0);
  if (filter.beforeId !== undefined) add((p) => `id < ${p}`, filter.beforeId);
  params.push(filter.limit);
  return db.query<User>(
    `SELECT ${USER_COLUMNS} FROM users ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT $${params.length}`,
    params,
  );
}
