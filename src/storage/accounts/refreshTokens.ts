// refresh_tokens: the stored side of rotation. Each state change is one statement whose WHERE
// makes the race impossible (of N concurrent rotations of one token, one UPDATE returns a row).
// Every token belongs to a session (sessions.ts): the family of tokens rotated from one login.
import type { Queryable } from '../database/db.js';

export async function insertRefreshToken(db: Queryable, userId: number, tokenHash: string, expiresAt: Date, sessionId: number): Promise<void> {
  await db.query('INSERT INTO refresh_tokens (user_id, token_hash, expires_at, session_id) VALUES ($1, $2, $3, $4)', [userId, tokenHash, expiresAt, sessionId]);
}

/**
 * Revokes the token if it is active for that user at `now`. Undefined when it was not (this call
 * did not revoke it); else the token's session, null for a token issued before sessions existed.
 */
export async function revokeActive(db: Queryable, tokenHash: string, userId: number, now: Date): Promise<{ sessionId: number | null } | undefined> {
  const rows = await db.query<{ session_id: string | number | null }>(
    `UPDATE refresh_tokens SET revoked = 1, revoked_reason = 'rotated'
      WHERE token_hash = $1 AND user_id = $2 AND revoked = 0 AND expires_at > $3
      RETURNING session_id`,
    [tokenHash, userId, now],
  );
  const row = rows[0];
  return row && { sessionId: row.session_id === null ? null : Number(row.session_id) };
}

/** Was this token already rotated away (so presenting it again is a replay)? */
export async function wasRotated(db: Queryable, tokenHash: string, userId: number): Promise<boolean> {
  const rows = await db.query(
    `SELECT 1 FROM refresh_tokens WHERE token_hash = $1 AND user_id = $2 AND revoked = 1 AND revoked_reason = 'rotated'`,
    [tokenHash, userId],
  );
  return rows.length === 1;
}

/**
 * Why tokens were revoked, besides rotation and logout: a replayed token under refreshReuse
 * revoke-all, a password change or reset, a session ended by its user.
 */
export type RevokeReason = 'reuse' | 'password' | 'session' | 'mfa' | 'mailbox' | 'sso_claim' | 'sso_enforce';

/**
 * Revokes every active token of the user: ends all their sessions. Returns how many sessions
 * ended, not counting `goingOn` (one the caller issues a new token into); a token from before
 * sessions existed counts as one. Run it after lockUser(): a refresh holding the lock finishes
 * first and its new token is revoked too, or starts after and finds its token revoked.
 */
export async function revokeAllForUser(db: Queryable, userId: number, reason: RevokeReason, goingOn?: number): Promise<number> {
  const [row] = await db.query<{ sessions: number }>(
    `WITH revoked AS (
       UPDATE refresh_tokens SET revoked = 1, revoked_reason = $2 WHERE user_id = $1 AND revoked = 0 RETURNING id, session_id)
     SELECT count(DISTINCT coalesce(session_id, -id)) FILTER (WHERE $3::bigint IS NULL OR session_id IS DISTINCT FROM $3::bigint)::integer AS sessions FROM revoked`,
    [userId, reason, goingOn ?? null],
  );
  return row?.sessions ?? 0;
}

/** Ends every session of the user but `keep`, whose tokens stay valid; how many ended. After lockUser(). */
export async function revokeOtherSessions(db: Queryable, userId: number, reason: RevokeReason, keep: number | undefined): Promise<number> {
  const [row] = await db.query<{ sessions: number }>(
    `WITH revoked AS (
       UPDATE refresh_tokens SET revoked = 1, revoked_reason = $2
        WHERE user_id = $1 AND revoked = 0 AND session_id IS DISTINCT FROM $3::bigint RETURNING id, session_id)
     SELECT count(DISTINCT coalesce(session_id, -id))::integer AS sessions FROM revoked`,
    [userId, reason, keep ?? null],
  );
  return row?.sessions ?? 0;
}

/**
 * Enforcement turned on (CONTRACT §31): ends the sessions of the accounts whose address is of one
 * of `domains` that did not start through the connection `kept` (sessions.saml_connection_id,
 * migration 049), but none of `except`'s (the user making the change). A token from before
 * sessions has none, and ends. The users' rows are locked first, as lockUser() does: a refresh
 * under way finishes before and its new token is revoked too, or starts after and finds its token
 * revoked. How many sessions ended.
 */
export async function revokeForDomains(
  tx: Queryable, domains: readonly string[], reason: RevokeReason, except: number | undefined, kept: string,
): Promise<number> {
  if (domains.length === 0) return 0;
  const locked = await tx.query<{ id: number }>(
    "SELECT id FROM users WHERE lower(split_part(email, '@', 2)) = ANY($1::text[]) AND id IS DISTINCT FROM $2::bigint ORDER BY id FOR UPDATE",
    [domains, except ?? null],
  );
  if (locked.length === 0) return 0;
  const [row] = await tx.query<{ sessions: number }>(
    `WITH revoked AS (
       UPDATE refresh_tokens r SET revoked = 1, revoked_reason = $2 WHERE r.user_id = ANY($1::bigint[]) AND r.revoked = 0
          AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = r.session_id AND s.saml_connection_id = $3)
       RETURNING r.id, r.session_id)
     SELECT count(DISTINCT coalesce(session_id, -id))::integer AS sessions FROM revoked`,
    [locked.map((u) => u.id), reason, kept],
  );
  return row?.sessions ?? 0;
}

/** Logout: revokes by hash whatever the state; an unknown hash changes nothing. */
/** Revokes the token (logout); its user when it was active until now, for the audit log. */
export async function revokeByHash(db: Queryable, tokenHash: string): Promise<{ userId: number } | undefined> {
  // Of two logouts of one token at once, the row lock lets one see it active.
  const rows = await db.query<{ user_id: number }>(
    `WITH active AS (
       UPDATE refresh_tokens SET revoked = 1, revoked_reason = 'logout' WHERE token_hash = $1 AND revoked = 0 RETURNING user_id
     ), unexplained AS (
       UPDATE refresh_tokens SET revoked_reason = 'logout' WHERE token_hash = $1 AND revoked = 1 AND revoked_reason IS NULL
     )
     SELECT user_id FROM active`,
    [tokenHash],
  );
  return rows[0] ? { userId: Number(rows[0].user_id) } : undefined;
}
