// Firebase's export keeps each user's salt apart and the project's scrypt parameters in its
// hash_config: the import joins them into the one string the login side parses (CONTRACT §27).
// Which hash formats exist, and which a login checks, is known in one place only:
// auth/password/importedHashes.ts, which rows.ts asks.
import { firebaseScryptHash } from '../auth/index.js';

/** The project's parameters of Firebase's scrypt (`firebase auth:export`'s hash_config). */
export interface FirebaseHashConfig {
  /** base64_signer_key */
  hashKey: string;
  /** base64_salt_separator */
  saltSeparator: string;
  rounds: number;
  memCost: number;
}

const STANDARD_B64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Standard base64 without its `=` padding, or undefined when `value` is not base64. */
export function unpadded(value: string): string | undefined {
  const v = value.trim();
  return STANDARD_B64.test(v) && v.replace(/=+$/, '').length % 4 !== 1 ? v.replace(/=+$/, '') : undefined;
}

/**
 * One user's Firebase hash in the one string the login side parses:
 * `$firebase-scrypt$rounds=R,mem=M,sep=<separator>,key=<signer key>$<salt>$<hash>`, each part
 * standard base64 without padding. undefined when the salt or hash is not base64.
 */
export function firebaseHash(config: FirebaseHashConfig, salt: string, hash: string): string | undefined {
  const [s, h, sep, key] = [unpadded(salt), unpadded(hash), unpadded(config.saltSeparator), unpadded(config.hashKey)];
  if (s === undefined || !h || sep === undefined || !key) return undefined;
  return firebaseScryptHash({ rounds: config.rounds, memCost: config.memCost, saltSeparator: sep, signerKey: key, salt: s, hash: h });
}
