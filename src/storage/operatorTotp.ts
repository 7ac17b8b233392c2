// operator_totp (migration 029): an operator's TOTP, as mfa_totp is a user's (storage/mfa.ts):
// encrypted with the same key (auth/mfa/totp.ts), a step accepted once, and §14's lockout after
// wrong codes, counted by one UPDATE whichever instance asks.
import type { Queryable } from './db.js';

export interface OperatorTotpRow {
  secret_encrypted: string;
  confirmed_at: Date | null;
}

export async function findOperatorTotp(q: Queryable, operatorId: number): Promise<OperatorTotpRow | undefined> {
  return (await q.query<OperatorTotpRow>('SELECT secret_encrypted, confirmed_at FROM operator_totp WHERE operator_id = $1 FOR UPDATE', [operatorId]))[0];
}

/** A new secret, not yet confirmed; none replaces a confirmed one (only a reset removes it). */
export async function enrolOperatorTotp(q: Queryable, operatorId: number, secretEncrypted: string, now: Date): Promise<boolean> {
  const rows = await q.query(
    `INSERT INTO operator_totp (operator_id, secret_encrypted, created_at) VALUES ($1, $2, $3)
     ON CONFLICT (operator_id) DO UPDATE SET secret_encrypted = EXCLUDED.secret_encrypted, created_at = EXCLUDED.created_at, last_step = 0
     WHERE operator_totp.confirmed_at IS NULL RETURNING 1`, [operatorId, secretEncrypted, now],
  );
  return rows.length > 0;
}

export async function confirmOperatorTotp(q: Queryable, operatorId: number, now: Date): Promise<void> {
  await q.query('UPDATE operator_totp SET confirmed_at = $2 WHERE operator_id = $1', [operatorId, now]);
}

/** Uses the step: false when it (or a later one) was accepted already, so a code works once. */
export async function useOperatorStep(q: Queryable, operatorId: number, step: number): Promise<boolean> {
  return (await q.query('UPDATE operator_totp SET last_step = $2 WHERE operator_id = $1 AND last_step < $2 RETURNING 1', [operatorId, step])).length > 0;
}

export async function operatorCodesLockedUntil(q: Queryable, operatorId: number, now: Date): Promise<Date | undefined> {
  const until = (await q.query<{ until: Date | null }>('SELECT codes_locked_until AS until FROM operator_totp WHERE operator_id = $1', [operatorId]))[0]?.until;
  return until && new Date(until) > now ? new Date(until) : undefined;
}

/** As storage/mfa.ts countWrongCode: the `max`-th wrong code within `windowMs` locks codes for `lockMs`. */
export async function countOperatorWrongCode(q: Queryable, operatorId: number, now: Date, { max, windowMs, lockMs }: { max: number; windowMs: number; lockMs: number }): Promise<Date | undefined> {
  const rows = await q.query<{ until: Date | null }>(
    `UPDATE operator_totp SET
       code_failures = CASE WHEN failures_since IS NULL OR failures_since <= $2::timestamptz - make_interval(secs => $3 / 1000.0) THEN 1 ELSE code_failures + 1 END,
       failures_since = CASE WHEN failures_since IS NULL OR failures_since <= $2::timestamptz - make_interval(secs => $3 / 1000.0) THEN $2 ELSE failures_since END
     WHERE operator_id = $1
     RETURNING CASE WHEN code_failures >= $4 THEN $2::timestamptz + make_interval(secs => $5 / 1000.0) END AS until`,
    [operatorId, now, windowMs, max, lockMs],
  );
  const until = rows[0]?.until;
  if (!until) return undefined;
  await q.query('UPDATE operator_totp SET codes_locked_until = $2, code_failures = 0, failures_since = NULL WHERE operator_id = $1', [operatorId, until]);
  return new Date(until);
}

/** An operator's password hash by email, for sign-in (never answered to anyone). */
export async function operatorCredentials(q: Queryable, email: string): Promise<{ id: number; email: string; password_hash: string | null } | undefined> {
  return (await q.query<{ id: number; email: string; password_hash: string | null }>('SELECT id, email, password_hash FROM operators WHERE email = $1', [email]))[0];
}

export async function setOperatorPassword(q: Queryable, operatorId: number, hash: string): Promise<void> {
  await q.query('UPDATE operators SET password_hash = $2 WHERE id = $1', [operatorId, hash]);
}

/** The live enrolment link's operator, without spending it (the first step shows the QR code). */
export async function peekEnrolment(q: Queryable, tokenHash: string, now: Date): Promise<number | undefined> {
  const rows = await q.query<{ operator_id: number }>('SELECT operator_id FROM operator_enrolments WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2', [tokenHash, now]);
  return rows[0]?.operator_id;
}
