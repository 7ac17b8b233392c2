// The public listener's CORS step (CONTRACT §10, publicOrder.ts), after the Host check: a
// preflight on a covered path is answered here (204), before any guard, rate limit or route; any
// other request to a covered path gets `Vary: Origin`, and the policy's headers when its Origin is
// allowed. The policies are routing/cors.ts's, read from the request's pinned live snapshot.
import type { FastifyReply, FastifyRequest } from 'fastify';

declare module 'fastify' {
  interface FastifyRequest {
    /** A CORS policy covers this request: the gateway's CORS headers, not the upstream's, go back. */
    corsCovered: boolean;
  }
}

/**
 * Own endpoints are covered by the global policy only; a route's path by its own, if it has one.
 * True when it answered the request (a preflight): nothing after it runs.
 */
export function answerCors(request: FastifyRequest, reply: FastifyReply): boolean {
  if (reply.sent) return false;
  const policy = request.context.live.cors?.covering(request.context.match);
  if (!policy) return false;
  const { own, match } = request.context;
  const route = match.kind === 'none' ? undefined : match.route;
  request.corsCovered = true;
  // The answer depends on Origin: caches must keep one per origin (Fetch standard, CORS and caching).
  reply.header('vary', 'Origin');
  const origin = request.headers.origin;
  const allowed = origin !== undefined && policy.allows(origin);
  if (request.method === 'OPTIONS' && origin !== undefined && request.headers['access-control-request-method'] !== undefined) {
    if (allowed) reply.headers(policy.preflightHeaders(origin, route ? route.allowedMethods : own));
    reply.code(204).send();
    return true;
  }
  if (allowed) reply.headers(policy.responseHeaders(origin));
  return false;
}

