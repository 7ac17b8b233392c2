// operators, operator_enrolments, operator_tokens, operator_totp (migration 029, CONTRACT §24):
// the people behind the admin listener, their one-time enrolment links and personal tokens.
import type { Queryable } from '../database/db.js';

export const OPERATOR_ROLES = ['viewer', 'support', 'admin'] as const;
export type OperatorRole = (typeof OPERATOR_ROLES)[number];

export interface OperatorRow {
  id: number;
  email: string;
  role: OperatorRole;
  created_at: Date;
  /** Enrolled: the link was redeemed, a password set. */
  enrolled: boolean;
  /** It has a second factor: a confirmed TOTP or a passkey. */
  mfa: boolean;
}

const COLUMNS = `o.id, o.email, o.role, o.created_at, o.password_hash IS NOT NULL AS enrolled,
  (EXISTS (SELECT 1 FROM operator_totp t WHERE t.operator_id = o.id AND t.confirmed_at IS NOT NULL)
   OR EXISTS (SELECT 1 FROM operator_passkeys p WHERE p.operator_id = o.id)) AS mfa`;

export const isOperatorRole = (value: unknown): value is OperatorRole => OPERATOR_ROLES.includes(value as OperatorRole);

export async function insertOperator(q: Queryable, email: string, role: OperatorRole, now: Date): Promise<OperatorRow | undefined> {
  const rows = await q.query<{ id: number }>('INSERT INTO operators (email, role, created_at) VALUES ($1, $2, $3) ON CONFLICT (email) DO NOTHING RETURNING id', [email, role, now]);
  return rows[0] ? findOperator(q, rows[0].id) : undefined;
}

export async function findOperator(q: Queryable, id: number): Promise<OperatorRow | undefined> {
  return (await q.query<OperatorRow>(`SELECT ${COLUMNS} FROM operators o WHERE o.id = $1`, [id]))[0];
}

export async function findOperatorByEmail(q: Queryable, email: string): Promise<OperatorRow | undefined> {
  return (await q.query<OperatorRow>(`SELECT ${COLUMNS} FROM operators o WHERE o.email = $1`, [email]))[0];
}

export async function listOperators(q: Queryable): Promise<OperatorRow[]> {
  return q.query<OperatorRow>(`SELECT ${COLUMNS} FROM operators o ORDER BY o.id`);
}

/** Whether any operator exists: with an empty admin.apiKey, the admin API exists only then (§24). */
export async function operatorsExist(q: Queryable): Promise<boolean> {
  return (await q.query('SELECT 1 FROM operators LIMIT 1')).length > 0;
}

/**
 * Whether the change would leave no admin operator. The admin rows are locked (FOR UPDATE), so of
 * two concurrent demotions of the last two admins, the second sees the first's result.
 */
async function wouldRemoveLastAdmin(tx: Queryable, id: number): Promise<boolean> {
  const admins = await tx.query<{ id: number }>("SELECT id FROM operators WHERE role = 'admin' ORDER BY id FOR UPDATE");
  return admins.length === 1 && admins[0]!.id === id;
}

export type OperatorChange = { changed: OperatorRow } | { refused: 'notFound' | 'lastAdmin' };

/** In `tx`. keepAnAdmin: refuse to demote the last admin (admin.apiKey empty: nobody else could act). */
export async function setOperatorRole(tx: Queryable, id: number, role: OperatorRole, keepAnAdmin: boolean): Promise<OperatorChange> {
  if (keepAnAdmin && role !== 'admin' && (await wouldRemoveLastAdmin(tx, id))) return { refused: 'lastAdmin' };
  const rows = await tx.query<{ id: number }>('UPDATE operators SET role = $2 WHERE id = $1 RETURNING id', [id, role]);
  const changed = rows[0] ? await findOperator(tx, id) : undefined;
  return changed ? { changed } : { refused: 'notFound' };
}

/** In `tx`. Its tokens, factors and links go with it (ON DELETE CASCADE). */
export async function removeOperator(tx: Queryable, id: number, keepAnAdmin: boolean): Promise<OperatorChange> {
  const existing = await findOperator(tx, id);
  if (!existing) return { refused: 'notFound' };
  if (keepAnAdmin && (await wouldRemoveLastAdmin(tx, id))) return { refused: 'lastAdmin' };
  await tx.query('DELETE FROM operators WHERE id = $1', [id]);
  return { changed: existing };
}

/** Its TOTP and its passkeys (§24: a reset removes every factor); how many went. */
export async function removeOperatorFactors(q: Queryable, id: number): Promise<number> {
  const totp = await q.query('DELETE FROM operator_totp WHERE operator_id = $1 RETURNING 1', [id]);
  const passkeys = await q.query('DELETE FROM operator_passkeys WHERE operator_id = $1 RETURNING 1', [id]);
  return totp.length + passkeys.length;
}

export async function createEnrolment(q: Queryable, operatorId: number, tokenHash: string, expiresAt: Date): Promise<void> {
  await q.query('INSERT INTO operator_enrolments (token_hash, operator_id, expires_at) VALUES ($1, $2, $3)', [tokenHash, operatorId, expiresAt]);
}

/** Spends the link (single use: one conditional UPDATE decides between two redeemers); its operator, if it was live. */
export async function spendEnrolment(q: Queryable, tokenHash: string, now: Date): Promise<number | undefined> {
  const rows = await q.query<{ operator_id: number }>(
    'UPDATE operator_enrolments SET used_at = $2 WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2 RETURNING operator_id', [tokenHash, now],
  );
  return rows[0]?.operator_id;
}

export interface OperatorTokenRow {
  id: number;
  name: string;
  created_at: Date;
  expires_at: Date;
  last_used_at: Date | null;
}

export async function insertOperatorToken(q: Queryable, operatorId: number, name: string, tokenHash: string, now: Date, expiresAt: Date): Promise<OperatorTokenRow> {
  const rows = await q.query<OperatorTokenRow>(
    'INSERT INTO operator_tokens (operator_id, name, token_hash, created_at, expires_at) VALUES ($1, $2, $3, $4, $5) RETURNING id, name, created_at, expires_at, last_used_at',
    [operatorId, name, tokenHash, now, expiresAt],
  );
  return rows[0]!;
}

export async function listOperatorTokens(q: Queryable, operatorId: number): Promise<OperatorTokenRow[]> {
  return q.query<OperatorTokenRow>('SELECT id, name, created_at, expires_at, last_used_at FROM operator_tokens WHERE operator_id = $1 ORDER BY id', [operatorId]);
}

export async function deleteOperatorToken(q: Queryable, operatorId: number, id: number): Promise<boolean> {
  return (await q.query('DELETE FROM operator_tokens WHERE operator_id = $1 AND id = $2 RETURNING 1', [operatorId, id])).length > 0;
}

/**
 * The operator a live token stands for, with the role the operator has now; its use noted
 * (last_used_at) in the same statement.
 */
export async function useOperatorToken(q: Queryable, tokenHash: string, now: Date): Promise<{ id: number; email: string; role: OperatorRole } | undefined> {
  const rows = await q.query<{ id: number; email: string; role: OperatorRole }>(
    `UPDATE operator_tokens t SET last_used_at = $2 FROM operators o
     WHERE t.token_hash = $1 AND t.expires_at > $2 AND o.id = t.operator_id RETURNING o.id, o.email, o.role`, [tokenHash, now],
  );
  return rows[0];
}
