// users and subscriptions: plain parameterized SQL, one statement per operation where possible.
// A user's daily count is dailyUsage.ts's; the admin's listing, userList.ts's.
import type { Plan } from '../../config/schema.js';
import { parseIntegerId, type Queryable } from '../database/db.js';

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
  /** The id an imported user had in the system it came from (migration 028, CONTRACT §27); null for others. */
  external_id?: string | null;
  /**
   * How many credential changes the account has had (migration 039, CONTRACT §33): an access token
   * minted under a smaller one is refused.
   */
  credential_generation: number;
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

export const USER_COLUMNS = 'id, email, plan, is_active, daily_usage, last_usage_date, created_at, email_verified_at, external_id, credential_generation';

/**
 * Creates the user and its subscription in one unit (with `created`'s writes: its audit event); null
 * when the email is taken. A null hash: an account without a password (made by an identity provider).
 */
export async function createUser(
  db: { transaction: <T>(fn: (tx: Queryable) => Promise<T>) => Promise<T> }, email: string, passwordHash: string | null,
  created?: (tx: Queryable, id: number) => Promise<void>,
): Promise<number | null> {
  return db.transaction(async (tx) => {
    const id = await insertUser(tx, email, passwordHash);
    if (id !== null) await created?.(tx, id);
    return id;
  });
}

/**
 * createUser's writes in the caller's transaction (an organization's SAML or SCIM making an account
 * among other writes): the user and its subscription; null when the email is taken. With
 * `verifiedAt`, the address is verified from the start (an organization's verified domain vouches).
 */
export async function insertUser(tx: Queryable, email: string, passwordHash: string | null, verifiedAt: Date | null = null): Promise<number | null> {
  // ON CONFLICT makes a race of registrations of one email end in one row and 409s, not a 500:
  // the second waits for the first to commit, then inserts nothing.
  const rows = await tx.query<{ id: number }>(
    `INSERT INTO users (email, password_hash, email_verified_at) VALUES ($1, $2, $3) ON CONFLICT (email) DO NOTHING RETURNING id`,
    [email, passwordHash, verifiedAt],
  );
  const id = rows[0]?.id;
  if (id === undefined) return null;
  await tx.query(`INSERT INTO subscriptions (user_id, plan) VALUES ($1, 'free')`, [id]);
  return id;
}

/** The user's language for mails (migration 022); null when none was chosen. */
export async function localeOf(db: Queryable, id: number): Promise<string | null> {
  return (await db.query<{ locale: string | null }>('SELECT locale FROM users WHERE id = $1', [id]))[0]?.locale ?? null;
}

/** Sets (null: clears) the user's language for mails; false when the user is gone. */
export async function setLocale(db: Queryable, id: number, locale: string | null): Promise<boolean> {
  return (await db.query('UPDATE users SET locale = $2 WHERE id = $1 RETURNING id', [id, locale])).length > 0;
}

/** What GET /api/v1/user/me reads besides the identity: the language for mails, the month's count (CONTRACT §23). */
export type UserForMe = User & { locale: string | null; monthly_usage: number; last_usage_month: string | null };

