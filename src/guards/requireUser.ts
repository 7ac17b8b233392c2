// The auth (+ plan) guard for the gateway's own endpoints (/api/v1/user/*), as a preHandler:
// the same authenticate and checkPlan the proxy runs, so both answer identically.
import type { FastifyReply, FastifyRequest, preHandlerAsyncHookHandler } from 'fastify';
import { sendDenial } from '../errors.js';
import type { Plan } from '../config/schema.js';
import type { Services } from '../services.js';
import type { User } from '../storage/users.js';
import { authenticate, type AuthMethod } from './authenticate.js';
import { checkPlan } from './plan.js';

declare module 'fastify' {
  interface FastifyRequest {
    currentUser?: { user: User; method: AuthMethod };
  }
}

export function requireUser(services: Services, plans?: readonly Plan[]): preHandlerAsyncHookHandler {
  return async function guard(request: FastifyRequest, reply: FastifyReply) {
    const auth = await authenticate(request.headers, services);
    if (auth.kind !== 'authenticated') {
      const denial = auth.kind === 'denied' ? auth.denial : { code: 'tokenInvalid' as const };
      request.log.info({ reason: denial.code }, 'request denied');
      return sendDenial(reply, denial);
    }
    if (plans) {
      const denial = checkPlan(auth.user, plans);
      if (denial) {
        request.log.info({ reason: denial.code, userId: auth.user.id }, 'request denied');
        return sendDenial(reply, denial);
      }
    }
    request.currentUser = { user: auth.user, method: auth.method };
  };
}

/** The user a requireUser preHandler let through. */
export function currentUser(request: FastifyRequest): User {
  if (!request.currentUser) throw new Error('currentUser() used on a route without requireUser');
  return request.currentUser.user;
}
