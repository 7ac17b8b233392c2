// Second-factor rows (migration 013): TOTP secrets (encrypted by the caller), recovery codes and
// mfa tokens (hashed by the caller). Every single-use check is one conditional UPDATE, so of two
// instances presenting the same code at once exactly one wins.
import type { Queryable } from '../database/db.js';

export interface TotpRow {
  secret_encrypted: string;
  confirmed_at: Date | null;
}

export async function findTotp(db: Queryable, userId: number): Promise<TotpRow | undefined> {
  return (await db.query<TotpRow>('SELECT secret_encrypted, confirmed_at FROM mfa_totp WHERE user_id = $1', [userId]))[0];
}

export async function hasConfirmedTotp(db: Queryable, userId: number): Promise<boolean> {
  return (await db.query('SELECT 1 FROM mfa_totp WHERE user_id = $1 AND confirmed_at IS NOT NULL', [userId])).length === 1;
}

/**
 * Whether the user has a second factor: confirmed TOTP or a passkey (a passkey sign-in is two
 * factors in itself, so its holder is held to aal2 as a TOTP user is).
 */
export async function hasSecondFactor(db: Queryable, userId: number): Promise<boolean> {
  const [row] = await db.query<{ has: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM mfa_totp WHERE user_id = $1 AND confirmed_at IS NOT NULL)
         OR EXISTS (SELECT 1 FROM passkeys WHERE user_id = $1) AS has`,
    [userId],
  );
  return row?.has === true;
}

/** A new unconfirmed secret, replacing an unconfirmed one; false when a confirmed one is there. */
export async function enrollTotp(db: Queryable, userId: number, secretEncrypted: string, now: Date): Promise<boolean> {
  const rows = await db.query(
    `INSERT INTO mfa_totp (user_id, secret_encrypted, created_at) VALUES ($1, $2, $3)
     ON CONFLICT (user_id) DO UPDATE SET secret_encrypted = EXCLUDED.secret_encrypted, created_at = EXCLUDED.created_at, last_step = 0
       WHERE mfa_totp.confirmed_at IS NULL
     RETURNING user_id`,
    [userId, secretEncrypted, now],
  );
  return rows.length === 1;
}

/** Takes TOTP step `step` for the user: false when it (or a later one) was already accepted. */
export async function useTotpStep(db: Queryable, userId: number, step: number): Promise<boolean> {
  return (await db.query('UPDATE mfa_totp SET last_step = $2 WHERE user_id = $1 AND last_step < $2 RETURNING user_id', [userId, step])).length === 1;
}

/** Confirms the enrolment and stores the recovery codes' hashes in place of any older ones. */
export async function confirmTotp(db: Queryable, userId: number, codeHashes: readonly string[], now: Date): Promise<void> {
  await db.query('UPDATE mfa_totp SET confirmed_at = $2 WHERE user_id = $1', [userId, now]);
  await db.query('DELETE FROM mfa_recovery_codes WHERE user_id = $1', [userId]);
  for (const hash of codeHashes) await db.query('INSERT INTO mfa_recovery_codes (user_id, code_hash) VALUES ($1, $2)', [userId, hash]);
}

/** Removes TOTP and the recovery codes; whether there was a confirmed TOTP. */
export async function removeTotp(db: Queryable, userId: number): Promise<boolean> {
  await db.query('DELETE FROM mfa_recovery_codes WHERE user_id = $1', [userId]);
  const rows = await db.query<{ confirmed_at: Date | null }>('DELETE FROM mfa_totp WHERE user_id = $1 RETURNING confirmed_at', [userId]);
  return rows.some((row) => row.confirmed_at !== null);
}

/** Uses an unused recovery code: false when it is not one. */
export async function useRecoveryCode(db: Queryable, userId: number, codeHash: string, now: Date): Promise<boolean> {
  const rows = await db.query('UPDATE mfa_recovery_codes SET used_at = $3 WHERE user_id = $1 AND code_hash = $2 AND used_at IS NULL RETURNING id', [userId, codeHash, now]);
  return rows.length === 1;
}

/** `samlConnectionId`: the first factor was a sign-in through that SAML connection (migration 049), kept for the session. */
export async function createMfaToken(db: Queryable, tokenHash: string, userId: number, amr: readonly string[], expiresAt: Date, samlConnectionId?: string): Promise<void> {
  await db.query(
    'INSERT INTO mfa_tokens (token_hash, user_id, amr, expires_at, saml_connection_id) VALUES ($1, $2, $3, $4, $5)',
    [tokenHash, userId, amr.join(' '), expiresAt, samlConnectionId ?? null],
  );
}

/** A live mfa token, locked until the transaction ends (FOR UPDATE): concurrent verifies queue on it. */
export async function lockLiveMfaToken(
  db: Queryable, tokenHash: string, now: Date, maxFailures: number,
): Promise<{ userId: number; amr: string[]; samlConnectionId: string | undefined } | undefined> {
  const rows = await db.query<{ user_id: number; amr: string; saml_connection_id: string | null }>(
    'SELECT user_id, amr, saml_connection_id FROM mfa_tokens WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2 AND failures < $3 FOR UPDATE',
    [tokenHash, now, maxFailures],
  );
  const row = rows[0];
  return row ? { userId: row.user_id, amr: row.amr.split(' '), samlConnectionId: row.saml_connection_id ?? undefined } : undefined;
}

/**
 * When the user's code verification is locked (CONTRACT §14: too many wrong codes), until when;
 * else undefined. Locks the user's row for the transaction: a user's codes are checked one at a
 * time, on every instance, so no code slips past the lock the tenth wrong one sets.
 */
export async function codesLockedUntil(db: Queryable, userId: number, now: Date): Promise<Date | undefined> {
  const rows = await db.query<{ until: Date | null }>('SELECT codes_locked_until AS until FROM mfa_totp WHERE user_id = $1 FOR UPDATE', [userId]);
  const until = rows[0]?.until;
  return until && new Date(until) > now ? new Date(until) : undefined;
}

/** Where wrong TOTP codes are counted: a user's factor, or an operator's (operatorTotp.ts). */
export type CodeCounter = { table: 'mfa_totp'; owner: 'user_id' } | { table: 'operator_totp'; owner: 'operator_id' };
const USER_CODES: CodeCounter = { table: 'mfa_totp', owner: 'user_id' };

/**
 * Counts a wrong code in the owner's window of `windowMs` (a new window once the last one is over);
 * the `max`-th locks code verification for `lockMs`. One UPDATE: instances counting at once
 * each add one. The lock's end when this one locked it.
 */
export async function countWrongCodeIn(db: Queryable, { table, owner }: CodeCounter, ownerId: number, now: Date, limits: WrongCodeLimits): Promise<Date | undefined> {
  const rows = await db.query<{ until: Date | null }>(
    `UPDATE ${table} SET
       code_failures = CASE WHEN failures_since IS NULL OR failures_since <= $2::timestamptz - make_interval(secs => $3 / 1000.0) THEN 1 ELSE code_failures + 1 END,
       failures_since = CASE WHEN failures_since IS NULL OR failures_since <= $2::timestamptz - make_interval(secs => $3 / 1000.0) THEN $2 ELSE failures_since END
     WHERE ${owner} = $1
     RETURNING CASE WHEN code_failures >= $4 THEN $2::timestamptz + make_interval(secs => $5 / 1000.0) END AS until`,
    [ownerId, now, limits.windowMs, limits.max, limits.lockMs],
  );
  const until = rows[0]?.until;
  if (!until) return undefined;
  await db.query(`UPDATE ${table} SET codes_locked_until = $2, code_failures = 0, failures_since = NULL WHERE ${owner} = $1`, [ownerId, until]);
  return new Date(until);
}

export interface WrongCodeLimits {
  max: number;
  windowMs: number;
  lockMs: number;
}

/** A wrong code of the user's (countWrongCodeIn). */
export const countWrongCode = (db: Queryable, userId: number, now: Date, limits: WrongCodeLimits): Promise<Date | undefined> =>
  countWrongCodeIn(db, USER_CODES, userId, now, limits);

export async function failMfaToken(db: Queryable, tokenHash: string): Promise<void> {
  await db.query('UPDATE mfa_tokens SET failures = failures + 1 WHERE token_hash = $1', [tokenHash]);
}

export async function useMfaToken(db: Queryable, tokenHash: string, now: Date): Promise<void> {
  await db.query('UPDATE mfa_tokens SET used_at = $2 WHERE token_hash = $1', [tokenHash, now]);
}

/**
 * Removes TOTP, the recovery codes and the passkeys (a locked-out user: each of them holds the
 * user to aal2 for adding a factor); how many rows went.
 */
export async function removeSecondFactor(db: Queryable, userId: number): Promise<number> {
  let removed = 0;
  for (const table of ['mfa_totp', 'mfa_recovery_codes', 'passkeys']) {
    removed += (await db.query(`DELETE FROM ${table} WHERE user_id = $1 RETURNING 1`, [userId])).length;
  }
  return removed;
}
