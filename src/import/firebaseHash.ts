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

// Standard base64, its padding optional: never a length of 1 modulo 4, never padding without data.
const STANDARD_B64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}(?:==)?|[A-Za-z0-9+/]{3}=?)?$/;

/** `value` trimmed when it is standard base64, padded or not (firebaseScryptHash drops the padding); else undefined. */
export function standardBase64(value: string): string | undefined {
  const v = value.trim();
  return STANDARD_B64.test(v) ? v : undefined;
}

/**
 * One user's Firebase hash in the one string the login side parses:
 * `$firebase-scrypt$rounds=R,mem=M,sep=<separator>,key=<signer key>$<salt>$<hash>`, each part
 * standard base64 without padding. undefined when the salt or hash is not base64.
 */
export function firebaseHash(config: FirebaseHashConfig, salt: string, hash: string): string | undefined {
  const [s, h, sep, key] = [standardBase64(salt), standardBase64(hash), standardBase64(config.saltSeparator), standardBase64(config.hashKey)];
  if (s === undefined || !h || sep === undefined || !key) return undefined;
  return firebaseScryptHash({ rounds: config.rounds, memCost: config.memCost, saltSeparator: sep, signerKey: key, salt: s, hash: h });
}
