// email_tokens: single-use links sent by email (password reset, email verification, sign-in), stored as the
// SHA-256 of the token only, with the address the link was sent to.
import type { Queryable } from '../database/db.js';

export type LinkPurpose = 'reset' | 'verify' | 'magic';

export async function insertEmailToken(db: Queryable, userId: number, purpose: LinkPurpose, tokenHash: string, email: string, now: Date, expiresAt: Date): Promise<void> {
  await db.query(
    'INSERT INTO email_tokens (user_id, purpose, token_hash, email, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)',
    [userId, purpose, tokenHash, email, now, expiresAt],
  );
}

/** Whether a link for this purpose was made for the user after `since`. */
export async function issuedSince(db: Queryable, userId: number, purpose: LinkPurpose, since: Date): Promise<boolean> {
  return (await db.query('SELECT 1 FROM email_tokens WHERE user_id = $1 AND purpose = $2 AND created_at > $3 LIMIT 1', [userId, purpose, since])).length > 0;
}

export interface LinkHolder {
  user_id: number;
  email: string;
}

/** The user and address of a link still usable at `now`, without using it up. */
export async function findUsable(db: Queryable, tokenHash: string, purpose: LinkPurpose, now: Date): Promise<LinkHolder | undefined> {
  return (await db.query<LinkHolder>(
    'SELECT user_id, email FROM email_tokens WHERE token_hash = $1 AND purpose = $2 AND used_at IS NULL AND expires_at > $3',
    [tokenHash, purpose, now],
  ))[0];
}

/**
 * Uses the link up if it is still usable at `now`: one conditional UPDATE, so of any number of
 * concurrent uses, on any instance, exactly one gets the row.
 */
export async function useUp(db: Queryable, tokenHash: string, purpose: LinkPurpose, now: Date): Promise<LinkHolder | undefined> {
  return (await db.query<LinkHolder>(
    `UPDATE email_tokens SET used_at = $3
      WHERE token_hash = $1 AND purpose = $2 AND used_at IS NULL AND expires_at > $3
      RETURNING user_id, email`,
    [tokenHash, purpose, now],
  ))[0];
}

/** Uses up every link of this purpose the user still holds (after a reset: no second one works). */
export async function useUpAll(db: Queryable, userId: number, purpose: LinkPurpose, now: Date): Promise<void> {
  await db.query('UPDATE email_tokens SET used_at = $3 WHERE user_id = $1 AND purpose = $2 AND used_at IS NULL', [userId, purpose, now]);
}
