// Authentication guard (spec §5): the bearer access token first, then X-API-Key.
// "Not mine" is not "denied": a missing or invalid bearer passes to the key check, and only when
// no method claims the request is it a 401.
import type { IncomingHttpHeaders } from 'node:http';
import { bearerChallenge, type Denial } from '../../errors/index.js';
import { headerValue } from '../../http.js';
import { sha256Hex } from '../../credentials/digest.js';
import { isForgedKey } from '../../keys/index.js';
import type { AccessClaims, Acr, Tokens } from '../../credentials/tokens.js';
import type { User } from '../../storage/accounts/index.js';
import type { OrgRole } from '../../storage/orgs/index.js';
import type { IdentityCache } from '../../storage/feed/index.js';
import { untraced, type StoreCalls } from '../../telemetry/storeCalls.js';

export type AuthMethod = 'bearer' | 'api-key';

/** Who a request is: the user and how it proved it. */
export interface Identity {
  user: User;
  method: AuthMethod;
  /** A bearer token's session (its `sid`): the one GET /api/v1/user/sessions marks `current`. */
  sessionId?: number;
  /** A bearer token's assurance (CONTRACT §14): `aal2` after a second factor; API keys have none. */
  acr?: Acr;
  /** A bearer token's `auth_time` (seconds). */
  authTime?: number;
  /** An API key's id (CONTRACT §21). */
  keyId?: number;
  /** An API key's scopes; null: its owner's every right. */
  scopes?: string[] | null;
  /** An organization key's organization and role (CONTRACT §22); `user` is its creator. */
  orgKey?: { orgId: number; role: OrgRole };
}

export type AuthResult =
  // keyHash: the API key's, for what must follow its revocation (open WebSockets: proxy/openSockets.ts)
  | ({ kind: 'authenticated'; keyHash?: string } & Identity)
  | { kind: 'anonymous' } // no credential of ours at all
  // keyId: a key that was found but is refused itself (expired, its owner deactivated): its use is counted
  | { kind: 'denied'; denial: Denial; keyId?: number };

export interface AuthDeps {
  tokens: Tokens;
  identities: Pick<IdentityCache, 'key' | 'activeUser' | 'user'>;
  clock: () => Date;
  /** apiKeys.prefix: a value of its key shape (or the default's) with a wrong checksum is refused unread. */
  keyPrefix?: string;
}

const BEARER = /^Bearer[ \t]+([A-Za-z0-9\-_.~+/]+=*)[ \t]*$/i;
const BEARER_SCHEME = /^Bearer(?:[ \t]|$)/i;
const INVALID_TOKEN = bearerChallenge(true);
/** The form every client library sends: the only one the known-token lookup reads. */
const PLAIN_BEARER = 'Bearer ';

/**
 * The Authorization header's bearer token. One `known` names (a token verified before, which its
 * pattern read then) is found in the common form `Bearer <token>` by a lookup: the pattern over a
 * whole JWT was the bearer path's largest step (about 5,000 instructions a request, issue 48).
 */
export function bearerToken(headers: IncomingHttpHeaders, known?: Pick<Tokens, 'isVerified'>): string | undefined {
  const value = headerValue(headers, 'authorization');
  if (known && value.startsWith(PLAIN_BEARER)) {
    const token = value.slice(PLAIN_BEARER.length);
    if (known.isVerified(token)) return token;
  }
  return BEARER.exec(value)?.[1];
}

/**
 * `token`: the bearer token when the caller has already read it from the headers; `calls`: how its
 * lookups are traced. Synchronous when what it needs is in memory (a token verified before, its
 * user cached): the bearer hot path pays no promise and no tick; a promise when it must wait.
 */
export function authenticate(headers: IncomingHttpHeaders, deps: AuthDeps, token = bearerToken(headers), calls: StoreCalls = untraced): AuthResult | Promise<AuthResult> {
  if (token) {
    const claims = deps.tokens.verifyAccess(token);
    if (claims instanceof Promise) return claims.then((c) => (c ? bearerIdentity(c, deps, calls) : byKeyOrNone(headers, deps, token, calls)));
    if (claims) return bearerIdentity(claims, deps, calls);
  }
  return byKeyOrNone(headers, deps, token, calls);
}

/** The user a valid access token names, or why it is refused. */
function bearerIdentity(claims: AccessClaims, deps: AuthDeps, calls: StoreCalls): AuthResult | Promise<AuthResult> {
  const found = deps.identities.user(claims.userId, calls);
  return found instanceof Promise ? found.then((user) => bearerResult(claims, user)) : bearerResult(claims, found);
}

function bearerResult(claims: AccessClaims, user: User | 'gone' | 'inactive'): AuthResult {
  if (typeof user === 'string') return { kind: 'denied', denial: { code: user === 'inactive' ? 'userInactive' : 'userNotFound', headers: INVALID_TOKEN } };
  // Minted before the user's last credential change (CONTRACT §33): the cached row's generation,
  // which the change feed refreshes on every instance, so this costs no query.
  if (claims.generation < user.credential_generation) return credentialInvalid();
  return { kind: 'authenticated', user, method: 'bearer', sessionId: claims.sessionId, acr: claims.acr, authTime: claims.authTime };
}

/** Without a valid access token: the X-API-Key, else anonymous, or denied when a credential of ours failed. */
function byKeyOrNone(headers: IncomingHttpHeaders, deps: AuthDeps, token: string | undefined, calls: StoreCalls): AuthResult | Promise<AuthResult> {
  const key = headerValue(headers, 'x-api-key').trim();
  // A value shaped as a key whose checksum is wrong was never issued: refused before any lookup.
  if (key && !isForgedKey(key, deps.keyPrefix)) return keyIdentity(key, deps, calls);
  return noIdentity(headers, token, key);
}

async function keyIdentity(key: string, deps: AuthDeps, calls: StoreCalls): Promise<AuthResult> {
  const hash = sha256Hex(key);
  const record = await deps.identities.key(hash, calls);
  const live = record && (record.expiresAt === null || record.expiresAt > deps.clock().getTime());
  const user = live ? await deps.identities.activeUser(record.userId, calls) : undefined;
  if (user) {
    const orgKey = record!.orgId === null ? {} : { orgKey: { orgId: record!.orgId, role: record!.role ?? 'member' } };
    return { kind: 'authenticated', user, method: 'api-key', keyHash: hash, keyId: record!.id, scopes: record!.scopes, ...orgKey };
  }
  return credentialInvalid(record?.id);
}

/** 401 for a credential of ours that failed; with the key's id when a key was found, to count it as denied. */
function credentialInvalid(keyId?: number): AuthResult {
  return { kind: 'denied', denial: { code: 'tokenInvalid', headers: INVALID_TOKEN }, keyId };
}

/**
 * A credential of ours that failed is a 401 even where anonymous access is allowed (the client
 * should learn its token expired); another scheme (`Authorization: Basic …`) is not ours at all.
 */
function noIdentity(headers: IncomingHttpHeaders, token: string | undefined, key: string): AuthResult {
  if (token || key || BEARER_SCHEME.test(headerValue(headers, 'authorization'))) return credentialInvalid();
  return { kind: 'anonymous' };
}
