// operator_totp (migration 029): an operator's TOTP, as mfa_totp is a user's (storage/accounts/mfa.ts):
// encrypted with the same key (auth/mfa/totp.ts), a step accepted once, and §14's lockout after
// wrong codes, counted by one UPDATE whichever instance asks.
import type { Queryable } from '../database/db.js';
import { countWrongCodeIn, type WrongCodeLimits } from '../accounts/mfa.js';

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

/** An operator's wrong code, counted and locked as a user's are (storage/accounts/mfa.ts). */
export const countOperatorWrongCode = (q: Queryable, operatorId: number, now: Date, limits: WrongCodeLimits): Promise<Date | undefined> =>
  countWrongCodeIn(q, { table: 'operator_totp', owner: 'operator_id' }, operatorId, now, limits);

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
