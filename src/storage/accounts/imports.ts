// What an import writes (CONTRACT §27): users and API keys in batches, one statement each, an
// email, external id or key hash already present left as it is (ON CONFLICT DO NOTHING), so that
// a second run, or two runs at once on any instances, create each account and key once.
import type { Queryable } from '../database/db.js';

/** An account as an import stores it. */
export interface ImportedUser {
  email: string;
  /** Stored verbatim; null: no password (the account signs in by reset, magic link or provider). */
  passwordHash: string | null;
  /** ISO 8601; null: the address was never proved. */
  emailVerifiedAt: string | null;
  plan: string;
  isActive: boolean;
  /** ISO 8601; null: the time of the import. */
  createdAt: string | null;
  externalId: string | null;
}

/**
 * Inserts the users that are not there yet, with their subscription rows, in one statement; the
 * emails it created. Arrays (unnest) rather than one placeholder per value: the statement is the
 * same for any batch size, and far below Postgres' limit of parameters.
 */
export async function insertImportedUsers(tx: Queryable, users: readonly ImportedUser[]): Promise<string[]> {
  if (!users.length) return [];
  const rows = await tx.query<{ email: string }>(
    `WITH input AS (
       SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::text[], $5::int[], $6::timestamptz[], $7::text[])
         AS t(email, password_hash, email_verified_at, plan, is_active, created_at, external_id)
     ), created AS (
       INSERT INTO users (email, password_hash, email_verified_at, plan, is_active, created_at, external_id)
       SELECT email, password_hash, email_verified_at, plan, is_active, COALESCE(created_at, now()), external_id FROM input
       ON CONFLICT DO NOTHING
       RETURNING id, email, plan
     ), subscribed AS (
       INSERT INTO subscriptions (user_id, plan) SELECT id, plan FROM created
     )
     SELECT email FROM created`,
    [
      users.map((u) => u.email), users.map((u) => u.passwordHash), users.map((u) => u.emailVerifiedAt), users.map((u) => u.plan),
      users.map((u) => (u.isActive ? 1 : 0)), users.map((u) => u.createdAt), users.map((u) => u.externalId),
    ],
  );
  return rows.map((r) => r.email);
}

/** Which of `emails` (stored form) belong to a user. */
export async function existingEmails(q: Queryable, emails: readonly string[]): Promise<Set<string>> {
  if (!emails.length) return new Set();
  return new Set((await q.query<{ email: string }>('SELECT email FROM users WHERE email = ANY($1::text[])', [emails])).map((r) => r.email));
}

/** Which of `ids` are a user's external_id. */
export async function existingExternalIds(q: Queryable, ids: readonly string[]): Promise<Set<string>> {
  if (!ids.length) return new Set();
  return new Set((await q.query<{ external_id: string }>('SELECT external_id FROM users WHERE external_id = ANY($1::text[])', [ids])).map((r) => r.external_id));
}

/** The ids of the users with these emails (stored form). */
export async function userIdsByEmail(q: Queryable, emails: readonly string[]): Promise<Map<string, number>> {
  if (!emails.length) return new Map();
  const rows = await q.query<{ id: number; email: string }>('SELECT id, email FROM users WHERE email = ANY($1::text[])', [emails]);
  return new Map(rows.map((r) => [r.email, r.id]));
}

export interface ImportedKey {
  userId: number;
  /** SHA-256 hex of the raw key, lower case: what api_tokens.token_hash holds. */
  hash: string;
  name: string;
  scopes: string[] | null;
  expiresAt: string | null;
}

/** Which of `hashes` are a key's already. */
export async function existingKeyHashes(q: Queryable, hashes: readonly string[]): Promise<Set<string>> {
  if (!hashes.length) return new Set();
  return new Set((await q.query<{ token_hash: string }>('SELECT token_hash FROM api_tokens WHERE token_hash = ANY($1::text[])', [hashes])).map((r) => r.token_hash));
}

/**
 * Inserts the keys whose hash is not stored yet (start null: imported by hash, CONTRACT §21); the
 * hashes it created. Scopes travel as JSON, since Postgres arrays cannot nest in unnest.
 */
export async function insertImportedKeys(tx: Queryable, keys: readonly ImportedKey[]): Promise<string[]> {
  if (!keys.length) return [];
  const rows = await tx.query<{ token_hash: string }>(
    `INSERT INTO api_tokens (user_id, token_hash, name, scopes, expires_at, start)
     SELECT t.user_id, t.token_hash, t.name,
            CASE WHEN t.scopes IS NULL THEN NULL ELSE ARRAY(SELECT jsonb_array_elements_text(t.scopes::jsonb)) END, t.expires_at, NULL
       FROM unnest($1::int[], $2::text[], $3::text[], $4::text[], $5::timestamptz[]) AS t(user_id, token_hash, name, scopes, expires_at)
     ON CONFLICT (token_hash) DO NOTHING
     RETURNING token_hash`,
    [keys.map((k) => k.userId), keys.map((k) => k.hash), keys.map((k) => k.name), keys.map((k) => (k.scopes ? JSON.stringify(k.scopes) : null)), keys.map((k) => k.expiresAt)],
  );
  return rows.map((r) => r.token_hash);
}
