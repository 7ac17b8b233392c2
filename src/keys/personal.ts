// Personal API keys (CONTRACT §4, §21): shown once, stored as SHA-256 only. The section 4 endpoints
// keep one `default` key per user; the named keys of /api/v1/user/api-keys sit beside it. Operators
// revoke any key by its id, or the live ones among keys found in the open.
// Changes take effect at once on this instance (forgetKey) and, through the NOTIFY trigger on
// api_tokens, on every other instance within a second.
import { sha256Hex } from '../credentials/digest.js';
import type { Config } from '../config/schema.js';
import { newApiKey } from './format.js';
import { graceOf, keyRequest, type KeyOutcome, type NamedKeyRequest } from './rules.js';
import type { IdentityCache } from '../storage/feed/index.js';
import type { Database, Queryable } from '../storage/database/index.js';
import type { Audit, AuditEvent } from '../audit.js';
import type { Events } from '../webhooks/emitter.js';
import {
  createKeyWithin, replaceKey, revokeKeyById, revokeKeys, revokeKeysByHash, revokeOwnKey, rollKeyWithin, type OwnKey, type RevokedKey,
} from '../storage/keys/index.js';

/** What every key action needs: the database, this instance's key cache, the webhook events and the audit log. */
export interface ApiKeyDeps {
  db: Database;
  identities: Pick<IdentityCache, 'forgetKey'>;
  events: Events;
  audit: Audit;
}

/** What creating a key needs besides: the configured prefix of new keys (CONTRACT §21). */
type CreatingDeps = ApiKeyDeps & { apiKeys: { prefix: string } };

/** Who asks, for the audit log. */
export type Requester = Pick<AuditEvent, 'actor' | 'actorId' | 'operatorEmail' | 'ip' | 'userAgent'>;

/** Creates the user's new key, revoking the earlier one; returns the raw key, never stored. */
export async function createApiKey(deps: CreatingDeps, userId: number, by: Requester): Promise<{ key: string; createdAt: Date }> {
  const { key, start } = newApiKey(deps.apiKeys.prefix);
  // The event commits with the key: a key is never created without its api_token.created stored.
  const { createdAt, revoked } = await deps.db.transaction(async (tx) => {
    const replaced = await replaceKey(tx, userId, sha256Hex(key), start);
    await deps.events.emit(userId, 'api_token.created', { created_at: replaced.createdAt.toISOString(), revoked_previous: replaced.revoked.length }, tx);
    // The earlier key ends here: recorded as its revocation (one event per key, its id: §24's api_key.revoked).
    await revokedEach(deps, tx, replaced.revoked, by, 'replaced');
    await deps.audit.record({ type: 'api_key.created', ...by, userId, data: { id: replaced.id, revoked_previous: replaced.revoked.length } }, tx);
    return replaced;
  });
  for (const { hash } of revoked) deps.identities.forgetKey(hash);
  return { key, createdAt };
}

/** Revokes every active key of the user; returns how many there were (0: nothing to do). */
export async function revokeApiKeys(deps: ApiKeyDeps, userId: number, by: Requester): Promise<number> {
  const revoked = await deps.db.transaction(async (tx) => {
    const keys = await revokeKeys(tx, userId);
    if (keys.length) {
      await deps.events.emit(userId, 'api_token.revoked', { revoked: keys.length }, tx);
      await revokedEach(deps, tx, keys, by);
    }
    return keys;
  });
  for (const { hash } of revoked) deps.identities.forgetKey(hash);
  return revoked.length;
}

/** The audit event of each key revoked at once (and so its api_key.revoked hook, §24: one per key, with its id). */
async function revokedEach(deps: ApiKeyDeps, tx: Queryable, keys: readonly RevokedKey[], by: Requester, reason?: 'replaced' | 'leaked'): Promise<void> {
  for (const key of keys) await deps.audit.record({ type: 'api_key.revoked', ...by, userId: key.userId, data: { id: key.id, ...(reason ? { reason } : {}) } }, tx);
}

/** A named key (CONTRACT §21), unless the user holds `max` already (null); the raw key is in the answer only. */
export async function createNamedKey(
  deps: CreatingDeps, userId: number, wanted: NamedKeyRequest, limits: { max: number; now: Date }, by: Requester,
): Promise<(OwnKey & { key: string }) | null> {
  const { key, start } = newApiKey(deps.apiKeys.prefix);
  return deps.db.transaction(async (tx) => {
    const created = await createKeyWithin(tx, userId, { hash: sha256Hex(key), start, ...wanted }, limits.max, limits.now);
    if (!created) return null;
    await deps.events.emit(userId, 'api_token.created', { id: created.id, name: created.name, created_at: created.created_at.toISOString(), revoked_previous: 0 }, tx);
    await deps.audit.record({ type: 'api_key.created', ...by, userId, data: { id: created.id, name: created.name, scopes: created.scopes } }, tx);
    return { ...created, key };
  });
}

/** What a request for a named key weighs besides its body: when, and the scopes the routes declare now (a reload may add some). */
export interface KeyContext {
  now: Date;
  knownScopes: ReadonlySet<string>;
}

/** A named key from a request's body (the rules of keys/rules.ts, then apiKeys.maxPerOwner); the raw key is in the answer only. */
export async function requestNamedKey(
  deps: ApiKeyDeps & { apiKeys: Pick<Config['apiKeys'], 'prefix' | 'maxPerOwner'> }, userId: number, body: unknown, context: KeyContext, by: Requester,
): Promise<KeyOutcome<OwnKey & { key: string }>> {
  const wanted = keyRequest(body, context.now, context.knownScopes);
  if ('error' in wanted) return { denied: { code: wanted.error } };
  const created = await createNamedKey(deps, userId, wanted.ok, { max: deps.apiKeys.maxPerOwner, now: context.now }, by);
  return created ? { ok: created } : { denied: { code: 'apiKeyLimitReached' } };
}

