// The password hash formats an import stores as they are (CONTRACT §27), recognised by shape
// only: the login side (docs/password-hashes.md) verifies them and rehashes to argon2id on the
// first successful sign-in. A hash of no known shape is refused at import, never stored: stored,
// it would lock its owner out without a word.

const B64 = '[A-Za-z0-9+/.]+={0,2}';

const SHAPES: Array<{ name: string; pattern: RegExp }> = [
  // bcrypt: $2a$, $2b$, $2y$, the cost, then 22 characters of salt and 31 of hash.
  { name: 'bcrypt', pattern: /^\$2[aby]\$\d{2}\$[./A-Za-z0-9]{53}$/ },
  // argon2id / argon2i in PHC form: $argon2id$v=19$m=65536,t=3,p=4$salt$hash (v= optional).
  { name: 'argon2', pattern: new RegExp(`^\\$argon2(?:id|i)\\$(?:v=\\d+\\$)?m=\\d+,t=\\d+,p=\\d+\\$${B64}\\$${B64}$`) },
  // scrypt in PHC form: $scrypt$ln=15,r=8,p=1$salt$hash.
  { name: 'scrypt', pattern: new RegExp(`^\\$scrypt\\$ln=\\d+,r=\\d+,p=\\d+\\$${B64}\\$${B64}$`) },
  // PBKDF2-SHA256 in PHC form: $pbkdf2-sha256$i=600000$salt$hash, or passlib's $pbkdf2-sha256$29000$salt$hash.
  { name: 'pbkdf2-sha256', pattern: new RegExp(`^\\$pbkdf2-sha256\\$(?:i=)?\\d+(?:,l=\\d+)?\\$${B64}\\$${B64}$`) },
  // Django: pbkdf2_sha256$<iterations>$<salt>$<base64 hash>.
  { name: 'django-pbkdf2-sha256', pattern: /^pbkdf2_sha256\$\d+\$[^$\s]+\$[A-Za-z0-9+/]+={0,2}$/ },
  // Firebase's modified scrypt, as firebaseHash() writes it.
  { name: 'firebase-scrypt', pattern: /^\$firebase-scrypt\$rounds=\d+,mem=\d+,sep=[A-Za-z0-9+/]*,key=[A-Za-z0-9+/]+\$[A-Za-z0-9+/]*\$[A-Za-z0-9+/]+$/ },
];

/** The format of a stored hash, or undefined when it has no shape the gateway knows. */
export function hashFormat(hash: string): string | undefined {
  return SHAPES.find((s) => s.pattern.test(hash))?.name;
}

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
  return `$firebase-scrypt$rounds=${config.rounds},mem=${config.memCost},sep=${sep},key=${key}$${s}$${h}`;
}
