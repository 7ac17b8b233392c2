// Personal API keys (table api_tokens, its contract name), stored as SHA-256 hex only.
import type { Queryable } from '../database/db.js';
import type { OrgRole } from '../orgs/organizations.js';

// A user's own keys are the personal ones (org_id IS NULL): an organization key (CONTRACT §22) is
// its organization's, listed, counted and revoked there (storage/keys/orgApiKeys.ts), though user_id
// names its creator.

/** What a request's key is, as the guards read it (IdentityCache keeps it). */
export interface KeyRecord {
  id: number;
  userId: number;
  /** null: the owner's every right (CONTRACT §21). */
  scopes: string[] | null;
  /** Epoch ms; null: never expires. */
  expiresAt: number | null;
  /** An organization key's organization and role (CONTRACT §22); null for a personal key, whose userId is its owner (an organization key's: its creator). */
  orgId: number | null;
  role: OrgRole | null;
}

/**
 * A non-revoked key, its owner active or not: whether the owner may use it is the user's own
 * state (IdentityCache.activeUser), so that a key's answer changes only when its row does.
 */
export async function findKey(db: Queryable, keyHash: string): Promise<KeyRecord | undefined> {
  const rows = await db.query<{ id: string | number; user_id: number; scopes: string[] | null; expires_at: Date | null; org_id: number | null; role: OrgRole | null }>(
    'SELECT id, user_id, scopes, expires_at, org_id, role FROM api_tokens WHERE token_hash = $1 AND revoked = 0', [keyHash]);
  const row = rows[0];
  return row && {
    id: Number(row.id), userId: row.user_id, scopes: row.scopes, expiresAt: row.expires_at ? new Date(row.expires_at).getTime() : null, orgId: row.org_id, role: row.role,
  };
}

/** Writes the last use of each key, by id, in one statement (see ApiKeyUsage). */
export async function recordKeyUses(db: Queryable, uses: Map<number, Date>): Promise<void> {
  if (uses.size === 0) return;
  await db.query(
    `UPDATE api_tokens t SET last_used_at = u.at
       FROM (SELECT unnest($1::bigint[]) AS id, unnest($2::timestamptz[]) AS at) u
      WHERE t.id = u.id AND (t.last_used_at IS NULL OR t.last_used_at < u.at)`,
    [[...uses.keys()], [...uses.values()].map((d) => d.toISOString())],
  );
}

/** Stores a new `default` key and revokes the user's earlier `default` keys (named keys stay); `tx` is a transaction. */
export async function replaceKey(tx: Queryable, userId: number, keyHash: string, start: string): Promise<{ id: number; createdAt: Date; revoked: RevokedKey[] }> {
  // Serializes concurrent creations for one user: without it two could each revoke the other's
  // earlier keys, insert, and leave two active keys.
  await tx.query('SELECT 1 FROM users WHERE id = $1 FOR UPDATE', [userId]);
  const revoked = await revokeWhere(tx, "user_id = $1 AND org_id IS NULL AND name = 'default'", [userId]);
  const row = await insertKey<{ created_at: Date }>(tx, { userId }, { hash: keyHash, start, name: 'default', scopes: null, expiresAt: null }, 'id, created_at');
  return { id: Number(row.id), createdAt: row.created_at, revoked };
}

export interface NewKeyRow {
  hash: string;
  start: string;
  name: string;
  scopes: string[] | null;
  expiresAt: Date | null;
}

/** A key as its owner sees it: never the key or its hash. */
export interface OwnKey {
  id: number;
  name: string;
  start: string | null;
  scopes: string[] | null;
  created_at: Date;
  expires_at: Date | null;
  last_used_at: Date | null;
}
export const OWN_KEY_COLUMNS = 'id, name, start, scopes, created_at, expires_at, last_used_at';
export const asOwnKey = (row: OwnKey & { id: string | number }): OwnKey => ({ ...row, id: Number(row.id) });

/**
 * Stores a named key unless the user already holds `max` keys that count (active, not rolled, not
 * expired at `now`); null then. The user's row lock makes parallel creations on any instance
 * count one after the other. `tx` is a transaction.
 */
export async function createKeyWithin(tx: Queryable, userId: number, key: NewKeyRow, max: number, now: Date): Promise<OwnKey | null> {
  await tx.query('SELECT 1 FROM users WHERE id = $1 FOR UPDATE', [userId]);
  const [{ n }] = await tx.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM api_tokens WHERE user_id = $1 AND org_id IS NULL AND revoked = 0 AND rolled_at IS NULL AND (expires_at IS NULL OR expires_at > $2)',
    [userId, now]) as [{ n: number }];
  if (n >= max) return null;
  return asOwnKey(await insertKey(tx, { userId }, key, OWN_KEY_COLUMNS));
}

