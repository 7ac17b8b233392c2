// org_invitations (migration 025, CONTRACT §22): an organization's invitations, mailed as
// single-use links; only the token's SHA-256 is stored. Pending: neither accepted nor cancelled,
// and not expired. Written under the organization's row lock (orgs/change.ts).
import type { Queryable } from '../database/db.js';
import type { OrgRole } from './organizations.js';

export interface Invitation {
  id: number;
  org_id: number;
  email: string;
  role: OrgRole;
  invited_by: number | null;
  created_at: Date;
  expires_at: Date;
}

const COLUMNS = 'id, org_id, email, role, invited_by, created_at, expires_at';
const PENDING = 'accepted_at IS NULL AND cancelled_at IS NULL AND expires_at > $2';

/** Cancels the pending invitation to this address, if any: a new one replaces it. */
export async function replacePending(tx: Queryable, orgId: number, email: string, now: Date): Promise<void> {
  await tx.query(
    'UPDATE org_invitations SET cancelled_at = $3 WHERE org_id = $1 AND email = $2 AND accepted_at IS NULL AND cancelled_at IS NULL',
    [orgId, email, now],
  );
}

export async function insertInvitation(
  tx: Queryable, invitation: { orgId: number; email: string; role: OrgRole; invitedBy: number; tokenHash: string }, now: Date, expiresAt: Date,
): Promise<Invitation> {
  return (await tx.query<Invitation>(
    `INSERT INTO org_invitations (org_id, email, role, token_hash, invited_by, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${COLUMNS}`,
    [invitation.orgId, invitation.email, invitation.role, invitation.tokenHash, invitation.invitedBy, now, expiresAt],
  ))[0]!;
}

/** The organization's pending invitations, oldest first. */
export async function pendingOf(q: Queryable, orgId: number, now: Date): Promise<Invitation[]> {
  return q.query<Invitation>(`SELECT ${COLUMNS} FROM org_invitations WHERE org_id = $1 AND ${PENDING} ORDER BY id`, [orgId, now]);
}

export async function pendingCount(q: Queryable, orgId: number, now: Date): Promise<number> {
  return Number((await q.query<{ n: string }>(`SELECT count(*) AS n FROM org_invitations WHERE org_id = $1 AND ${PENDING}`, [orgId, now]))[0]!.n);
}

/** Invitations the user sent since `since`, to any organization (cancelled and replaced ones count: each sent a mail). */
export async function sentSince(q: Queryable, userId: number, since: Date): Promise<number> {
  return Number((await q.query<{ n: string }>('SELECT count(*) AS n FROM org_invitations WHERE invited_by = $1 AND created_at > $2', [userId, since]))[0]!.n);
}

/** Cancels one pending invitation of the organization; whether there was one. */
export async function cancelInvitation(tx: Queryable, orgId: number, id: number, now: Date): Promise<boolean> {
  const sql = `UPDATE org_invitations SET cancelled_at = $2 WHERE org_id = $1 AND id = $3 AND ${PENDING} RETURNING id`;
  return (await tx.query(sql, [orgId, now, id])).length > 0;
}

/** The pending invitation this token opens, without using it up. */
export async function findPending(q: Queryable, tokenHash: string, now: Date): Promise<Invitation | undefined> {
  return (await q.query<Invitation>(`SELECT ${COLUMNS} FROM org_invitations WHERE token_hash = $1 AND ${PENDING}`, [tokenHash, now]))[0];
}

/**
 * Uses the invitation up if it is still pending: one conditional UPDATE, so of concurrent accepts,
 * on any instance, exactly one gets the row.
 */
export async function useUp(tx: Queryable, id: number, now: Date): Promise<boolean> {
  return (await tx.query(`UPDATE org_invitations SET accepted_at = $2 WHERE id = $1 AND ${PENDING} RETURNING id`, [id, now])).length > 0;
}
