// What every listener (public, admin, decisions) is built from: fastify's options and the hooks
// they share: the request id, the Host check (refusesHost, http.ts), the
// per-route metrics, the lenient JSON body parser, the catalog's not-found and error handler
// (errorHandler.ts). Unparsable HTTP is answered by unparsable.ts, spans by telemetry/requestSpans.ts, HTTPS
// by tls.ts. app.ts, admin/app.ts and decisions/app.ts each add only their own routes.
import type { Server, ServerResponse } from 'node:http';
import type { FastifyBaseLogger, FastifyHttpOptions, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { DEFAULT_STYLE, sendError, type ErrorStyle } from '../errors/index.js';
import { isJsonType, lenientJson, refusesHost } from '../http.js';
import { AccessLog } from '../telemetry/logger.js';
import type { RouteTallies } from '../telemetry/metrics.js';
import { hasEncodedDelimiter } from '../routing/paths.js';
import { requestId } from '../telemetry/requestSpans.js';
import { registerErrorHandler } from './errorHandler.js';
import { clientErrorHandler, writeRaw } from './unparsable.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The gateway route a proxied request matched (metrics label). */
    gatewayRoute: string;
  }
}

/**
 * Node's options for every listener's server, HTTPS included (tls.ts). The Host check is
 * registerCommon's, so that its 400 has the catalog's body. Node looks for requests past their
 * header and request timeouts this often: at its default, 30 s, a client trickling its headers
 * (slowloris) held its connection up to 30 s past headersTimeout before its 408.
 */
export const SERVER_OPTIONS = { requireHostHeader: false, connectionsCheckingInterval: 1000 } as const;

/** The fastify options every listener starts from. */
export function listenerOptions(log: Logger) {
  return {
    loggerInstance: log as FastifyBaseLogger,
    http: SERVER_OPTIONS,
    // Connections are closed by server.ts's ConnectionDrain, which spares the ones not used yet.
    forceCloseConnections: false,
    genReqId: (req) => requestId(req.headers['x-request-id']),
    clientErrorHandler,
    // A URL the router cannot decode (`/x/%`) gets the catalog's 400, not fastify's own body.
    frameworkErrors: (_error, _request, reply) => sendError(reply, 'badRequest'),
    // One access line per request instead of two, at debug, and request.log made on first use
    // (createLogger's child, telemetry/logger.ts): logging was the largest per-request cost after the
    // proxying itself.
    logController: new AccessLog(),
  } satisfies FastifyHttpOptions<Server> & { loggerInstance: FastifyBaseLogger };
}

/**
 * Every answer carries the request id; a request whose Host is refused (refusesHost, http.ts) is answered
 * 400 here, and closes its HTTP/1 connection.
 */
export function checkHost(request: FastifyRequest, reply: FastifyReply): void {
  reply.header('x-request-id', request.id);
  if (refusesHost(request.raw)) {
    if (request.raw.httpVersionMajor === 1) reply.header('connection', 'close');
    sendError(reply, 'badRequest');
  }
}

/**
 * What every listener registers: the lenient JSON parser, the error catalog, metrics. The Host
 * check is each listener's first hook: registerHostCheck, or the public listener's own ordered
 * hook (publicOrder.ts).
 */
/** What a listener does with every answer: its metrics, and storage taken as answering again below 500 (errorHandler.ts). */
export type Answered = (route: string, method: string, status: number, seconds: number) => void;

/** Returns what it does with every answer, for the direct lane's (proxy/directLane.ts), which fastify's hooks do not see. */
export function registerCommon(app: FastifyInstance, tallies: RouteTallies, errorStyle: ErrorStyle = DEFAULT_STYLE): Answered {
  app.decorate('errorStyle', errorStyle);
  // An Expect other than 100-continue (RFC 9110 §10.1.1) is refused before any route runs; Node's
  // own 417 has an empty body.
  // On HTTP/2 `res` is Node's compatibility response, which answers writeHead and end alike.
  app.server.on('checkExpectation', (_req, res: ServerResponse) => writeRaw(res, 'expectationFailed', errorStyle));
  app.decorateRequest('gatewayRoute', '');
  // A callback-style hook: it runs on every request, and an async hook costs a promise each time.
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.gatewayRoute || request.routeOptions.url || 'unmatched';
    tallies.answered(route, request.method, reply.statusCode, reply.elapsedTime / 1000);
    done();
  });

  // Spec §4: a missing, non-JSON, other-typed or non-object body reads as {} (never 415/400).
  app.removeAllContentTypeParsers();
  // Only a JSON content type is read: text/plain and forms can be sent cross-site by any web page
  // without a CORS preflight (CSRF), so their bodies count as {} even when they hold JSON.
  app.addContentTypeParser('*', { parseAs: 'string' }, (request, body, done) => done(null, isJsonType(request.headers['content-type']) ? lenientJson(body as string) : {}));

  app.setNotFoundHandler((_request, reply) => sendError(reply, 'routeNotFound'));
  const afterAnswer = registerErrorHandler(app);
  return (route, method, status, seconds) => {
    tallies.answered(route, method, status, seconds);
    afterAnswer(status);
  };
}

/**
 * The request id on every answer and the Host check (checkHost), as a listener's first onRequest
 * hook; then a path holding an encoded `#` or `?` is refused (400, CONTRACT §33): the public
 * listener refuses it as a path it cannot read (normalizePath), the admin and decisions ones here,
 * whatever route they would match.
 */
export function registerHostCheck(app: FastifyInstance): void {
  app.addHook('onRequest', (request, reply, done) => {
    checkHost(request, reply);
    if (!reply.sent && hasEncodedDelimiter(request.url.split('?', 1)[0]!)) sendError(reply, 'badRequest');
    done();
  });
}
