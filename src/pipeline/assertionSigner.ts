// x-gateway-assertion (CONTRACT §3): a compact JWS proving to an upstream that the identity
// headers came from the gateway. An Ed25519 signature costs about half a millisecond, so an
// assertion is reused for the same key, upstream, user and claims while more than half of its
// life is left: a busy user costs one signature per upstream every ASSERTION_TTL_SEC / 2.
import { SignJWT, type CryptoKey } from 'jose';
import { LRUCache } from 'lru-cache';
import type { AuthMethod } from './guards/authenticate.js';
import type { User } from '../storage/accounts/index.js';
import { isForwardableEmail, type KeyFacts } from './identityHeaders.js';
import type { ActingOrg } from './subject.js';
import { ASSERTION_HEADER, ASSERTION_TYP, DEFAULT_ISSUER } from '../verify/index.js';
import { ASSERTION_ALG } from '../credentials/assertionKeys.js';
import { ASSERTION_TTL_SEC, type AssertionKeyring } from '../credentials/assertionKeyring.js';

// Entries live 30 s at most; this bounds memory (a few hundred bytes each) under a flood of users.
const MAX_CACHED = 20_000;

interface Issued {
  token: string;
  /** ms since epoch */
  issuedAt: number;
  reuseUntil: number;
}

/** What the request pipeline asks of the signer: the header that vouches for an identity. */
export interface Assertions {
  headerFor(user: User, method: AuthMethod, upstreamName: string, key?: KeyFacts, org?: ActingOrg): Promise<Record<string, string>>;
}

/** Who an assertion speaks for. */
interface Signed {
  user: User;
  method: AuthMethod;
  key: KeyFacts | undefined;
  org: ActingOrg | undefined;
}

export class AssertionSigner implements Assertions {
  private readonly issued = new LRUCache<string, Issued>({ max: MAX_CACHED });
  // A burst of requests from one user right after expiry waits on one signature, not one each.
  private readonly pending = new Map<string, Promise<Issued>>();
  private readonly issuer: string;

  constructor(private readonly keyring: AssertionKeyring, private readonly clock: () => Date, issuer: string | undefined) {
    this.issuer = issuer ?? DEFAULT_ISSUER;
  }

  async headerFor(user: User, method: AuthMethod, upstreamName: string, key?: KeyFacts, org?: ActingOrg): Promise<Record<string, string>> {
    return { [ASSERTION_HEADER]: await this.assertionFor(user, method, upstreamName, key, org) };
  }

  async assertionFor(user: User, method: AuthMethod, audience: string, key?: KeyFacts, org?: ActingOrg): Promise<string> {
    const signing = this.keyring.current;
    // Everything the assertion says is in the key: a plan or email change, or a rotation, gets a new
    // one; so does another API key, or the same key's scopes (JSON tells null from [] and "a,b" from ["a","b"]).
    const keyPart = key ? `${key.id}\0${JSON.stringify(key.scopes)}` : '';
    const orgPart = org ? `${org.id}\0${org.role}\0${org.plan}` : '';
    const cacheKey = `${signing.kid}\0${audience}\0${user.id}\0${user.plan}\0${user.email}\0${method}\0${keyPart}\0${orgPart}`;
    const now = this.clock().getTime();
    const cached = this.issued.get(cacheKey);
    // `now >= issuedAt`: a clock set back must not reuse an assertion "from the future".
    if (cached && now >= cached.issuedAt && now < cached.reuseUntil) return cached.token;
    let pending = this.pending.get(cacheKey);
    if (!pending) {
      pending = this.sign(signing.kid, signing.key, { user, method, key, org }, audience, now).finally(() => this.pending.delete(cacheKey));
      this.pending.set(cacheKey, pending);
    }
    const issued = await pending;
    this.issued.set(cacheKey, issued);
    return issued.token;
  }

  private async sign(kid: string, signingKey: CryptoKey, who: Signed, audience: string, now: number): Promise<Issued> {
    const iat = Math.floor(now / 1000);
    const { user, method, key, org } = who;
    const claims = {
      plan: user.plan,
      // An address stored before the one-mailbox rule is left out rather than handed on (identityHeaders.ts).
      ...(isForwardableEmail(user.email) ? { email: user.email } : {}),
      auth_method: method,
      // An API key's request only (CONTRACT §21): which key, a decimal string like `sub`, and what it
      // may do (null: its owner's every right). A bearer sign-in has no key: the claims are absent.
      ...(key ? { key_id: String(key.id), scopes: key.scopes } : {}),
      // Acting for an organization (CONTRACT §22): `plan` above stays the user's own.
      ...(org ? { org: { id: String(org.id), role: org.role, plan: org.plan } } : {}),
    };
    const token = await new SignJWT(claims)
      .setProtectedHeader({ alg: ASSERTION_ALG, typ: ASSERTION_TYP, kid })
      .setIssuer(this.issuer)
      .setAudience(audience)
      .setSubject(String(user.id))
      .setIssuedAt(iat)
      .setExpirationTime(iat + ASSERTION_TTL_SEC)
      .sign(signingKey);
    return { token, issuedAt: iat * 1000, reuseUntil: (iat + ASSERTION_TTL_SEC / 2) * 1000 };
  }
}