/** Revokes one of the user's keys; false when it is not theirs, or revoked already. */
export async function revokeNamedKey(deps: ApiKeyDeps, userId: number, id: number, by: Requester): Promise<boolean> {
  const hash = await deps.db.transaction(async (tx) => {
    const revoked = await revokeOwnKey(tx, userId, id);
    if (revoked) {
      await deps.events.emit(userId, 'api_token.revoked', { revoked: 1, id }, tx);
      await deps.audit.record({ type: 'api_key.revoked', ...by, userId, data: { id } }, tx);
    }
    return revoked;
  });
  if (hash) deps.identities.forgetKey(hash);
  return hash !== undefined;
}

/**
 * Rolls one of the user's keys (CONTRACT §21): a new key with the same name, scopes and expiry; the
 * old one stops at the earlier of its expiry and now + `graceMs`. undefined when the key is not
 * theirs, or is revoked, rolled or expired already. The old key's change is heard by every
 * instance (its expires_at is announced, migration 024), and here at once.
 */
export async function rollNamedKey(
  deps: CreatingDeps, userId: number, id: number, graceMs: number, now: Date, by: Requester,
): Promise<(OwnKey & { key: string }) | undefined> {
  const { key, start } = newApiKey(deps.apiKeys.prefix);
  const rolled = await deps.db.transaction(async (tx) => {
    const done = await rollKeyWithin(tx, userId, id, { hash: sha256Hex(key), start }, new Date(now.getTime() + graceMs), now);
    if (!done) return undefined;
    const { created, old } = done;
    const expiresAt = old.expiresAt.toISOString();
    const { name, scopes } = created;
    await deps.events.emit(userId, 'api_token.created', { id: created.id, name, created_at: created.created_at.toISOString(), revoked_previous: 0 }, tx);
    await deps.events.emit(userId, 'api_token.revoked', { revoked: 1, id, reason: 'rolled', expires_at: expiresAt }, tx);
    await deps.audit.record({ type: 'api_key.created', ...by, userId, data: { id: created.id, name, scopes, rolled_from: id } }, tx);
    // A roll ends the old key (at once, or after its grace): recorded as its revocation, with when.
    await deps.audit.record({ type: 'api_key.revoked', ...by, userId, data: { id, reason: 'rolled', replaced_by: created.id, expires_at: expiresAt } }, tx);
    return done;
  });
  if (!rolled) return undefined;
  deps.identities.forgetKey(rolled.old.hash);
  return { ...rolled.created, key };
}

/** A roll as a request asks it: the grace of its body (badRequest unless 0s to 7d), then the key `id` (apiKeyNotFound when not the user's to roll). */
export async function requestRoll(
  deps: CreatingDeps, userId: number, id: number | undefined, body: unknown, now: Date, by: Requester,
): Promise<KeyOutcome<OwnKey & { key: string; graceMs: number }>> {
  const graceMs = graceOf(body);
  if (graceMs === undefined) return { denied: { code: 'badRequest' } };
  const rolled = id === undefined ? undefined : await rollNamedKey(deps, userId, id, graceMs, now, by);
  return rolled ? { ok: { ...rolled, graceMs } } : { denied: { code: 'apiKeyNotFound' } };
}

/** The events of keys an operator revoked, in the transaction that revoked them. */
async function revokedByOperator(deps: ApiKeyDeps, tx: Queryable, keys: RevokedKey[], by: Requester, reason?: 'leaked'): Promise<void> {
  for (const key of keys) await deps.events.emit(key.userId, 'api_token.revoked', { revoked: 1, id: key.id }, tx);
  await revokedEach(deps, tx, keys, by, reason);
}

/** An operator revokes one key by its id (admin API, `gateway keys revoke`); undefined when no such key is active. */
export async function revokeKeyAsOperator(deps: ApiKeyDeps, id: number, by: Requester): Promise<RevokedKey | undefined> {
  const revoked = await deps.db.transaction(async (tx) => {
    const key = await revokeKeyById(tx, id);
    if (key) await revokedByOperator(deps, tx, [key], by);
    return key;
  });
  if (revoked) deps.identities.forgetKey(revoked.hash);
  return revoked;
}

/**
 * `gateway keys revoke ID` without a running gateway: one key, whoever holds it, revoked in one
 * transaction with what `record` writes (the CLI's audit row and its hooks). Running instances drop
 * it within a second (the api_tokens trigger's NOTIFY). undefined when no such key is active.
 */
export async function revokeKeyByCommand(db: Database, id: number, record: (tx: Queryable, key: RevokedKey) => Promise<void>): Promise<RevokedKey | undefined> {
  return db.transaction(async (tx) => {
    const key = await revokeKeyById(tx, id);
    if (key) await record(tx, key);
    return key;
  });
}

/** Keys found in the open (a scanner's report): those that are live are revoked; the ids revoked. */
export async function revokeLeakedKeys(deps: ApiKeyDeps, rawKeys: string[], by: Requester): Promise<number[]> {
  const revoked = await deps.db.transaction(async (tx) => {
    const keys = await revokeKeysByHash(tx, [...new Set(rawKeys.map((k) => sha256Hex(k.trim())))]);
    await revokedByOperator(deps, tx, keys, by, 'leaked');
    return keys;
  });
  for (const key of revoked) deps.identities.forgetKey(key.hash);
  return revoked.map((k) => k.id);
}
