// org_managed_accounts (migration 043, CONTRACT §31): which accounts an organization's SAML or SCIM
// created. Written in the transaction that creates the account; read by deprovisioning (deactivate
// the account only when the organization made it) and by SCIM before it changes an email.
import type { Queryable } from '../database/db.js';

export type ManagedBy = 'saml' | 'scim';

/** Records that `orgId`'s `by` created the account (once: a second call changes nothing). */
export async function recordManaged(tx: Queryable, orgId: number, userId: number, by: ManagedBy, now: Date): Promise<void> {
  await tx.query(
    'INSERT INTO org_managed_accounts (org_id, user_id, created_by, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT (org_id, user_id) DO NOTHING',
    [orgId, userId, by, now],
  );
}

/** What of the organization created the account, or undefined when it did not (it was linked, or made elsewhere). */
export async function managedBy(q: Queryable, orgId: number, userId: number): Promise<ManagedBy | undefined> {
  const rows = await q.query<{ created_by: ManagedBy }>('SELECT created_by FROM org_managed_accounts WHERE org_id = $1 AND user_id = $2', [orgId, userId]);
  return rows[0]?.created_by;
}
