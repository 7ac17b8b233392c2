// Personal API keys (CONTRACT §4): shown once, stored as SHA-256 only, one active key per user.
// Changes take effect at once on this instance (forgetKey) and, through the NOTIFY trigger on
// api_tokens, on every other instance within a second.
import { randomBytes } from 'node:crypto';
import { sha256Hex } from '../auth/tokens.js';
import type { Services } from '../services.js';
import { replaceKey, revokeKeys } from '../storage/apiTokens.js';

export const API_KEY_PREFIX = 'gw_';
const KEY_BYTES = 32; // 256 bits: guessing is hopeless, so a plain (unsalted) hash is enough

export function newApiKey(): string {
  return `${API_KEY_PREFIX}${randomBytes(KEY_BYTES).toString('base64url')}`;
}

/** Creates the user's new key, revoking the earlier one; returns the raw key, never stored. */
export async function createApiKey(services: Services, userId: number): Promise<{ key: string; createdAt: Date }> {
  const key = newApiKey();
  const { createdAt, revokedHashes } = await replaceKey(services.db, userId, sha256Hex(key));
  for (const hash of revokedHashes) services.identities.forgetKey(hash);
  services.events?.emit(userId, 'api_token.created', { created_at: createdAt.toISOString(), revoked_previous: revokedHashes.length });
  return { key, createdAt };
}

/** Revokes every active key of the user; returns how many there were (0: nothing to do). */
export async function revokeApiKeys(services: Services, userId: number): Promise<number> {
  const hashes = await revokeKeys(services.db, userId);
  for (const hash of hashes) services.identities.forgetKey(hash);
  if (hashes.length) services.events?.emit(userId, 'api_token.revoked', { revoked: hashes.length });
  return hashes.length;
}
