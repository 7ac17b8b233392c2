// buildApp: the public listener's fastify instance, ready for inject() or listen(); never listens.
// A request flows: own endpoint (auth, user, health, JWKS) or route table → guards → upstream.
import { randomUUID } from 'node:crypto';
import { STATUS_CODES, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance } from 'fastify';
import rateLimit from '@fastify/rate-limit';
import { errorBody, ERRORS, GatewayError, sendError, type ErrorCode } from './errors.js';
import { isJsonType, lenientJson } from './http.js';
import { isUnavailable } from './storage/db.js';
import { authRoutes } from './auth/routes.js';
import { authRateLimitOptions } from './guards/authRateLimit.js';
import { healthRoutes } from './health.js';
import { AccessLog, lazyChildLogger } from './logger.js';
import { proxyRoutes } from './proxy/forward.js';
import { canonicalUrl } from './proxy/routeTable.js';
import { userRoutes } from './pro/routes.js';
import type { Services } from './services.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The gateway route a proxied request matched (metrics label). */
    gatewayRoute: string;
  }
}

const SAFE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const REQUEST_TIMEOUT_MS = 300_000;

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
    // While draining (SIGTERM), a request already received on a keep-alive connection is served
    // normally with `Connection: close` rather than refused with fastify's non-catalog 503 body.
    return503OnClosing: false,
    // The gateway is the edge: a client trickling a body (slowloris) must not hold a connection and
    // an upstream request for ever. Node's own default, which fastify turns off; the request is
    // then dropped with its upstream request (clientErrorHandler).
    requestTimeout: REQUEST_TIMEOUT_MS,
    clientErrorHandler,
    // A URL the router cannot decode (`/x/%`) gets the catalog's 400, not fastify's own body.
    frameworkErrors: (_error, _request, reply) => sendError(reply, 'badRequest'),
    // One path for everything: own endpoints and routes are matched on the normalized path the
    // proxy forwards, so `/x/../api/v1/auth/login` cannot reach an upstream (proxy/routeTable.ts).
    rewriteUrl: (req) => canonicalUrl(req.url ?? '/'),
    // One access line per request instead of two, at debug, and request.log made on first use
    // (src/logger.ts): logging was the largest per-request cost after the proxying itself.
    logController: new AccessLog(),
    childLoggerFactory: lazyChildLogger,
  });
  registerCommon(app, services);

  await app.register(healthRoutes, { services });
  app.get('/.well-known/jwks.json', async (_request, reply) => {
    // Short: after a rotation, HTTP caches must not hide the new next key for long.
    reply.header('cache-control', 'public, max-age=60');
    return { keys: [...services.tokens.publicJwks, ...((await services.assertionKeys?.()) ?? [])] };
  });
  await app.register(async (auth) => {
    // Always registered (max 0 lets every request through) so a reload can switch it on.
    await auth.register(rateLimit, authRateLimitOptions(services));
    await auth.register(authRoutes, { services });
  }, { prefix: '/api/v1/auth' });
  await app.register(userRoutes, { services, prefix: '/api/v1/user' });
  await app.register(proxyRoutes, { services });
  return app;
}

/**
 * HTTP that cannot even be parsed (bad syntax, headers over Node's limit, headers sent too slowly)
 * never reaches a route: answer it from the catalog too, then drop the connection, which cannot
 * be trusted to carry another request.
 */
export function clientErrorHandler(this: FastifyInstance, err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const inFlight = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage;
  // The request being answered never finished arriving (the client closed or broke the connection
  // mid-body, or took longer than requestTimeout): it can never complete, and its upstream request
  // would wait for the rest of the body for ever. Let go of both.
  if (inFlight && !inFlight.req.complete) {
    socket.destroy();
    return;
  }
  // Bytes after a request that declared no body (a pipelined or smuggled "request"): the earlier
  // request on this connection is still being answered. Let that answer go out alone, then close.
  if (inFlight) {
    if (!inFlight.headersSent) inFlight.setHeader('connection', 'close');
    inFlight.once('close', () => socket.destroy());
    return;
  }
  const code: ErrorCode = err.code === 'HPE_HEADER_OVERFLOW' ? 'headersTooLarge' : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 'requestTimeout' : 'badRequest';
  this.log.debug({ code: err.code }, 'unparsable request');
  const { status } = ERRORS[code];
  const body = JSON.stringify(errorBody(code));
  // A response to HEAD has no body, even this one (the request line is in the bytes that failed).
  const head = (err as { rawPacket?: Buffer }).rawPacket?.subarray(0, 5).toString('latin1') === 'HEAD ';
  if (socket.writable) {
    socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${head ? '' : body}`);
  }
  socket.destroy();
}

/** What both listeners share: request ids, the lenient JSON parser, the error catalog, metrics. */
export function registerCommon(app: FastifyInstance, services: Services): void {
  app.decorateRequest('gatewayRoute', '');
  // Callback-style hooks: these run on every request, and an async hook costs a promise each time.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    done();
  });
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.gatewayRoute || request.routeOptions.url || 'unmatched';
    services.metrics.tallies.answered(route, request.method, reply.statusCode, reply.elapsedTime / 1000);
    done();
  });

  // Spec §4: a missing, non-JSON, other-typed or non-object body reads as {} (never 415/400).
  app.removeAllContentTypeParsers();
  // Only a JSON content type is read: text/plain and forms can be sent cross-site by any web page
  // without a CORS preflight (CSRF), so their bodies count as {} even when they hold JSON.
  app.addContentTypeParser('*', { parseAs: 'string' }, (request, body, done) => done(null, isJsonType(request.headers['content-type']) ? lenientJson(body as string) : {}));

  app.setNotFoundHandler((_request, reply) => sendError(reply, 'routeNotFound'));
  app.setErrorHandler((error: FastifyError, request, reply) => {
    if (error instanceof GatewayError) {
      if (error.code === 'rateLimited') request.log.info({ ip: request.ip }, 'auth rate limit reached');
      else if (ERRORS[error.code].status >= 500) request.log.warn({ err: error }, 'request refused with a server error');
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