/** The user, their language for mails and their month's count (GET /api/v1/user/me). */
export async function findWithLocale(db: Queryable, id: number): Promise<UserForMe | undefined> {
  return (await db.query<UserForMe>(`SELECT ${USER_COLUMNS}, locale, monthly_usage, last_usage_month FROM users WHERE id = $1`, [id]))[0];
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

/**
 * The same password hashed anew (an imported or older hash, at login): only while the row still
 * holds the hash that was checked, so of two logins that both checked it one writes, and a
 * password changed meanwhile is never overwritten. Whether this one wrote.
 */
export async function replacePasswordHash(db: Queryable, id: number, checked: string, passwordHash: string): Promise<boolean> {
  const rows = await db.query('UPDATE users SET password_hash = $3 WHERE id = $1 AND password_hash = $2 RETURNING id', [id, checked, passwordHash]);
  return rows.length === 1;
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

/**
 * A credential change (CONTRACT §33): every access token minted before it is refused from now on,
 * on every instance within a second (the column's trigger announces it on the change feed). Run
 * after lockUser(), in the change's transaction. `user` is that row: it takes the new generation,
 * so a pair issued for it afterwards in the same transaction (the changing session's) is minted
 * under it, not refused with the others.
 */
export async function endOlderTokens(tx: Queryable, user: Pick<User, 'id' | 'credential_generation'>): Promise<void> {
  const [row] = await tx.query<{ credential_generation: number }>(
    'UPDATE users SET credential_generation = credential_generation + 1 WHERE id = $1 RETURNING credential_generation', [user.id]);
  if (row) user.credential_generation = row.credential_generation;
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

/** A deleted user, with the organizations it was a member of (their memberships went with it). */
export type DeletedUser = User & { memberOf: number[] };

/**
 * Deletes the user; its subscription, refresh tokens, sessions, API keys, webhook, links, usage
 * history and memberships go with it (ON DELETE CASCADE), and the email is free again. The users and api_tokens triggers announce
 * the user and each key gone to every instance (001, 005). With `unchangedSince` (a row read when
 * the password was checked), only if the password has not changed since. The deleted user, or
 * undefined.
 */
export async function deleteUser(db: Queryable, id: number, unchangedSince?: Pick<UserWithHash, 'password_changed_at'>): Promise<DeletedUser | undefined> {
  const condition = unchangedSince ? 'AND password_changed_at IS NOT DISTINCT FROM $2' : '';
  const params = unchangedSince ? [id, unchangedSince.password_changed_at] : [id];
  // The row locked first: no membership is added between reading them and the cascade that removes
  // them, so memberOf names every organization the user leaves (its org.member_removed hooks, §24).
  await db.query('SELECT 1 FROM users WHERE id = $1 FOR UPDATE', [id]);
  const [row] = await db.query<User & { member_of: number[] }>(
    `WITH gone AS (DELETE FROM users WHERE id = $1 ${condition} RETURNING ${USER_COLUMNS})
     SELECT gone.*, ARRAY(SELECT org_id FROM memberships WHERE user_id = $1 ORDER BY org_id) AS member_of FROM gone`, params);
  if (!row) return undefined;
  const { member_of: memberOf, ...user } = row;
  return { ...user, memberOf: memberOf.map(Number) };
}

/** Sets the plan on the user and its subscription record together. */
export async function setPlan(
  db: { transaction: <T>(fn: (tx: Queryable) => Promise<T>) => Promise<T> }, id: number, plan: Plan,
  changed?: (tx: Queryable, user: User, previousPlan: string) => Promise<void>,
): Promise<User | undefined> {
  return db.transaction(async (tx) => {
    const written = await writePlanFrom(tx, id, plan);
    if (written) await changed?.(tx, written.user, written.previousPlan);
    return written?.user;
  });
}

/**
 * setPlan's writes, in the caller's transaction: users.plan (whose trigger tells every instance,
 * migration 001) and the subscriptions row that mirrors it (§4). undefined when the user is gone.
 */
export async function writePlan(tx: Queryable, id: number, plan: Plan): Promise<User | undefined> {
  return (await writePlanFrom(tx, id, plan))?.user;
}

/** writePlan, with the plan the user had (operator hooks' previous_plan, CONTRACT §24). */
export async function writePlanFrom(tx: Queryable, id: number, plan: Plan): Promise<{ user: User; previousPlan: string } | undefined> {
  // The row locked and read first, in the same statement: the plan it had just before this change.
  const [row] = await tx.query<User & { previous_plan: string }>(
    `UPDATE users SET plan = $2 FROM (SELECT plan AS previous_plan FROM users WHERE id = $1 FOR UPDATE) AS before
      WHERE id = $1 RETURNING ${USER_COLUMNS}, before.previous_plan`, [id, plan]);
  if (!row) return undefined;
  const { previous_plan: previousPlan, ...user } = row;
  await tx.query(
    `INSERT INTO subscriptions (user_id, plan) VALUES ($1, $2)
     ON CONFLICT (user_id) DO UPDATE SET plan = EXCLUDED.plan, updated_at = now()`,
    [id, plan],
  );
  return { user, previousPlan };
}

export async function setActive(db: Queryable, id: number, active: boolean): Promise<User | undefined> {
  return (await db.query<User>(`UPDATE users SET is_active = $2 WHERE id = $1 RETURNING ${USER_COLUMNS}`, [id, active ? 1 : 0]))[0];
}
