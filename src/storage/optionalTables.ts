// Tables other capabilities add (second factor, identity providers): the admin API shows them
// when the database has them and answers with empty lists otherwise.
import type { Queryable } from './db.js';

async function exists(db: Queryable, table: string): Promise<boolean> {
  const [row] = await db.query<{ found: string | null }>('SELECT to_regclass($1)::text AS found', [table]);
  return Boolean(row?.found);
}

/** The user's passkeys: id, name and dates, never the public key or counter. */
export async function listPasskeys(db: Queryable, userId: number): Promise<Record<string, unknown>[]> {
  if (!(await exists(db, 'passkeys'))) return [];
  return db.query('SELECT id, name, created_at, last_used_at FROM passkeys WHERE user_id = $1 ORDER BY created_at DESC', [userId]);
}

/** The user's linked providers: who they are at the provider, never a token. */
export async function listIdentities(db: Queryable, userId: number): Promise<Record<string, unknown>[]> {
  if (!(await exists(db, 'user_identities'))) return [];
  return db.query('SELECT provider, issuer, subject, email, created_at FROM user_identities WHERE user_id = $1 ORDER BY created_at DESC', [userId]);
}

/**
 * Removes TOTP, the recovery codes and the passkeys (a locked-out user: each of them holds the
 * user to aal2 for adding a factor); how many rows went.
 */
export async function removeSecondFactor(db: Queryable, userId: number): Promise<number> {
  let removed = 0;
  for (const table of ['mfa_totp', 'mfa_recovery_codes', 'passkeys']) {
    if (await exists(db, table)) removed += (await db.query(`DELETE FROM ${table} WHERE user_id = $1 RETURNING 1`, [userId])).length;
  }
  return removed;
}
