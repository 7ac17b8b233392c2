// Access and refresh tokens (jose). Each kind carries its own `typ` header and every verifier
// demands it, so a refresh token never passes as an access token or the other way round.
// The algorithm list is pinned to the configured one: no `alg: none`, no HS/RS confusion.
import { randomUUID } from 'node:crypto';
import { compactVerify, decodeProtectedHeader, jwtVerify, SignJWT, type JWK, type JWTPayload } from 'jose';
import { LRUCache } from 'lru-cache';
import type { Config, Plan } from '../config/schema.js';
import type { Queryable } from '../storage/database/index.js';
import { parseUserId, type User } from '../storage/accounts/index.js';
import { TokenKeyring } from './tokenKeyring.js';
import { buildKeySet, type SignKey, type TokenKeySet } from './tokenKeys.js';

export { SigningKeyError } from './tokenKeys.js';

export const ACCESS_TYP = 'at+jwt';
export const REFRESH_TYP = 'refresh+jwt';

export interface AccessClaims {
  userId: number;
  plan: Plan;
  email: string;
  exp: number;
  /** The session (refresh-token family) the token was issued in; undefined for tokens from before sessions. */
  sessionId: number | undefined;
  /** CONTRACT §14: `aal2` after a second factor or a passkey; tokens from before it count as `aal1`. */
  acr: Acr;
  /** When the sign-in that started the session happened (seconds); 0 for tokens without it. */
  authTime: number;
  /**
   * The user's credential generation it was minted under (`gen`, CONTRACT §33): refused once the
   * user's is greater. 0 for tokens from before it, which pass until the user's first change.
   */
  generation: number;
}

export type Acr = 'aal1' | 'aal2';

/** How a session's sign-in was made (RFC 8176 `amr` values, plus `email` and `fed`), and when. */
export interface Assurance {
  amr: string[];
  authTime: Date;
}

/** A password + TOTP or recovery code (`mfa`) or a passkey (`hwk`) sign-in is a second-factor one. */
export function acrOf(amr: readonly string[]): Acr {
  return amr.includes('mfa') || amr.includes('hwk') ? 'aal2' : 'aal1';
}

/** Whom a pair is issued to: the user's row, read in the transaction that issues the pair. */
export type PairHolder = Pick<User, 'id' | 'email' | 'plan' | 'credential_generation'>;

export interface TokenPair {
  access_token: string;
  refresh_token: string;
  token_type: 'Bearer';
  plan: Plan;
}

export interface Tokens {
  /** Signs a new pair in a session; the caller stores the refresh token's hash (refreshExpiresAt). */
  issuePair(user: PairHolder, sessionId: number, assurance: Assurance): Promise<{ pair: TokenPair; refreshExpiresAt: Date }>;
  /** The access token's claims, or null when it is not a valid access token now. */
  /** Synchronous for a token already verified (the cache below): the bearer hot path pays no promise. */
  verifyAccess(token: string): AccessClaims | null | Promise<AccessClaims | null>;
  /**
   * Whether verifyAccess has this exact text cached from an earlier call (maybe expired since).
   * Callers pass only what the bearer pattern read (authenticate.ts): a cached token has that syntax.
   */
  isVerified(token: string): boolean;
  /** The refresh token's user id, or null when it does not decode, is expired or is not a refresh token. */
  verifyRefresh(token: string): Promise<number | null>;
  /**
   * Whether the gateway signed this token, whatever its kind and even expired, also with other
   * characters glued after it: such a token is a credential of the gateway's own and never goes to
   * an upstream (CONTRACT §3).
   */
  isOwn(token: string): Promise<boolean>;
  /** The access-token public keys for /.well-known/jwks.json, current and previous (asymmetric algorithms only). */
  readonly publicJwks: JWK[];
  /** The key set and what changes it (a SIGHUP, a rotation of the database-kept secret). */
  readonly keyring: TokenKeyring;
}

const VERIFIED_CACHE_SIZE = 50_000;

/**
 * The tokens of one instance. `keyring`: the instance's, which follows rotations (instance.ts);
 * without one, the keys are loaded once from `auth.jwt` and the database.
 */
