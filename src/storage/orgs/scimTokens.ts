// scim_tokens (migration 048, CONTRACT §31): an organization's SCIM tokens, kept as SHA-256. A token
// belongs to the organization (deleted with it), not to the member who made it.
import type { Queryable } from '../database/db.js';

export interface ScimToken {
  id: number;
  name: string;
  created_at: Date;
  expires_at: Date | null;
  last_used_at: Date | null;
}

const COLUMNS = 'id, name, created_at, expires_at, last_used_at';

export async function insertScimToken(
  q: Queryable, token: { orgId: number; name: string; hash: string; createdBy: number; expiresAt: Date | null }, now: Date,
): Promise<ScimToken> {
  return (await q.query<ScimToken>(
    `INSERT INTO scim_tokens (org_id, name, token_hash, created_by, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6) RETURNING ${COLUMNS}`,
    [token.orgId, token.name, token.hash, token.createdBy, now, token.expiresAt],
  ))[0]!;
}

export async function scimTokensOf(q: Queryable, orgId: number): Promise<ScimToken[]> {
  return q.query<ScimToken>(`SELECT ${COLUMNS} FROM scim_tokens WHERE org_id = $1 ORDER BY id`, [orgId]);
}

/** Revokes (deletes) the token of this organization; whether there was one. */
export async function deleteScimToken(q: Queryable, orgId: number, id: number): Promise<boolean> {
  return (await q.query('DELETE FROM scim_tokens WHERE org_id = $1 AND id = $2 RETURNING id', [orgId, id])).length > 0;
}

// last_used_at is written at most once a minute per token: a directory syncing thousands of users
// must not turn every read into a write of the same row.
const LAST_USED_EVERY = "interval '1 minute'";

/**
 * The id of the unexpired token with this hash, when it belongs to organization `orgId`; its
 * last_used_at moved to `now`. Another organization's token is no token here (the WHERE says so).
 */
export async function useScimToken(q: Queryable, orgId: number, hash: string, now: Date): Promise<number | undefined> {
  const found = (await q.query<{ id: number; last_used_at: Date | null }>(
    'SELECT id, last_used_at FROM scim_tokens WHERE token_hash = $1 AND org_id = $2 AND (expires_at IS NULL OR expires_at > $3)',
    [hash, orgId, now],
  ))[0];
  if (!found) return undefined;
  await q.query(`UPDATE scim_tokens SET last_used_at = $2 WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $2::timestamptz - ${LAST_USED_EVERY})`, [found.id, now]);
  return found.id;
}
