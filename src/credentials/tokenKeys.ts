// The keys of access and refresh tokens (CONTRACT §25): one current key that signs, and the
// previous keys (auth.jwt.previous, and the database-kept key `gateway keys rotate-jwt` rotated
// out) that only verify, so a rotation ends no session. Every token names its key in `kid`; a
// token without one (signed before kids) is tried against every key.
// Built synchronously from the configuration and the stored secrets, so a SIGHUP can check a new
// key set whole before it swaps it in (live/reload.ts).
import { createHash, createPrivateKey, createPublicKey, createSecretKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { CryptoKey, JWK } from 'jose';
import { isInlinePem, keyTypeProblem, signingKeyProblem } from '../config/files.js';
import type { Config } from '../config/schema.js';

export type JwtSettings = Config['auth']['jwt'];
type Algorithm = JwtSettings['algorithm'];

export interface VerifyKey {
  kid: string;
  verify: CryptoKey;
  /** How long its signatures are in a token (base64url): isOwn() cuts a token there when characters are glued to it. */
  signatureLength: number;
  /** The public key for /.well-known/jwks.json (asymmetric algorithms only). */
  publicJwk?: JWK;
}

export interface SignKey extends VerifyKey {
  sign: CryptoKey;
}

/** The secrets the database keeps when auth.jwt.secret is empty (HS256): `gateway keys rotate-jwt` turns them. */
export interface StoredSecrets {
  current: string;
  /** The secret rotated out, while tokens it signed may still be alive. */
  previous?: string;
}

export class TokenKeySet {
  readonly all: readonly VerifyKey[];

  constructor(readonly algorithm: Algorithm, readonly current: SignKey, previous: VerifyKey[]) {
    // A previous key equal to the current one (a YAML edit half done) is the current one.
    const unique = new Map<string, VerifyKey>([[current.kid, current]]);
    for (const key of previous) if (!unique.has(key.kid)) unique.set(key.kid, key);
    this.all = [...unique.values()];
  }

  /** The keys that may have signed a token with this `kid` header: its own, or every key for a token without one. */
  candidates(kid: unknown): readonly VerifyKey[] {
    return kid === undefined ? this.all : this.all.filter((k) => k.kid === kid);
  }

  get publicJwks(): JWK[] {
    return this.all.flatMap((k) => (k.publicJwk ? [k.publicJwk] : []));
  }
}

/**
 * auth.jwt.privateKeyFile cannot sign with the configured algorithm (missing, unreadable, not a
 * PKCS#8 private key, a key of another type): a configuration problem, which the CLI reports so.
 */
export class SigningKeyError extends Error {
  constructor(jwt: JwtSettings, cause: unknown) {
    super(`${jwt.privateKeyFile}: cannot sign ${jwt.algorithm} with it: ${cause instanceof Error ? cause.message : String(cause)}`);
    this.name = 'SigningKeyError';
  }
}

/** An entry of auth.jwt.previous that cannot verify with the configured algorithm. */
export class PreviousKeyError extends Error {
  constructor(index: number, problem: string) {
    super(`auth.jwt.previous[${index}]: ${problem}`);
    this.name = 'PreviousKeyError';
  }
}

/** Whether the key lives in the database (HS256 without auth.jwt.secret) rather than in gateway.yaml. */
export function isDatabaseKept(jwt: JwtSettings): boolean {
  return jwt.algorithm === 'HS256' && !jwt.secret;
}

/** The key set of `jwt`, with the database's secrets when it keeps the key; throws SigningKeyError or PreviousKeyError. */
export function buildKeySet(jwt: JwtSettings, stored: StoredSecrets | undefined): TokenKeySet {
  if (jwt.algorithm === 'HS256') {
    const previous = jwt.previous.map((s) => hmacKey(s));
    if (jwt.secret) return new TokenKeySet(jwt.algorithm, hmacKey(jwt.secret), previous);
    if (!stored?.current) throw new Error('no HS256 secret: neither auth.jwt.secret nor a stored one');
    return new TokenKeySet(jwt.algorithm, hmacKey(stored.current), [...(stored.previous ? [hmacKey(stored.previous)] : []), ...previous]);
  }
  return new TokenKeySet(jwt.algorithm, signingKeyOf(jwt), jwt.previous.map((entry, i) => {
    try {
      return verifyKeyOf(jwt.algorithm, createPublicKey(pemOf(entry)));
    } catch (err) {
      throw new PreviousKeyError(i, err instanceof Error ? err.message : String(err));
    }
  }));
}

/** An inline PEM, or the file holding one (load.ts made it absolute). */
function pemOf(entry: string): string | Buffer {
  return isInlinePem(entry) ? entry : readFileSync(entry);
}

/**
 * The HS256 key of a secret. Its kid is a digest of the secret, which tells nothing a token's MAC
 * does not already: guessing the secret from either takes the same search.
 */
export function hmacKey(secret: string): SignKey {
  const key = createSecretKey(Buffer.from(secret)).toCryptoKey({ name: 'HMAC', hash: 'SHA-256' }, false, ['sign', 'verify']);
  const kid = createHash('sha256').update(`auth-gateway jwt kid\0${secret}`).digest('base64url').slice(0, 22);
  return { kid, sign: key, verify: key, signatureLength: base64urlLength(32) };
}

const WEBCRYPTO: Record<Exclude<Algorithm, 'HS256'>, Parameters<KeyObject['toCryptoKey']>[0]> = {
  EdDSA: { name: 'Ed25519' },
  ES256: { name: 'ECDSA', namedCurve: 'P-256' },
  RS256: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
};

function signingKeyOf(jwt: JwtSettings): SignKey {
  const algorithm = jwt.algorithm as Exclude<Algorithm, 'HS256'>;
  try {
    const pem = String(readFileSync(jwt.privateKeyFile!));
    const problem = signingKeyProblem(pem, algorithm);
    if (problem) throw new Error(problem);
    const privateKey = createPrivateKey(pem);
    return { ...verifyKeyOf(algorithm, createPublicKey(privateKey)), sign: privateKey.toCryptoKey(WEBCRYPTO[algorithm], false, ['sign']) };
  } catch (err) {
    throw new SigningKeyError(jwt, err);
  }
}

function verifyKeyOf(algorithm: Algorithm, publicKey: KeyObject): VerifyKey {
  const problem = keyTypeProblem(publicKey, algorithm);
  if (problem) throw new Error(problem);
  const params = WEBCRYPTO[algorithm as Exclude<Algorithm, 'HS256'>];
  const jwk = publicKey.export({ format: 'jwk' }) as JWK;
  const kid = thumbprint(jwk);
  // Ed25519 and P-256 signatures are 64 bytes; an RSA one is as long as the modulus.
  const bytes = algorithm === 'RS256' ? Math.ceil(publicKey.asymmetricKeyDetails!.modulusLength! / 8) : 64;
  return {
    kid,
    verify: publicKey.toCryptoKey(params, true, ['verify']),
    signatureLength: base64urlLength(bytes),
    publicJwk: { ...jwk, kid, alg: algorithm, use: 'sig' },
  };
}

/**
 * RFC 7638: the SHA-256 of the key's required members, in lexicographic order. An OKP key (Ed25519)
 * has no `y`, and JSON.stringify leaves an undefined member out: EC's list serves both.
 */
export function thumbprint(jwk: JWK): string {
  const members = jwk.kty === 'RSA' ? ['e', 'kty', 'n'] : ['crv', 'kty', 'x', 'y'];
  const json = JSON.stringify(Object.fromEntries(members.map((m) => [m, (jwk as Record<string, unknown>)[m]])));
  return createHash('sha256').update(json).digest('base64url');
}

const base64urlLength = (bytes: number) => Math.ceil((bytes * 4) / 3);