export async function createTokens(
  auth: Config['auth'],
  db: Queryable,
  clock: () => Date,
  warn: (message: string) => void,
  keyring?: TokenKeyring,
): Promise<Tokens> {
  const ring = keyring ?? new TokenKeyring({ jwt: auth.jwt, refreshTokenTtlMs: auth.refreshTokenTtl, db, warn });
  if (!keyring) await ring.start();
  return new JwtTokens(auth, clock, ring);
}

class JwtTokens implements Tokens {
  private readonly algorithms: string[];
  private readonly claimChecks: { issuer?: string; audience?: string; algorithms: string[] };
  // Verification goes through WebCrypto on the threadpool; a bounded cache of tokens already
  // verified keeps it off the hot path. An entry is used only while its `exp` is in the future,
  // and only under the key set that verified it: a key removed from auth.jwt.previous ends its
  // sessions at once, cached or not.
  private readonly verified = new LRUCache<string, AccessClaims>({ max: VERIFIED_CACHE_SIZE });
  private cachedUnder: TokenKeySet;

  constructor(
    private readonly auth: Config['auth'],
    private readonly clock: () => Date,
    readonly keyring: TokenKeyring,
  ) {
    this.algorithms = [auth.jwt.algorithm];
    this.claimChecks = { issuer: auth.jwt.issuer, audience: auth.jwt.audience, algorithms: this.algorithms };
    this.cachedUnder = keyring.current;
  }

  get publicJwks(): JWK[] {
    return this.keyring.current.publicJwks;
  }

  async issuePair(user: PairHolder, sessionId: number, assurance: Assurance): Promise<{ pair: TokenPair; refreshExpiresAt: Date }> {
    const authTime = Math.floor(assurance.authTime.getTime() / 1000);
    // Both of a pair under one key, whatever a rotation does meanwhile, and issued at one instant
    // (read once: a second that ends between two readings gave the pair two `iat`s).
    const key = this.keyring.current.current;
    const now = this.clock().getTime();
    const iat = Math.floor(now / 1000);
    const [access, refresh] = await Promise.all([
      // `sid`: which of the user's sessions this is (GET /api/v1/user/sessions marks it `current`);
      // `gen`: the credential generation it is minted under (CONTRACT §33).
      this.sign(
        { plan: user.plan, email: user.email, sid: sessionId, auth_time: authTime, acr: acrOf(assurance.amr), amr: assurance.amr, gen: user.credential_generation },
        ACCESS_TYP, iat, this.auth.accessTokenTtl, user.id, key,
      ),
      this.sign({}, REFRESH_TYP, iat, this.auth.refreshTokenTtl, user.id, key),
    ]);
    return {
      pair: { access_token: access, refresh_token: refresh, token_type: 'Bearer', plan: user.plan },
      refreshExpiresAt: new Date(now + this.auth.refreshTokenTtl),
    };
  }

  verifyAccess(token: string): AccessClaims | null | Promise<AccessClaims | null> {
    this.keys();
    const cached = this.verified.get(token);
    if (cached) return cached.exp > this.seconds() ? cached : null;
    return this.verifyUncached(token);
  }

  isVerified(token: string): boolean {
    this.keys();
    return this.verified.has(token);
  }

  private async verifyUncached(token: string): Promise<AccessClaims | null> {
    const payload = await this.verify(token, ACCESS_TYP);
    if (!payload || typeof payload.plan !== 'string' || typeof payload.email !== 'string') return null;
    // Number.isSafeInteger is false for anything but a number.
    const sessionId = Number.isSafeInteger(payload.sid) ? (payload.sid as number) : undefined;
    const acr: Acr = payload.acr === 'aal2' ? 'aal2' : 'aal1';
    const authTime = typeof payload.auth_time === 'number' ? payload.auth_time : 0;
    // No `gen`: signed before generations existed (a rolling upgrade's previous release), 0.
    const generation = payload.gen === undefined ? 0 : payload.gen;
    if (!Number.isSafeInteger(generation) || (generation as number) < 0) return null;
    const claims: AccessClaims = {
      userId: Number(payload.sub), plan: payload.plan as Plan, email: payload.email, exp: payload.exp!, sessionId, acr, authTime, generation: generation as number,
    };
    this.verified.set(token, claims);
    return claims;
  }

