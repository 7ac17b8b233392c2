// Authentication guard (spec §5): the bearer access token first, then X-API-Key.
// "Not mine" is not "denied": a missing or invalid bearer passes to the key check, and only when
// no method claims the request is it a 401.
import type { IncomingHttpHeaders } from 'node:http';
import type { Denial } from '../errors.js';
import { headerValue } from '../http.js';
import { sha256Hex, type Tokens } from '../auth/tokens.js';
import type { User } from '../storage/users.js';
import type { IdentityCache } from './identityCache.js';
import type { ApiKeyUsage } from './apiKeyUsage.js';

export type AuthMethod = 'bearer' | 'api-key';

export type AuthResult =
  | { kind: 'authenticated'; user: User; method: AuthMethod }
  | { kind: 'anonymous' } // no credential of ours at all
  | { kind: 'denied'; denial: Denial };

export interface AuthDeps {
  tokens: Tokens;
  identities: IdentityCache;
  keyUsage: ApiKeyUsage;
  clock: () => Date;
}

const BEARER = /^Bearer[ \t]+([A-Za-z0-9\-_.~+/]+=*)[ \t]*$/i;
const BEARER_SCHEME = /^Bearer(?:[ \t]|$)/i;

export function bearerToken(headers: IncomingHttpHeaders): string | undefined {
  return BEARER.exec(headerValue(headers, 'authorization'))?.[1];
}

/** `token`: the bearer token when the caller has already read it from the headers. */
export async function authenticate(headers: IncomingHttpHeaders, deps: AuthDeps, token = bearerToken(headers)): Promise<AuthResult> {
  if (token) {
    const claims = await deps.tokens.verifyAccess(token);
    if (claims) {
      const user = await deps.identities.activeUser(claims.userId);
      if (!user) return { kind: 'denied', denial: { code: 'userNotFound' } };
      return { kind: 'authenticated', user, method: 'bearer' };
    }
  }
  const key = headerValue(headers, 'x-api-key').trim();
  if (key) {
    const hash = sha256Hex(key);
    const ownerId = await deps.identities.keyOwner(hash);
    const user = ownerId === undefined ? undefined : await deps.identities.activeUser(ownerId);
    if (user) {
      deps.keyUsage.record(hash, deps.clock());
      return { kind: 'authenticated', user, method: 'api-key' };
    }
  }
  // A credential of ours that failed is a 401 even where anonymous access is allowed (the client
  // should learn its token expired); another scheme (`Authorization: Basic …`) is not ours at all.
  if (token || key || BEARER_SCHEME.test(headerValue(headers, 'authorization'))) return { kind: 'denied', denial: { code: 'tokenInvalid' } };
  return { kind: 'anonymous' };
}
