// Passkeys and WebAuthn challenges (migration 017). A challenge is used up by one conditional
// UPDATE, so of two instances given the same answer at once exactly one goes on.
import type { Queryable } from './db.js';

export interface Passkey {
  id: number;
  user_id: number;
  credential_id: string;
  public_key: Uint8Array<ArrayBuffer>;
  counter: number;
  transports: string[];
}

/** What the user and operators see of a passkey: never the key or the counter. */
export interface PasskeySummary {
  id: number;
  name: string;
  created_at: Date;
  last_used_at: Date | null;
}

/** The user's passkeys, newest first: what the user and operators see of them. */
export async function listPasskeys(db: Queryable, userId: number): Promise<PasskeySummary[]> {
  return db.query<PasskeySummary>('SELECT id, name, created_at, last_used_at FROM passkeys WHERE user_id = $1 ORDER BY created_at DESC', [userId]);
}

export type ChallengePurpose = 'register' | 'login';

/** Stores a challenge's hash; challenges expired before `now` go at the same time (each is written once, deleted once). */
export async function createChallenge(db: Queryable, challengeHash: string, purpose: ChallengePurpose, userId: number | null, now: Date, expiresAt: Date): Promise<void> {
  await db.query('DELETE FROM webauthn_challenges WHERE expires_at < $1', [now]);
  await db.query('INSERT INTO webauthn_challenges (challenge_hash, purpose, user_id, expires_at) VALUES ($1, $2, $3, $4)', [challengeHash, purpose, userId, expiresAt]);
}

/** Uses the challenge up if it is live, of this purpose and (for a registration) this user's. */
export async function useChallenge(db: Queryable, challengeHash: string, purpose: ChallengePurpose, userId: number | null, now: Date): Promise<boolean> {
  const rows = await db.query(
    `UPDATE webauthn_challenges SET used_at = $4
      WHERE challenge_hash = $1 AND purpose = $2 AND user_id IS NOT DISTINCT FROM $3 AND used_at IS NULL AND expires_at > $4
      RETURNING 1`,
    [challengeHash, purpose, userId, now],
  );
  return rows.length === 1;
}

export async function insertPasskey(
  db: Queryable, userId: number, credential: { id: string; publicKey: Uint8Array; counter: number; transports?: string[] }, name: string, now: Date,
): Promise<PasskeySummary | undefined> {
  return (await db.query<PasskeySummary>(
    `INSERT INTO passkeys (user_id, credential_id, public_key, counter, transports, name, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (credential_id) DO NOTHING
     RETURNING id, name, created_at, last_used_at`,
    [userId, credential.id, credential.publicKey, credential.counter, JSON.stringify(credential.transports ?? []), name, now],
  ))[0];
}

/** Whose passkey a credential id is, read without a lock (the sign-in then locks the user first). */
export async function findOwner(db: Queryable, credentialId: string): Promise<number | undefined> {
  return (await db.query<{ user_id: number }>('SELECT user_id FROM passkeys WHERE credential_id = $1', [credentialId]))[0]?.user_id;
}

/** The passkey of a credential id, its row locked: two sign-ins with it check and move its counter one after the other. */
export async function lockByCredentialId(db: Queryable, credentialId: string): Promise<Passkey | undefined> {
  const [row] = await db.query<Passkey & { counter: string | number }>(
    'SELECT id, user_id, credential_id, public_key, counter, transports FROM passkeys WHERE credential_id = $1 FOR UPDATE',
    [credentialId],
  );
  return row && { ...row, counter: Number(row.counter), public_key: new Uint8Array(row.public_key) };
}

export async function recordUse(db: Queryable, id: number, counter: number, now: Date): Promise<void> {
  await db.query('UPDATE passkeys SET counter = $2, last_used_at = $3 WHERE id = $1', [id, counter, now]);
}

/** The credential ids the user has: a new registration must not repeat one (excludeCredentials). */
export async function credentialIdsOf(db: Queryable, userId: number): Promise<Array<{ id: string; transports: string[] }>> {
  return (await db.query<{ credential_id: string; transports: string[] }>('SELECT credential_id, transports FROM passkeys WHERE user_id = $1', [userId]))
    .map((r) => ({ id: r.credential_id, transports: r.transports }));
}

export async function removePasskey(db: Queryable, userId: number, id: number): Promise<boolean> {
  return (await db.query('DELETE FROM passkeys WHERE id = $1 AND user_id = $2 RETURNING 1', [id, userId])).length === 1;
}

export async function hasPasskey(db: Queryable, userId: number): Promise<boolean> {
  return (await db.query('SELECT 1 FROM passkeys WHERE user_id = $1 LIMIT 1', [userId])).length === 1;
}
