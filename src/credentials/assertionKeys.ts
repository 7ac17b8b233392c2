// assertion_keys (migrations/003): the Ed25519 keys that sign x-gateway-assertion, generated once
// and shared by every instance through the database. Plain SQL, like the other repositories.
import { calculateJwkThumbprint, exportJWK, generateKeyPair, type JWK } from 'jose';
import type { Database, Queryable } from '../storage/database/index.js';

export const ASSERTION_ALG = 'EdDSA';
export type KeyState = 'next' | 'current' | 'retired';

export interface StoredKey {
  kid: string;
  state: KeyState;
  /** null once retired. */
  privateJwk: JWK | null;
  publicJwk: JWK;
  retiredAt: Date | null;
}

interface KeyRow {
  kid: string;
  state: KeyState;
  private_jwk: JWK | null;
  public_jwk: JWK;
  retired_at: Date | string | null;
}

// Arbitrary, fixed: every instance and the CLI must take the same lock (migrations use 7_414_201).
const ROTATION_LOCK = 7_414_203;

/** A fresh key pair as JWKs; the kid is the public key's RFC 7638 thumbprint. */
export async function generateAssertionKey(): Promise<{ kid: string; privateJwk: JWK; publicJwk: JWK }> {
  const { privateKey, publicKey } = await generateKeyPair(ASSERTION_ALG, { crv: 'Ed25519', extractable: true });
  const publicJwk = await exportJWK(publicKey);
  const privateJwk = await exportJWK(privateKey);
  return { kid: await calculateJwkThumbprint(publicJwk), privateJwk, publicJwk };
}

/** Next, current, then the keys retired within the last `retiredWithinSec` seconds, newest first. */
export async function loadAssertionKeys(db: Queryable, retiredWithinSec: number): Promise<StoredKey[]> {
  const rows = await db.query<KeyRow>(
    `SELECT kid, state, private_jwk, public_jwk, retired_at FROM assertion_keys
      WHERE state <> 'retired' OR retired_at > now() - make_interval(secs => $1)
      ORDER BY CASE state WHEN 'next' THEN 0 WHEN 'current' THEN 1 ELSE 2 END, retired_at DESC`,
    [retiredWithinSec],
  );
  return rows.map((r) => ({
    kid: r.kid,
    state: r.state,
    privateJwk: r.private_jwk,
    publicJwk: r.public_jwk,
    retiredAt: r.retired_at === null ? null : new Date(r.retired_at),
  }));
}

/**
 * Creates whichever of the current and next keys is missing. Safe when several instances start
 * at once: the unique index allows one row per state, and the losers' inserts do nothing.
 */
export async function ensureAssertionKeys(db: Queryable): Promise<void> {
  const present = new Set((await db.query<{ state: KeyState }>(`SELECT state FROM assertion_keys WHERE state IN ('current', 'next')`)).map((r) => r.state));
  for (const state of ['current', 'next'] as const) {
    if (!present.has(state)) await insertKey(db, state);
  }
}

/** A new key in `state`; its kid, or undefined when another instance's insert won (nothing inserted). */
async function insertKey(db: Queryable, state: 'current' | 'next'): Promise<string | undefined> {
  const key = await generateAssertionKey();
  const inserted = await db.query<{ kid: string }>(
    `INSERT INTO assertion_keys (kid, state, private_jwk, public_jwk, activated_at)
     VALUES ($1, $2, $3::jsonb, $4::jsonb, CASE WHEN $5::boolean THEN now() END)
     ON CONFLICT DO NOTHING RETURNING kid`,
    [key.kid, state, JSON.stringify(key.privateJwk), JSON.stringify(key.publicJwk), state === 'current'],
  );
  return inserted[0]?.kid;
}

export interface Rotation {
  current: string;
  previous: string | undefined;
  next: string;
}

/**
 * The next key (already published) becomes current, the current one is retired and a new next key
 * is made. One transaction under an advisory lock, so two rotations at once run one after the other.
 */
export async function rotateAssertionKeys(db: Database): Promise<Rotation> {
  return db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [ROTATION_LOCK]);
    await ensureAssertionKeys(tx);
    // The private part goes at once: a retired key never signs again, even on an instance that has
    // not reloaded yet (it signs from memory), so nothing needs it at rest.
    const retired = await tx.query<{ kid: string }>(
      `UPDATE assertion_keys SET state = 'retired', retired_at = now(), private_jwk = NULL WHERE state = 'current' RETURNING kid`,
    );
    const promoted = await tx.query<{ kid: string }>(`UPDATE assertion_keys SET state = 'current', activated_at = now() WHERE state = 'next' RETURNING kid`);
    // The next key was deleted by hand after ensureAssertionKeys saw it (the deletion committed
    // while this waited for its row): a new key becomes current, as a next key deleted before the
    // rotation would have been made (by ensureAssertionKeys above) and promoted. Refusing would gain
    // nothing: the rotation run again does the same. The current row was retired above, under the
    // rotation lock: the insert has no rival.
    const current = promoted[0]?.kid ?? (await insertKey(tx, 'current'))!;
    // An instance starting now may have made the next key first (ensureAssertionKeys): that one stays.
    const next = (await insertKey(tx, 'next')) ?? (await tx.query<{ kid: string }>(`SELECT kid FROM assertion_keys WHERE state = 'next'`))[0]!.kid;
    return { current, previous: retired[0]?.kid, next };
  });
}
