// Who may call /scim/v2/orgs/{id}/ (CONTRACT §31): only a SCIM token of that organization, as
// `Authorization: Bearer`. Anything else there, another organization's token, a revoked or
// expired one, an access token or an API key included, gets a SCIM 401 before any route runs,
// so an unknown path under it tells nothing either. The token is looked up with the path's
// organization in the WHERE: a token can never reach another organization's users.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { sha256Hex } from '../credentials/digest.js';
import { parseIntegerId, type Queryable } from '../storage/database/index.js';
import { useScimToken } from '../storage/orgs/index.js';
import { ScimError, sendScimError } from './errors.js';
import { SCIM_TOKEN_PREFIX } from './tokens.js';

/** The caller of a SCIM request: the organization of the path and the token's id (the audit's actor_id). */
export interface ScimCaller {
  orgId: number;
  tokenId: number;
}

declare module 'fastify' {
  interface FastifyRequest {
    scimCaller: ScimCaller | null;
  }
}

const BEARER = /^Bearer +(\S+)$/i;
const UNAUTHORIZED = new ScimError(401, 'A SCIM token of this organization is required (Authorization: Bearer)');

export interface ScimAccessDeps {
  db: Queryable;
  clock: () => Date;
}

/** The onRequest hook of the SCIM scope: the caller, or a SCIM 401 (with WWW-Authenticate, RFC 6750). */
export function scimAccess(deps: ScimAccessDeps) {
  return async function scimAuthenticate(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const orgId = parseIntegerId((request.params as Record<string, unknown>).orgId);
    // No header reads as the text "undefined": no Bearer either.
    const token = BEARER.exec(String(request.headers.authorization))?.[1];
    const tokenId = orgId !== undefined && token?.startsWith(SCIM_TOKEN_PREFIX) ? await useScimToken(deps.db, orgId, sha256Hex(token), deps.clock()) : undefined;
    if (tokenId === undefined) {
      reply.header('www-authenticate', 'Bearer realm="scim"');
      sendScimError(reply, UNAUTHORIZED);
      return;
    }
    request.scimCaller = { orgId: orgId!, tokenId };
  };
}

/** The caller, set by scimAccess for every route of the scope. */
export const callerOf = (request: FastifyRequest): ScimCaller => request.scimCaller!;
