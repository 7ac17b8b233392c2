// Every request that is not one of the gateway's own endpoints: match a route, run its guards
// (auth → plan → daily), then stream it to the upstream through undici's pooled keep-alive agent.
import { Transform, type TransformCallback } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import replyFrom from '@fastify/reply-from';
import { sendDenial, sendError, type Denial, type ErrorCode } from '../errors.js';
import { authenticate, bearerToken, type AuthResult } from '../guards/authenticate.js';
import { checkPlan } from '../guards/plan.js';
import type { Services } from '../services.js';
import { upstreamHeaders } from './headers.js';
import { normalizePath } from './routeTable.js';

const ALL_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

export interface ProxyOutcome {
  route: string;
  decision: 'allowed' | 'denied';
  reason?: ErrorCode;
}

export async function proxyRoutes(app: FastifyInstance, opts: { services: Services }): Promise<void> {
  const { services } = opts;
  const bodyLimit = services.config.server.bodyLimit;

  await app.register(replyFrom, {
    undici: { connections: 128, pipelining: 1, keepAliveTimeout: 30_000 },
    // The gateway logs each request once itself; reply-from's own lines would double them.
    disableRequestLogging: true,
  });

  // Bodies are streamed to the upstream untouched, never parsed; only their size is checked.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (request, payload, done) => {
    const declared = Number(request.headers['content-length']);
    if (declared > bodyLimit) {
      done(Object.assign(new Error('body too large'), { statusCode: 413, code: 'FST_ERR_CTP_BODY_TOO_LARGE' }), undefined);
      return;
    }
    done(null, Number.isFinite(declared) ? payload : payload.pipe(sizeLimit(bodyLimit)));
  });

  app.route({
    method: [...ALL_METHODS],
    url: '/*',
    handler: async (request, reply) => {
      const rawPath = request.url.split('?', 1)[0]!;
      const path = normalizePath(rawPath);
      if (path === undefined) return sendError(reply, 'badRequest');
      const match = services.routes.match(request.method, path);
      if (match.kind === 'none') return sendError(reply, 'routeNotFound');
      const route = match.route;
      request.gatewayRoute = route.path;
      if (match.kind === 'method-not-allowed') {
        reply.header('allow', [...route.allowedMethods!].join(', '));
        return deny(request, reply, route.path, { code: 'methodNotAllowed' });
      }

      let auth: AuthResult = { kind: 'anonymous' };
      if (route.auth !== 'none') {
        auth = await authenticate(request.headers, services);
        if (auth.kind === 'denied') return deny(request, reply, route.path, auth.denial);
        if (auth.kind === 'anonymous' && route.auth === 'required') return deny(request, reply, route.path, { code: 'tokenInvalid' });
      }
      const user = auth.kind === 'authenticated' ? auth.user : undefined;
      if (route.plans) {
        const denial = checkPlan(user, route.plans);
        if (denial) return deny(request, reply, route.path, denial);
      }
      if (route.dailyLimit && user) {
        const denial = await services.daily.consume(user);
        if (denial) return deny(request, reply, route.path, denial);
      }

      // Authorization is dropped when it carried the gateway's own token; on `auth: none`
      // routes it belongs to the upstream unless it is one of ours.
      const bearer = bearerToken(request.headers);
      const dropAuthorization = auth.kind === 'authenticated' ? auth.method === 'bearer' || bearer !== undefined
        : bearer !== undefined && (await services.tokens.verifyAccess(bearer)) !== null;
      const xff = request.headers['x-forwarded-for'];
      const socketAddress = request.socket.remoteAddress ?? '';
      const headers = upstreamHeaders(request.headers, {
        requestId: request.id,
        forwardedFor: services.config.server.trustProxy && xff ? `${String(xff)}, ${socketAddress}` : socketAddress,
        proto: request.protocol,
        host: request.headers.host,
        identity: auth.kind === 'authenticated' ? { user: auth.user, method: auth.method } : undefined,
        dropAuthorization,
        extra: auth.kind === 'authenticated' && route.target.assertion && services.assertions
          ? await services.assertions.headerFor(auth.user, auth.method, route.upstreamName)
          : undefined,
      });

      request.log.debug({ route: route.path, upstream: route.upstreamName, userId: user?.id }, 'proxying');
      try {
        return reply.from(`${route.target.url}${match.upstreamPath}`, {
          timeout: route.target.timeout,
          rewriteRequestHeaders: () => headers,
          onError: (replyOnError, { error }) => upstreamFailed(request, replyOnError as FastifyReply, route.upstreamName, error),
        });
      } catch (err) {
        // reply-from refuses paths it cannot build (malformed percent-encoding, encoded `..`).
        request.log.info({ err }, 'path refused by the proxy');
        return sendError(reply, 'badRequest');
      }
    },
  });

  function deny(request: FastifyRequest, reply: FastifyReply, routePath: string, denial: Denial): FastifyReply {
    request.log.info({ route: routePath, reason: denial.code }, 'request denied');
    services.metrics.guardDecisions.inc({ route: routePath, outcome: denial.code });
    return sendDenial(reply, denial);
  }

  function upstreamFailed(request: FastifyRequest, reply: FastifyReply, upstream: string, error: unknown): void {
  const err = error as { code?: string; statusCode?: number; cause?: { code?: string } } | undefined;
  const code = err?.code ?? '';
  const causeCode = err?.cause?.code ?? '';
  if (code === 'FST_ERR_CTP_BODY_TOO_LARGE' || err?.statusCode === 413) {
    if (!reply.sent) sendError(reply, 'payloadTooLarge');
    return;
  }
  const timedOut = err?.statusCode === 504 || /TIMEOUT/.test(code) || /TIMEOUT/.test(causeCode);
  request.log.warn({ upstream, code: code || causeCode, timedOut }, 'upstream failed');
  services.metrics.upstreamErrors.inc({ upstream, kind: timedOut ? 'timeout' : 'unavailable' });
  if (reply.sent) {
    // Headers already went out: all that is left is to cut the response short.
    reply.raw.destroy();
    return;
  }
  sendError(reply, timedOut ? 'upstreamTimeout' : 'upstreamUnavailable');
  }
}

/** Counts a chunked body as it streams and fails it past the limit (no Content-Length to check). */
function sizeLimit(limit: number): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback) {
      seen += chunk.length;
      if (seen > limit) callback(Object.assign(new Error('body too large'), { statusCode: 413, code: 'FST_ERR_CTP_BODY_TOO_LARGE' }));
      else callback(null, chunk);
    },
  });
}