/** Who holds a new key: a user, or an organization (`userId` then its creator) with the key's role. */
export interface KeyHolder {
  userId: number;
  orgId?: number;
  role?: OrgRole;
}

/**
 * The one INSERT of a named key, personal or an organization's (orgApiKeys.ts): a new column of
 * api_tokens that every key is made with is written here alone. The row as `columns` (a constant
 * of this floor) reads it.
 */
export async function insertKey<Row>(tx: Queryable, holder: KeyHolder, key: NewKeyRow, columns: string): Promise<Row & { id: string | number }> {
  const rows = await tx.query<Row & { id: string | number }>(
    `INSERT INTO api_tokens (user_id, org_id, role, token_hash, start, name, scopes, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING ${columns}`,
    [holder.userId, holder.orgId ?? null, holder.role ?? null, key.hash, key.start, key.name, key.scopes, key.expiresAt]);
  return rows[0]!;
}

/** A key rolled: the one it replaces (its hash, and the expiry it now has) and the new one. */
export interface RolledKey {
  old: { id: number; hash: string; expiresAt: Date };
  created: OwnKey;
}

/**
 * Rolls one of the user's keys (CONTRACT §21): a new key with its name, scopes and expiry, and the
 * old one marked rolled (it no longer counts toward maxPerOwner) and expiring at the earlier of its
 * own expiry and `until`. Only a key that is active, not rolled and not expired at `now` rolls;
 * undefined otherwise. The row lock makes two rolls of one key, on any instances, one after the
 * other: the second finds it rolled. `tx` is a transaction.
 */
export async function rollKeyWithin(
  tx: Queryable, userId: number, id: number, key: Pick<NewKeyRow, 'hash' | 'start'>, until: Date, now: Date,
): Promise<RolledKey | undefined> {
  const [old] = await tx.query<{ token_hash: string; name: string; scopes: string[] | null; expires_at: Date | null }>(
    `SELECT token_hash, name, scopes, expires_at FROM api_tokens
      WHERE id = $1 AND user_id = $2 AND org_id IS NULL AND revoked = 0 AND rolled_at IS NULL AND (expires_at IS NULL OR expires_at > $3) FOR UPDATE`,
    [id, userId, now]);
  if (!old) return undefined;
  // LEAST ignores a NULL (a key that never expired): it then expires at `until`.
  const [ended] = await tx.query<{ expires_at: Date }>(
    'UPDATE api_tokens SET rolled_at = $2, expires_at = LEAST(expires_at, $3) WHERE id = $1 RETURNING expires_at', [id, now, until]);
  const created = asOwnKey(await insertKey(tx, { userId }, { ...key, name: old.name, scopes: old.scopes, expiresAt: old.expires_at }, OWN_KEY_COLUMNS));
  return { old: { id, hash: old.token_hash, expiresAt: new Date(ended!.expires_at) }, created };
}

/** The user's keys that are not revoked, newest first. */
export async function ownKeys(db: Queryable, userId: number): Promise<OwnKey[]> {
  const rows = await db.query<OwnKey & { id: string | number }>(`SELECT ${OWN_KEY_COLUMNS} FROM api_tokens WHERE user_id = $1 AND org_id IS NULL AND revoked = 0 ORDER BY id DESC`, [userId]);
  return rows.map(asOwnKey);
}

/** Revokes one of the user's keys; its hash, or undefined when it is not theirs or already revoked. */
export async function revokeOwnKey(db: Queryable, userId: number, id: number): Promise<string | undefined> {
  const rows = await db.query<{ token_hash: string }>('UPDATE api_tokens SET revoked = 1 WHERE id = $1 AND user_id = $2 AND org_id IS NULL AND revoked = 0 RETURNING token_hash', [id, userId]);
  return rows[0]?.token_hash;
}

/** Revokes every active key of the user; returns the keys revoked, by id (none: already done). */
export async function revokeKeys(db: Queryable, userId: number): Promise<RevokedKey[]> {
  return revokeWhere(db, 'user_id = $1 AND org_id IS NULL', [userId]);
}

export interface ApiKeyRow extends OwnKey {
  revoked: number;
}

/**
 * The user's personal keys, newest first, as operators see them: never the hash. An organization
 * key is its organization's, not its creator's (CONTRACT §33), though its row names the creator.
 */
