// users and subscriptions: plain parameterized SQL, one statement per operation where possible.
import type { Plan } from '../config/schema.js';
import type { Queryable } from './db.js';

export interface User {
  id: number;
  email: string;
  plan: Plan;
  is_active: number;
  daily_usage: number;
  last_usage_date: string | null;
  created_at: Date;
}

export interface UserWithHash extends User {
  password_hash: string;
}

const USER_COLUMNS = 'id, email, plan, is_active, daily_usage, last_usage_date, created_at';

/** Creates the user and its subscription in one unit; null when the email is taken. */
export async function createUser(db: { transaction: <T>(fn: (tx: Queryable) => Promise<T>) => Promise<T> }, email: string, passwordHash: string): Promise<number | null> {
  return db.transaction(async (tx) => {
    // ON CONFLICT makes a race of registrations of one email end in one row and 409s, not a 500.
    const rows = await tx.query<{ id: number }>(
      `INSERT INTO users (email, password_hash) VALUES ($1, $2) ON CONFLICT (email) DO NOTHING RETURNING id`,
      [email, passwordHash],
    );
    const id = rows[0]?.id;
    if (id === undefined) return null;
    await tx.query(`INSERT INTO subscriptions (user_id, plan) VALUES ($1, 'free')`, [id]);
    return id;
  });
}

export async function emailExists(db: Queryable, email: string): Promise<boolean> {
  return (await db.query('SELECT 1 FROM users WHERE email = $1', [email])).length > 0;
}

export async function findByEmailWithHash(db: Queryable, email: string): Promise<UserWithHash | undefined> {
  return (await db.query<UserWithHash>(`SELECT ${USER_COLUMNS}, password_hash FROM users WHERE email = $1`, [email]))[0];
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

export async function updatePasswordHash(db: Queryable, id: number, passwordHash: string): Promise<void> {
  await db.query('UPDATE users SET password_hash = $2 WHERE id = $1', [id, passwordHash]);
}

/** Sets the plan on the user and its subscription record together. */
export async function setPlan(db: { transaction: <T>(fn: (tx: Queryable) => Promise<T>) => Promise<T> }, id: number, plan: Plan): Promise<User | undefined> {
  return db.transaction(async (tx) => {
    const user = (await tx.query<User>(`UPDATE users SET plan = $2 WHERE id = $1 RETURNING ${USER_COLUMNS}`, [id, plan]))[0];
    if (!user) return undefined;
    await tx.query(
      `INSERT INTO subscriptions (user_id, plan) VALUES ($1, $2)
       ON CONFLICT (user_id) DO UPDATE SET plan = EXCLUDED.plan, updated_at = now()`,
      [id, plan],
    );
    return user;
  });
}

export async function setActive(db: Queryable, id: number, active: boolean): Promise<User | undefined> {
  return (await db.query<User>(`UPDATE users SET is_active = $2 WHERE id = $1 RETURNING ${USER_COLUMNS}`, [id, active ? 1 : 0]))[0];
}

/**
 * Counts one use of the day if the user is still under the limit, atomically: the WHERE admits
 * only while the day's count is below `limit`, so concurrent requests on any instance cannot
 * both pass. Returns the new count, or null when the day is used up. The date only moves
 * forward: an instance whose clock lags another's around midnight cannot take the user back to
 * the previous day and hand out that day's uses a second time.
 */
export async function countDailyUse(db: Queryable, id: number, today: string, limit: number): Promise<number | null> {
  const rows = await db.query<{ daily_usage: number }>(
    `UPDATE users
        SET daily_usage = CASE WHEN last_usage_date = $2::date THEN daily_usage + 1 ELSE 1 END,
            last_usage_date = $2::date
      WHERE id = $1 AND (last_usage_date IS NULL OR last_usage_date < $2::date
                         OR (last_usage_date = $2::date AND daily_usage < $3))
      RETURNING daily_usage`,
    [id, today, limit],
  );
  return rows[0]?.daily_usage ?? null;
}

/** Of these ids, the users whose day is not used up: countDailyUse would admit them now. */
export async function underDailyLimit(db: Queryable, ids: number[], today: string, limit: number): Promise<number[]> {
  const rows = await db.query<{ id: number }>(
    `SELECT id FROM users
      WHERE id = ANY($1::int[]) AND (last_usage_date IS NULL OR last_usage_date < $2::date
                                     OR (last_usage_date = $2::date AND daily_usage < $3))`,
    [ids, today, limit],
  );
  return rows.map((r) => r.id);
}