  async isOwn(text: string): Promise<boolean> {
    const set = this.keys();
    if (this.verified.has(text)) return true;
    let header;
    try {
      header = decodeProtectedHeader(text);
    } catch {
      return false;
    }
    // Every token the gateway signs says its kind in `typ`: anything else is not worth a
    // signature check (a header full of other services' JWTs costs a decode each, no more).
    if (header.typ !== ACCESS_TYP && header.typ !== REFRESH_TYP) return false;
    for (const key of set.candidates(header.kid)) {
      // `<token>X`: a token of ours all the same, which an upstream could take back out.
      const excess = text.length - text.lastIndexOf('.') - 1 - key.signatureLength;
      try {
        await compactVerify(excess > 0 ? text.slice(0, -excess) : text, key.verify, { algorithms: this.algorithms });
        return true;
      } catch {
        // another key's, or nobody's
      }
    }
    return false;
  }

  async verifyRefresh(token: string): Promise<number | null> {
    const payload = await this.verify(token, REFRESH_TYP);
    return payload ? Number(payload.sub) : null;
  }

  private seconds(): number {
    return Math.floor(this.clock().getTime() / 1000);
  }

  /** The current key set; a change of it empties the cache of verified tokens. */
  private keys(): TokenKeySet {
    const current = this.keyring.current;
    if (current !== this.cachedUnder) {
      this.verified.clear();
      this.cachedUnder = current;
    }
    return current;
  }

  private sign(claims: JWTPayload, typ: string, iat: number, ttlMs: number, subject: number, key: SignKey): Promise<string> {
    const jwt = new SignJWT(claims)
      .setProtectedHeader({ alg: this.auth.jwt.algorithm, typ, kid: key.kid })
      .setSubject(String(subject))
      .setIssuedAt(iat)
      .setExpirationTime(iat + Math.floor(ttlMs / 1000))
      .setJti(randomUUID());
    if (this.auth.jwt.issuer) jwt.setIssuer(this.auth.jwt.issuer);
    if (this.auth.jwt.audience) jwt.setAudience(this.auth.jwt.audience);
    return jwt.sign(key.sign);
  }

  private async verify(token: string, typ: string): Promise<JWTPayload | null> {
    // One spelling per token: a refresh token is known by the hash of its text (reuse detection),
    // which `<token>=` or a last character differing in its unused bits would evade, though both
    // decode to the same bytes and verify.
    if (!isCanonical(token)) return null;
    try {
      // The key its `kid` names; a token without one (signed before kids) may be any key's.
      for (const key of this.keys().candidates(decodeProtectedHeader(token).kid)) {
        const payload = await this.verifyWith(token, key.verify, typ);
        if (payload) return payload;
      }
    } catch {
      // not a JWS at all
    }
    return null;
  }

  private async verifyWith(token: string, key: SignKey['verify'], typ: string): Promise<JWTPayload | null> {
    try {
      const { payload } = await jwtVerify(token, key, { ...this.claimChecks, typ, currentDate: this.clock(), requiredClaims: ['sub', 'exp', 'iat', 'jti'] });
      // A `sub` past users.id's range names nobody: refused here, not left to fail the query.
      return parseUserId(payload.sub) === undefined ? null : payload;
    } catch {
      return null;
    }
  }
}

/** The key pair in auth.jwt.privateKeyFile (asymmetric algorithms); throws SigningKeyError. */
export async function loadKeyFile(jwt: Config['auth']['jwt']): Promise<SignKey> {
  return buildKeySet({ ...jwt, previous: [] }, undefined).current;
}

/** Each part is base64url as an encoder writes it: no padding, no unused bits set (jwtVerify refuses what has not three). */
function isCanonical(token: string): boolean {
  return token.split('.').every((part) => Buffer.from(part, 'base64url').toString('base64url') === part);
}