export async function listKeys(db: Queryable, userId: number): Promise<ApiKeyRow[]> {
  const rows = await db.query<ApiKeyRow & { id: string | number }>(`SELECT ${OWN_KEY_COLUMNS}, revoked FROM api_tokens WHERE user_id = $1 AND org_id IS NULL ORDER BY id DESC`, [userId]);
  return rows.map((row) => ({ ...row, id: Number(row.id) }));
}

export interface RevokedKey {
  id: number;
  userId: number;
  hash: string;
}

/**
 * Revokes the active keys that `where` (a condition on api_tokens, a constant of this file) selects;
 * the keys revoked, by id, whose order their audit rows and events follow.
 */
async function revokeWhere(q: Queryable, where: string, params: unknown[]): Promise<RevokedKey[]> {
  const rows = await q.query<{ id: string | number; user_id: number; token_hash: string }>(
    `WITH revoked AS (UPDATE api_tokens SET revoked = 1 WHERE ${where} AND revoked = 0 RETURNING id, user_id, token_hash)
     SELECT id, user_id, token_hash FROM revoked ORDER BY id`, params);
  return rows.map((row) => ({ id: Number(row.id), userId: row.user_id, hash: row.token_hash }));
}

/** Revokes the key with this id, whoever holds it (an operator's act); undefined when none is active. */
export async function revokeKeyById(db: Queryable, id: number): Promise<RevokedKey | undefined> {
  return (await revokeWhere(db, 'id = $1', [id]))[0];
}

/** Revokes the organization keys a member made (their membership ended). */
export async function revokeMemberOrgKeys(db: Queryable, orgId: number, userId: number): Promise<RevokedKey[]> {
  return revokeWhere(db, 'org_id = $1 AND user_id = $2', [orgId, userId]);
}

/** Revokes the active keys among these hashes (leaked keys); those that match nothing are ignored. */
export async function revokeKeysByHash(db: Queryable, hashes: string[]): Promise<RevokedKey[]> {
  return revokeWhere(db, 'token_hash = ANY($1::text[])', [hashes]);
}

/** Requests made with keys, and how many of them were denied, by key and UTC day (YYYY-MM-DD). */
export interface KeyDayCount {
  keyId: number;
  day: string;
  requests: number;
  denied: number;
}

/**
 * Adds the counts to api_key_usage in one statement (see ApiKeyUsage): additive, so instances
 * flushing the same key and day sum up. Counts of a key deleted meanwhile are dropped (as migration
 * 024 drops a deleted key's rows); rows are written in key and day order, so that two instances'
 * flushes lock them in the same order.
 */
export async function addKeyCounts(db: Queryable, counts: readonly KeyDayCount[]): Promise<void> {
  if (counts.length === 0) return;
  await db.query(
    `INSERT INTO api_key_usage AS u (key_id, day, requests, denied)
     SELECT c.key_id, c.day, sum(c.requests), sum(c.denied)
       FROM unnest($1::bigint[], $2::date[], $3::bigint[], $4::bigint[]) AS c (key_id, day, requests, denied)
      WHERE EXISTS (SELECT 1 FROM api_tokens t WHERE t.id = c.key_id)
      GROUP BY c.key_id, c.day ORDER BY c.key_id, c.day
     ON CONFLICT (key_id, day) DO UPDATE SET requests = u.requests + excluded.requests, denied = u.denied + excluded.denied`,
    [counts.map((c) => c.keyId), counts.map((c) => c.day), counts.map((c) => c.requests), counts.map((c) => c.denied)],
  );
}

/**
 * The counts of one of the user's personal keys (revoked or rolled ones too) between two UTC days,
 * both included; undefined when the user holds no personal key with this id. Not an organization
 * key its user created (CONTRACT §33): that one's usage is its organization's business, and was
 * readable here by its creator, even after leaving, until issue 68.
 */
export async function keyUsageDays(db: Queryable, userId: number, id: number, from: string, to: string): Promise<Omit<KeyDayCount, 'keyId'>[] | undefined> {
  const rows = await db.query<{ day: string | null; requests: string | number | null; denied: string | number | null }>(
    `SELECT to_char(u.day, 'YYYY-MM-DD') AS day, u.requests, u.denied
       FROM api_tokens t LEFT JOIN api_key_usage u ON u.key_id = t.id AND u.day BETWEEN $3::date AND $4::date
      WHERE t.id = $1 AND t.user_id = $2 AND t.org_id IS NULL`,
    [id, userId, from, to]);
  if (rows.length === 0) return undefined;
  return rows.filter((r) => r.day !== null).map((r) => ({ day: r.day!, requests: Number(r.requests), denied: Number(r.denied) }));
}
