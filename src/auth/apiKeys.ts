// Personal API keys (CONTRACT §4): shown once, stored as SHA-256 only, one active key per user.
// Changes take effect at once on this instance (forgetKey) and, through the NOTIFY trigger on
// api_tokens, on every other instance within a second.
import { sha256Hex } from '../credentials/digest.js';
import { newApiKey } from '../credentials/shapes.js';
import type { IdentityCache } from '../storage/identityCache.js';
import type { Database } from '../storage/db.js';
import type { Audit, AuditEvent } from '../audit.js';
import type { Events } from '../webhooks/emitter.js';
import { replaceKey, revokeKeys } from '../storage/apiKeys.js';

/** Creates the user's new key, revoking the earlier one; returns the raw key, never stored. */
export interface ApiKeyDeps {
  db: Database;
  identities: Pick<IdentityCache, 'forgetKey'>;
  events: Events;
  audit: Audit;
}

/** Who asks, for the audit log. */
type Requester = Pick<AuditEvent, 'actor' | 'ip' | 'userAgent'>;

export async function createApiKey(deps: ApiKeyDeps, userId: number, by: Requester): Promise<{ key: string; createdAt: Date }> {
  const key = newApiKey();
  // The event commits with the key: a key is never created without its api_token.created stored.
  const { createdAt, revokedHashes } = await deps.db.transaction(async (tx) => {
    const replaced = await replaceKey(tx, userId, sha256Hex(key));
    await deps.events.emit(userId, 'api_token.created', { created_at: replaced.createdAt.toISOString(), revoked_previous: replaced.revokedHashes.length }, tx);
    await deps.audit.record({ type: 'api_key.created', ...by, userId, data: { revoked_previous: replaced.revokedHashes.length } }, tx);
    return replaced;
  });
  for (const hash of revokedHashes) deps.identities.forgetKey(hash);
  return { key, createdAt };
}

/** Revokes every active key of the user; returns how many there were (0: nothing to do). */
export async function revokeApiKeys(deps: ApiKeyDeps, userId: number, by: Requester): Promise<number> {
  const hashes = await deps.db.transaction(async (tx) => {
    const revoked = await revokeKeys(tx, userId);
    if (revoked.length) {
      await deps.events.emit(userId, 'api_token.revoked', { revoked: revoked.length }, tx);
      await deps.audit.record({ type: 'api_key.revoked', ...by, userId, data: { revoked: revoked.length } }, tx);
    }
    return revoked;
  });
  for (const hash of hashes) deps.identities.forgetKey(hash);
  return hashes.length;
}
