// Passkeys and WebAuthn challenges: the users' (migration 017) and the operators' (037), the same
// queries on either pair of tables. A challenge is used up by one conditional UPDATE, so of two
// instances given the same answer at once exactly one goes on.
import type { Queryable } from '../database/db.js';

/** Whose passkeys: the tables and the owner's column. Constants only, never input. */
export interface PasskeyTables {
  keys: 'passkeys' | 'operator_passkeys';
  challenges: 'webauthn_challenges' | 'operator_webauthn_challenges';
  owner: 'user_id' | 'operator_id';
}
export const USER_PASSKEYS: PasskeyTables = { keys: 'passkeys', challenges: 'webauthn_challenges', owner: 'user_id' };
export const OPERATOR_PASSKEYS: PasskeyTables = { keys: 'operator_passkeys', challenges: 'operator_webauthn_challenges', owner: 'operator_id' };

export interface Passkey {
  id: number;
  /** The user's or the operator's id, as the tables say. */
  owner_id: number;
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
export async function listPasskeys(db: Queryable, userId: number, t = USER_PASSKEYS): Promise<PasskeySummary[]> {
  return db.query<PasskeySummary>(`SELECT id, name, created_at, last_used_at FROM ${t.keys} WHERE ${t.owner} = $1 ORDER BY created_at DESC`, [userId]);
}

export type ChallengePurpose = 'register' | 'login';

/** Stores a challenge's hash; challenges expired before `now` go at the same time (each is written once, deleted once). */
export async function createChallenge(
  db: Queryable, challengeHash: string, purpose: ChallengePurpose, userId: number | null, now: Date, expiresAt: Date, t = USER_PASSKEYS,
): Promise<void> {
  await db.query(`DELETE FROM ${t.challenges} WHERE expires_at < $1`, [now]);
  await db.query(`INSERT INTO ${t.challenges} (challenge_hash, purpose, ${t.owner}, expires_at) VALUES ($1, $2, $3, $4)`, [challengeHash, purpose, userId, expiresAt]);
}

/** Uses the challenge up if it is live, of this purpose and (for a registration) this user's. */
export async function useChallenge(db: Queryable, challengeHash: string, purpose: ChallengePurpose, userId: number | null, now: Date, t = USER_PASSKEYS): Promise<boolean> {
  const rows = await db.query(
    `UPDATE ${t.challenges} SET used_at = $4
      WHERE challenge_hash = $1 AND purpose = $2 AND ${t.owner} IS NOT DISTINCT FROM $3 AND used_at IS NULL AND expires_at > $4
      RETURNING 1`,
    [challengeHash, purpose, userId, now],
  );
  return rows.length === 1;
}

export async function insertPasskey(
  db: Queryable, userId: number, credential: { id: string; publicKey: Uint8Array; counter: number; transports?: string[] }, name: string, now: Date, t = USER_PASSKEYS,
): Promise<PasskeySummary | undefined> {
  return (await db.query<PasskeySummary>(
    `INSERT INTO ${t.keys} (${t.owner}, credential_id, public_key, counter, transports, name, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (credential_id) DO NOTHING
     RETURNING id, name, created_at, last_used_at`,
    [userId, credential.id, credential.publicKey, credential.counter, JSON.stringify(credential.transports ?? []), name, now],
  ))[0];
}

/** Whose passkey a credential id is, read without a lock (the sign-in then locks the user first). */
export async function findOwner(db: Queryable, credentialId: string, t = USER_PASSKEYS): Promise<number | undefined> {
  return (await db.query<{ owner_id: number }>(`SELECT ${t.owner} AS owner_id FROM ${t.keys} WHERE credential_id = $1`, [credentialId]))[0]?.owner_id;
}

/** The passkey of a credential id, its row locked: two sign-ins with it check and move its counter one after the other. */
export async function lockByCredentialId(db: Queryable, credentialId: string, t = USER_PASSKEYS): Promise<Passkey | undefined> {
  const [row] = await db.query<Passkey & { counter: string | number }>(
    `SELECT id, ${t.owner} AS owner_id, credential_id, public_key, counter, transports FROM ${t.keys} WHERE credential_id = $1 FOR UPDATE`,
    [credentialId],
  );
  return row && { ...row, counter: Number(row.counter), public_key: new Uint8Array(row.public_key) };
}

export async function recordUse(db: Queryable, id: number, counter: number, now: Date, t = USER_PASSKEYS): Promise<void> {
  await db.query(`UPDATE ${t.keys} SET counter = $2, last_used_at = $3 WHERE id = $1`, [id, counter, now]);
}

/** The credential ids the user has: a new registration must not repeat one (excludeCredentials). */
export async function credentialIdsOf(db: Queryable, userId: number, t = USER_PASSKEYS): Promise<Array<{ id: string; transports: string[] }>> {
  return (await db.query<{ credential_id: string; transports: string[] }>(`SELECT credential_id, transports FROM ${t.keys} WHERE ${t.owner} = $1`, [userId]))
    .map((r) => ({ id: r.credential_id, transports: r.transports }));
}

export async function removePasskey(db: Queryable, userId: number, id: number): Promise<boolean> {
  return (await db.query('DELETE FROM passkeys WHERE id = $1 AND user_id = $2 RETURNING 1', [id, userId])).length === 1;
}

export async function hasPasskey(db: Queryable, userId: number, t = USER_PASSKEYS): Promise<boolean> {
  return (await db.query(`SELECT 1 FROM ${t.keys} WHERE ${t.owner} = $1 LIMIT 1`, [userId])).length === 1;
}
