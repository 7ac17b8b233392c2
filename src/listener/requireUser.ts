// The auth (+ plan) guard for the gateway's own endpoints (/api/v1/user/*), as a preHandler: the
// pipeline's own guard stage, so an own endpoint and a route answer identically.
import type { FastifyReply, FastifyRequest, preHandlerAsyncHookHandler } from 'fastify';
import { sendDenial } from '../errors/index.js';
import type { Identity, Pipeline } from '../pipeline/index.js';
import type { User } from '../storage/accounts/index.js';

declare module 'fastify' {
  interface FastifyRequest {
    currentUser?: Identity;
  }
}

/**
 * `anyKey`: an API key with scopes passes without `*` (GET /api/v1/user/me only); `bearerOnly`: a
 * bearer sign-in only, any key refused (CONTRACT §21). Both are the pipeline's guard's to apply.
 */
export type RequireUser = (plans?: readonly string[], options?: { anyKey?: boolean; bearerOnly?: boolean }) => preHandlerAsyncHookHandler;

export function requireUserWith(pipeline: Pick<Pipeline, 'guard'>): RequireUser {
  return (plans, options = {}) => {
    // One policy per guarded endpoint, not per request: the pipeline keeps each policy's stages (stages.ts's stagesFor).
    const policy = { auth: 'required', plans, ...options } as const;
    return async function guard(request: FastifyRequest, reply: FastifyReply) {
      const outcome = await pipeline.guard(policy, request.headers, request.context.live);
      if (outcome.kind === 'deny') {
        request.log.info({ reason: outcome.denial.code }, 'request denied');
        return sendDenial(reply, outcome.denial);
      }
      if (outcome.auth.kind === 'authenticated') {
        const { user, method, sessionId, acr, authTime, keyId, scopes } = outcome.auth;
        request.currentUser = { user, method, sessionId, acr, authTime, keyId, scopes };
      }
    };
  };
}

/**
 * CONTRACT §21's `bearer` guard (/api/v1/user/api-keys, /api/v1/orgs…, /api/v1/billing/checkout and
 * /portal): a bearer sign-in only; an API key alone is refused (api_key_not_accepted) by the
 * pipeline's guard before anything else, its scopes included, is looked at, and counted as its denial.
 */
export function requireBearer(requireUser: RequireUser): preHandlerAsyncHookHandler[] {
  return [requireUser(undefined, { bearerOnly: true })];
}

/** The user a requireUser preHandler let through. */
export function currentUser(request: FastifyRequest): User {
  return currentIdentity(request).user;
}

/** Who a requireUser preHandler let through, and how (the session of a bearer token). */
export function currentIdentity(request: FastifyRequest): Identity {
  if (!request.currentUser) throw new Error('currentUser() used on a route without requireUser');
  return request.currentUser;
}

