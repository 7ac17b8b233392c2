// refresh_tokens: the stored side of rotation. Each state change is one statement whose WHERE
// makes the race impossible (of N concurrent rotations of one token, one UPDATE returns a row).
import type { Queryable } from './db.js';

export async function insertRefreshToken(db: Queryable, userId: number, tokenHash: string, expiresAt: Date): Promise<void> {
  await db.query('INSERT INTO refresh_tokens (user_id, token_hash, expires_at) VALUES ($1, $2, $3)', [userId, tokenHash, expiresAt]);
}

/** Revokes the token if it is active for that user at `now`; true when this call revoked it. */
export async function revokeActive(db: Queryable, tokenHash: string, userId: number, now: Date): Promise<boolean> {
  const rows = await db.query(
    `UPDATE refresh_tokens SET revoked = 1, revoked_reason = 'rotated'
      WHERE token_hash = $1 AND user_id = $2 AND revoked = 0 AND expires_at > $3
      RETURNING id`,
    [tokenHash, userId, now],
  );
  return rows.length === 1;
}

/** Was this token already rotated away (so presenting it again is a replay)? */
export async function wasRotated(db: Queryable, tokenHash: string, userId: number): Promise<boolean> {
  const rows = await db.query(
    `SELECT 1 FROM refresh_tokens WHERE token_hash = $1 AND user_id = $2 AND revoked = 1 AND revoked_reason = 'rotated'`,
    [tokenHash, userId],
  );
  return rows.length === 1;
}

export async function revokeAllForUser(db: Queryable, userId: number): Promise<number> {
  const rows = await db.query(`UPDATE refresh_tokens SET revoked = 1, revoked_reason = 'reuse' WHERE user_id = $1 AND revoked = 0 RETURNING id`, [userId]);
  return rows.length;
}

/** Logout: revokes by hash whatever the state; an unknown hash changes nothing. */
export async function revokeByHash(db: Queryable, tokenHash: string): Promise<void> {
  await db.query(`UPDATE refresh_tokens SET revoked = 1, revoked_reason = COALESCE(revoked_reason, 'logout') WHERE token_hash = $1`, [tokenHash]);
}
