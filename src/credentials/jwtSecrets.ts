// The HS256 secrets the database keeps when auth.jwt.secret is empty (gateway_secrets): the current
// one, and the one `gateway keys rotate-jwt` rotated out, which verifies tokens (never signs) until
// every token it signed has expired. Plain SQL beside the key set it feeds (tokenKeys.ts).
import { randomBytes } from 'node:crypto';
// Every instance listens there: a rotation reaches them within milliseconds.
import { JWT_KEYS_CHANNEL } from '../storage/feed/index.js';
import { type Database, getOrCreateSecret, type Queryable } from '../storage/database/index.js';
import { hmacKey, type StoredSecrets } from './tokenKeys.js';

const CURRENT = 'jwt_hs256';
const PREVIOUS = 'jwt_hs256_previous';
// Arbitrary, fixed: the CLI's rotations run one after the other (migrations use 7_414_201).
const ROTATION_LOCK = 7_414_211;
/** How often an instance reads the stored secrets again, in case a notification was lost. */
export const JWT_RELOAD_INTERVAL_MS = 30_000;
/**
 * How long a rotated-out secret outlives the last token it can have signed, beyond
 * auth.refreshTokenTtl: an instance that missed the notification signs with it until its next
 * reload, and 30 s more absorb clock skew between instances.
 */
export const PREVIOUS_GRACE_MS = JWT_RELOAD_INTERVAL_MS + 30_000;

const newSecret = () => randomBytes(48).toString('base64url');

/** The stored secrets (the current one made now if this is the first instance ever); `previous` while it verifies. */
export async function loadStoredSecrets(db: Queryable, refreshTokenTtlMs: number): Promise<{ stored: StoredSecrets; created: boolean }> {
  const current = await getOrCreateSecret(db, CURRENT, newSecret());
  const previous = await livePrevious(db, refreshTokenTtlMs);
  return { stored: { current: current.value, ...(previous ? { previous: previous.value } : {}) }, created: current.created };
}

async function livePrevious(db: Queryable, refreshTokenTtlMs: number): Promise<{ value: string; until: Date } | undefined> {
  // The database's clock, not the instance's: every instance drops the key at the same moment.
  const rows = await db.query<{ value: string; until: Date | string }>(
    `SELECT value, created_at + make_interval(secs => $2) AS until FROM gateway_secrets
      WHERE name = $1 AND created_at + make_interval(secs => $2) > now()`,
    [PREVIOUS, (refreshTokenTtlMs + PREVIOUS_GRACE_MS) / 1000],
  );
  return rows[0] && { value: rows[0].value, until: new Date(rows[0].until) };
}

export type RotationResult =
  | { rotated: true; kid: string; previousKid: string; previousUntil: Date }
  /** A secret rotated out earlier still verifies live sessions: rotating again would end them. */
  | { rotated: false; previousKid: string; previousUntil: Date };

/**
 * The current secret becomes the previous one and a new secret signs. One transaction under an
 * advisory lock; refused while an earlier previous secret still verifies (its sessions would end).
 */
export async function rotateStoredSecret(db: Database, refreshTokenTtlMs: number): Promise<RotationResult> {
  return db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [ROTATION_LOCK]);
    const alive = await livePrevious(tx, refreshTokenTtlMs);
    if (alive) return { rotated: false, previousKid: hmacKey(alive.value).kid, previousUntil: alive.until };
    const current = await getOrCreateSecret(tx, CURRENT, newSecret());
    await tx.query('DELETE FROM gateway_secrets WHERE name = $1', [PREVIOUS]);
    await tx.query('INSERT INTO gateway_secrets (name, value) VALUES ($1, $2)', [PREVIOUS, current.value]);
    const next = newSecret();
    await tx.query('UPDATE gateway_secrets SET value = $2, created_at = now() WHERE name = $1', [CURRENT, next]);
    await tx.query('SELECT pg_notify($1, \'\')', [JWT_KEYS_CHANNEL]);
    const [row] = await tx.query<{ until: Date | string }>(
      'SELECT created_at + make_interval(secs => $2) AS until FROM gateway_secrets WHERE name = $1',
      [PREVIOUS, (refreshTokenTtlMs + PREVIOUS_GRACE_MS) / 1000],
    );
    return { rotated: true, kid: hmacKey(next).kid, previousKid: hmacKey(current.value).kid, previousUntil: new Date(row!.until) };
  });
}

/** Forgets the rotated-out secret now, ending every session it signed; its kid, or undefined when there was none alive. */
export async function dropPreviousSecret(db: Database, refreshTokenTtlMs: number): Promise<string | undefined> {
  return db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [ROTATION_LOCK]);
    const alive = await livePrevious(tx, refreshTokenTtlMs);
    await tx.query('DELETE FROM gateway_secrets WHERE name = $1', [PREVIOUS]);
    await tx.query('SELECT pg_notify($1, \'\')', [JWT_KEYS_CHANNEL]);
    return alive && hmacKey(alive.value).kid;
  });
}
