// Digests and random secrets, a leaf every room imports: the hashes stored in place of tokens,
// keys and codes (lowercase hex SHA-256, CONTRACT §7), and the random values they are made of.
import { hash, randomBytes, timingSafeEqual } from 'node:crypto';

export function sha256Hex(value: string): string {
  // The one-shot form: about half the cost of createHash().update().digest(), paid on every API-key request.
  return hash('sha256', value, 'hex');
}

/** `bytes` random bytes in base64url: single-use link tokens, API keys. */
export function randomToken(bytes: number): string {
  return randomBytes(bytes).toString('base64url');
}

/**
 * Whether a presented secret is `key` (the admin key, the metrics token). Hashing both sides gives
 * equal lengths: timingSafeEqual compares in constant time, and the key's length does not leak.
 */
export const sameKey = (presented: string, key: string) => key !== '' && timingSafeEqual(hash('sha256', presented, 'buffer'), hash('sha256', key, 'buffer'));
