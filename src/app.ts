// buildApp: the public listener's fastify instance, ready for inject() or listen(); never listens.
// A request flows: own endpoint (auth, user, health, JWKS) or route table → guards → upstream.
import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance } from 'fastify';
import rateLimit from '@fastify/rate-limit';
import { errorBody, ERRORS, GatewayError, sendError } from './errors.js';
import { lenientJson } from './http.js';
import { isUnavailable } from './storage/db.js';
import { authRoutes } from './auth/routes.js';
import { healthRoutes } from './health.js';
import { proxyRoutes } from './proxy/forward.js';
import { userRoutes } from './pro/routes.js';
import type { Services } from './services.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The gateway route a proxied request matched (metrics label). */
    gatewayRoute: string;
  }
}

const SAFE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** A caller's request id is kept when it is harmless (for tracing across hops), else one is made. */
export function requestId(header: string | string[] | undefined): string {
  return typeof header === 'string' && SAFE_REQUEST_ID.test(header) ? header : randomUUID();
}

export async function buildApp(services: Services): Promise<FastifyInstance> {
  const { config } = services;
  const app = Fastify({
    loggerInstance: services.log as FastifyBaseLogger,
    genReqId: (req) => requestId(req.headers['x-request-id']),
    bodyLimit: config.server.bodyLimit,
    trustProxy: config.server.trustProxy,
    return503OnClosing: true,
  });
  registerCommon(app, services);

  await app.register(healthRoutes, { services });
  app.get('/.well-known/jwks.json', async (_request, reply) => {
    reply.header('cache-control', 'public, max-age=300');
    return { keys: [...services.tokens.publicJwks, ...((await services.assertionKeys?.()) ?? [])] };
  });
  await app.register(async (auth) => {
    const { max, window } = config.auth.rateLimit;
    if (max > 0) {
      await auth.register(rateLimit, {
        max,
        timeWindow: window,
        ...(services.redis ? { redis: services.redis, nameSpace: 'ratelimit:' } : {}),
        skipOnError: true,
        keyGenerator: (request) => request.ip,
        errorResponseBuilder: () => new GatewayError('rateLimited'),
      });
    }
    await auth.register(authRoutes, { services });
  }, { prefix: '/api/v1/auth' });
  await app.register(userRoutes, { services, prefix: '/api/v1/user' });
  await app.register(proxyRoutes, { services });
  return app;
}

/** What both listeners share: request ids, the lenient JSON parser, the error catalog, metrics. */
export function registerCommon(app: FastifyInstance, services: Services): void {
  app.decorateRequest('gatewayRoute', '');
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });
  app.addHook('onResponse', async (request, reply) => {
    const route = request.gatewayRoute || request.routeOptions.url || 'unmatched';
    services.metrics.requests.inc({ route, method: request.method, status: reply.statusCode });
    services.metrics.latency.observe({ route }, reply.elapsedTime / 1000);
  });

  // Spec §4: a missing, non-JSON, other-typed or non-object body reads as {} (never 415/400).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (_request, body, done) => done(null, lenientJson(body as string)));

  app.setNotFoundHandler((_request, reply) => sendError(reply, 'routeNotFound'));
  app.setErrorHandler((error: FastifyError, request, reply) => {
    if (error instanceof GatewayError) {
      if (error.code === 'rateLimited') request.log.info({ ip: request.ip }, 'auth rate limit reached');
      return sendError(reply, error.code, error.extra);
    }
    if (isUnavailable(error)) {
      request.log.error({ err: error }, 'storage unavailable');
      return sendError(reply, 'storageUnavailable');
    }
    if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE' || error.statusCode === 413) return sendError(reply, 'payloadTooLarge');
    if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
      request.log.info({ err: error }, 'bad request');
      return sendError(reply, 'badRequest');
    }
    request.log.error({ err: error }, 'unexpected error');
    return reply.code(ERRORS.internal.status).send(errorBody('internal'));
  });
}
