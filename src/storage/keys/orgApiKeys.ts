// Organization API keys (CONTRACT §22): rows of api_tokens with org_id set, user_id their creator
// and role the most they act with. Listed, counted (apiKeys.maxPerOwner per organization) and
// revoked by their organization; changes of one organization's keys run in orgs/change.ts's
// transaction, under the organization's row lock, so counts read here hold until the commit.
import type { Queryable } from '../database/db.js';
import { asOwnKey, insertKey, OWN_KEY_COLUMNS, type NewKeyRow, type OwnKey } from './apiKeys.js';
import type { OrgRole } from '../orgs/organizations.js';

/** An organization key as its managers see it: never the key or its hash. */
export interface OrgKey extends OwnKey {
  role: OrgRole;
  created_by: number;
}

const ORG_KEY_COLUMNS = `${OWN_KEY_COLUMNS}, role, user_id AS created_by`;
const asOrgKey = (row: OrgKey & { id: string | number }): OrgKey => ({ ...asOwnKey(row), role: row.role, created_by: row.created_by });

/** Stores the organization's key unless it holds `max` keys that count (active, not rolled, not expired at `now`); null then. */
export async function createOrgKeyWithin(
  tx: Queryable, orgId: number, creatorId: number, key: NewKeyRow & { role: OrgRole }, max: number, now: Date,
): Promise<OrgKey | null> {
  const [{ n }] = await tx.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM api_tokens WHERE org_id = $1 AND revoked = 0 AND rolled_at IS NULL AND (expires_at IS NULL OR expires_at > $2)',
    [orgId, now]) as [{ n: number }];
  if (n >= max) return null;
  return asOrgKey(await insertKey<OrgKey>(tx, { userId: creatorId, orgId, role: key.role }, key, ORG_KEY_COLUMNS));
}

/** The organization's keys that are not revoked, newest first. */
export async function orgKeys(q: Queryable, orgId: number): Promise<OrgKey[]> {
  const rows = await q.query<OrgKey & { id: string | number }>(`SELECT ${ORG_KEY_COLUMNS} FROM api_tokens WHERE org_id = $1 AND revoked = 0 ORDER BY id DESC`, [orgId]);
  return rows.map(asOrgKey);
}

/** Revokes one of the organization's keys; its hash, or undefined when it is not the organization's or already revoked. */
export async function revokeOrgKey(tx: Queryable, orgId: number, id: number): Promise<string | undefined> {
  const rows = await tx.query<{ token_hash: string }>('UPDATE api_tokens SET revoked = 1 WHERE id = $1 AND org_id = $2 AND revoked = 0 RETURNING token_hash', [id, orgId]);
  return rows[0]?.token_hash;
}
