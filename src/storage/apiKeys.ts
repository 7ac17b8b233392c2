// Personal API keys (table api_tokens, its contract name), stored as SHA-256 hex only.
import type { Queryable } from './db.js';

/**
 * The owner of a non-revoked key, active or not: whether the owner may use it is the user's own
 * state (IdentityCache.activeUser), so that a key's answer changes only when its row does.
 */
export async function findKeyOwner(db: Queryable, keyHash: string): Promise<number | undefined> {
  const rows = await db.query<{ user_id: number }>('SELECT user_id FROM api_tokens WHERE token_hash = $1 AND revoked = 0', [keyHash]);
  return rows[0]?.user_id;
}

/** Writes the last use of each key in one statement (see ApiKeyUsage). */
export async function recordKeyUses(db: Queryable, uses: Map<string, Date>): Promise<void> {
  if (uses.size === 0) return;
  await db.query(
    `UPDATE api_tokens t SET last_used_at = u.at
       FROM (SELECT unnest($1::text[]) AS hash, unnest($2::timestamptz[]) AS at) u
      WHERE t.token_hash = u.hash AND (t.last_used_at IS NULL OR t.last_used_at < u.at)`,
    [[...uses.keys()], [...uses.values()].map((d) => d.toISOString())],
  );
}

/** Stores a new key and revokes the user's earlier ones; `tx` is a transaction (one unit). */
export async function replaceKey(tx: Queryable, userId: number, keyHash: string): Promise<{ createdAt: Date; revokedHashes: string[] }> {
  // Serializes concurrent creations for one user: without it two could each revoke the other's
  // earlier keys, insert, and leave two active keys.
  await tx.query('SELECT 1 FROM users WHERE id = $1 FOR UPDATE', [userId]);
  const revoked = await tx.query<{ token_hash: string }>('UPDATE api_tokens SET revoked = 1 WHERE user_id = $1 AND revoked = 0 RETURNING token_hash', [userId]);
  const rows = await tx.query<{ created_at: Date }>('INSERT INTO api_tokens (user_id, token_hash) VALUES ($1, $2) RETURNING created_at', [userId, keyHash]);
  return { createdAt: rows[0]!.created_at, revokedHashes: revoked.map((r) => r.token_hash) };
}

/** Revokes every active key of the user; returns the revoked hashes (none: already done). */
export async function revokeKeys(db: Queryable, userId: number): Promise<string[]> {
  const rows = await db.query<{ token_hash: string }>('UPDATE api_tokens SET revoked = 1 WHERE user_id = $1 AND revoked = 0 RETURNING token_hash', [userId]);
  return rows.map((r) => r.token_hash);
}

export interface ApiKeyRow {
  id: number;
  revoked: number;
  last_used_at: Date | null;
  created_at: Date;
}

/** The user's keys, newest first, as operators see them: never the hash. */
export async function listKeys(db: Queryable, userId: number): Promise<ApiKeyRow[]> {
  const rows = await db.query<ApiKeyRow & { id: string | number }>(
    'SELECT id, revoked, last_used_at, created_at FROM api_tokens WHERE user_id = $1 ORDER BY id DESC',
    [userId],
  );
  return rows.map((row) => ({ ...row, id: Number(row.id) }));
}
