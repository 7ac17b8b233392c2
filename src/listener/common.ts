// What every listener shares (public, admin, decisions): request ids, access lines,
// the catalog's answer to unparsable HTTP, the lenient JSON body parser, the error handler and
// the per-route metrics, and HTTPS (with HTTP/2) for a listener that has certificates. app.ts and
// admin/app.ts each add only their own routes to it.
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { METHODS, STATUS_CODES, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { createSecureContext, type Server as TlsServer } from 'node:tls';
import type { FastifyBaseLogger, FastifyError, FastifyHttpOptions, FastifyInstance, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import type { Config } from '../config/schema.js';
import { errorBody, ERRORS, GatewayError, sendError, type ErrorCode } from '../errors.js';
import { isJsonType, isValidHost, lenientJson } from '../http.js';
import { failureLog } from '../telemetry/logThrottle.js';
import { AccessLog } from '../telemetry/logger.js';
import type { RouteTallies } from '../telemetry/metrics.js';
import type { Decision } from '../pipeline/index.js';
import { isRefusedInput, isUnavailable } from '../storage/db.js';
import type { RequestTrace, Tracing } from '../telemetry/tracing.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The gateway route a proxied request matched (metrics label). */
    gatewayRoute: string;
    /** With tracing (telemetry.otlp): the request's trace. */
    trace: RequestTrace | undefined;
  }
}

/** What the pipeline decided, on the request's trace: the route that names its span, the outcome, and who passed. */
export function traceDecision(trace: RequestTrace | undefined, decision: Decision): void {
  if (!trace) return;
  if (decision.kind === 'deny') {
    if (decision.route && decision.route !== 'own') trace.route = decision.route;
    trace.decision = decision.denial.code;
    return;
  }
  trace.route = decision.route.path;
  trace.decision = 'allow';
  if (decision.auth.kind === 'authenticated') trace.span.setAttribute('enduser.id', String(decision.auth.user.id));
}

const SAFE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * A server span per request (CONTRACT §17), named `METHOD route` after the route it matched
 * (never the raw URL), with the attributes of OpenTelemetry's HTTP conventions and the gateway's.
 * Registered only when tracing is on; `pathOf` is the request's path without its query.
 * `carried`: whether a request's handler may store what outlives it (a webhook message, whose
 * deliveries continue the request's trace): its trace is then at hand deep in the handler
 * (servedTraceparent). Proxied requests store nothing, and skip that cost.
 */
export function traceRequests(app: FastifyInstance, tracing: Tracing, pathOf: (request: FastifyRequest) => string, carried: (request: FastifyRequest) => boolean = () => false): void {
  app.decorateRequest('trace', undefined);
  app.addHook('onRequest', (request, _reply, done) => {
    request.trace = tracing.begin(request.method, pathOf(request), request.headers);
    done();
  });
  // Not from onRequest: the body is read in the socket's async context, so the handler that
  // follows would not be in the one entered there (as @fastify/request-context found).
  app.addHook('preValidation', (request, _reply, done) => {
    if (request.trace && carried(request)) tracing.carry(request.trace, done);
    else done();
  });
  app.addHook('onResponse', (request, reply, done) => {
    endRequestTrace(request, reply.statusCode);
    done();
  });
}

/**
 * Ends a request's server span with its route, status and decision. From onResponse, or, for a
 * WebSocket upgrade (whose 101 is written on the socket, so onResponse never runs), once the
 * client's handshake is answered.
 */
export function endRequestTrace(request: FastifyRequest, statusCode: number): void {
  const { trace } = request;
  if (!trace) return;
  const route = trace.route ?? (request.gatewayRoute || request.routeOptions.url || 'unmatched');
  trace.span.updateName(`${request.method} ${route}`);
  trace.span.setAttributes({ 'http.route': route, 'gateway.route': route, 'http.response.status_code': statusCode });
  if (trace.decision) trace.span.setAttribute('gateway.decision', trace.decision);
  if (statusCode >= 500) trace.span.setStatus({ code: 2 /* ERROR */ });
  trace.span.end();
}

/** A caller's request id is kept when it is harmless (for tracing across hops), else one is made. */
export function requestId(header: string | string[] | undefined): string {
  return typeof header === 'string' && SAFE_REQUEST_ID.test(header) ? header : randomUUID();
}

type TlsSettings = NonNullable<Config['server']['tls']>;

/**
 * TLS 1.3, and TLS 1.2 with forward-secret AEAD suites only (CONTRACT §19): Node's defaults also
 * offer CBC, CCM and ARIA suites and RSA key exchange on TLS 1.2. In the server's order of
 * preference; TLS 1.3's three suites are named too, as OpenSSL takes them from the same list.
 */
export const TLS_CIPHERS = [
  'TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384', 'TLS_CHACHA20_POLY1305_SHA256',
  'ECDHE-ECDSA-AES128-GCM-SHA256', 'ECDHE-RSA-AES128-GCM-SHA256', 'ECDHE-ECDSA-AES256-GCM-SHA384', 'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305', 'ECDHE-RSA-CHACHA20-POLY1305',
  'DHE-RSA-AES128-GCM-SHA256', 'DHE-RSA-AES256-GCM-SHA384', 'DHE-RSA-CHACHA20-POLY1305',
].join(':');

/** The listener's secure context: the certificate chain and key of `server.tls`, read now, and its policy. */
function secureContextOptions(tls: TlsSettings) {
  return {
    cert: readFileSync(tls.certFile, 'utf8'),
    key: readFileSync(tls.keyFile, 'utf8'),
    ciphers: tls.ciphers ?? TLS_CIPHERS,
    minVersion: tls.minVersion,
    honorCipherOrder: true,
  };
}

/**
 * fastify's options for HTTPS with `tls`, and HTTP/2 over ALPN with `http2: true`, where HTTP/1.1
 * clients are still served on the same port (allowHTTP1). Node's own Host check stays off, as on
 * plain HTTP (registerCommon answers it from the catalog); fastify only passes it to plain servers.
 */
export function httpsOptions(tls: TlsSettings | undefined): { https?: object; http2?: true } {
  if (!tls) return {};
  const https = { ...secureContextOptions(tls), requireHostHeader: false };
  return tls.http2 ? { http2: true, https: { ...https, allowHTTP1: true } } : { https };
}

/** Reloading the listener's certificate (SIGHUP): connections already open keep theirs. */
export interface Certificates {
  /** Reads the files and checks them now (throws when they cannot be used); returns the swap. */
  reread(): () => void;
}

export function listenerCertificates(server: TlsServer, tls: TlsSettings): Certificates {
  return {
    reread() {
      // The policy too: a new secure context starts from Node's defaults.
      const options = secureContextOptions(tls);
      createSecureContext(options); // throws on a bad file or a key that is not the certificate's
      return () => server.setSecureContext(options);
    },
  };
}

/** The certificates of every HTTPS listener as one: all are read and checked before any is swapped. */
export function allCertificates(listeners: Array<Certificates | undefined>): Certificates | undefined {
  const present = listeners.filter((c) => c !== undefined);
  if (present.length === 0) return undefined;
  return {
    reread() {
      const swaps = present.map((certificates) => certificates.reread());
      return () => swaps.forEach((swap) => swap());
    },
  };
}

/** The fastify options every listener starts from. */
export function listenerOptions(log: Logger) {
  return {
    loggerInstance: log as FastifyBaseLogger,
    // The Host check is registerCommon's, so that its 400 has the catalog's body.
    http: { requireHostHeader: false },
    // Connections are closed by server.ts's ConnectionDrain, which spares the ones not used yet.
    forceCloseConnections: false,
    genReqId: (req) => requestId(req.headers['x-request-id']),
    clientErrorHandler,
    // A URL the router cannot decode (`/x/%`) gets the catalog's 400, not fastify's own body.
    frameworkErrors: (_error, _request, reply) => sendError(reply, 'badRequest'),
    // One access line per request instead of two, at debug, and request.log made on first use
    // (createLogger's child, src/logger.ts): logging was the largest per-request cost after the
    // proxying itself.
    logController: new AccessLog(),
  } satisfies FastifyHttpOptions<Server> & { loggerInstance: FastifyBaseLogger };
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
    // A body that breaks HTTP's own framing (a malformed chunk) is the client's fault: it gets the
    // catalog's 400 when nothing has been answered yet, then the connection goes. (A client that
    // closed mid-body, HPE_INVALID_EOF_STATE, is gone: nobody to answer.)
    if (err.code?.startsWith('HPE_') && err.code !== 'HPE_INVALID_EOF_STATE' && !inFlight.headersSent) {
      writeRaw(inFlight, 'badRequest');
      inFlight.once('finish', () => socket.destroy());
      return;
    }
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

/** An answer from the catalog written on the raw response, for requests fastify never routes. */
function writeRaw(res: ServerResponse, code: ErrorCode): void {
  const body = JSON.stringify(errorBody(code));
  const headers = { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) };
  // HTTP/2 has no Connection header (RFC 9113 §8.2.2): the stream ends, the connection stays.
  res.writeHead(ERRORS[code].status, res.req.httpVersionMajor >= 2 ? headers : { ...headers, connection: 'close' });
  res.end(res.req.method === 'HEAD' ? undefined : body);
}

/**
 * Lets routes of `app` take every method Node parses, not only fastify's usual ones, so that TRACE
 * or PROPFIND get the catalog's 405 (or 404) rather than a bare not-found. CONNECT never reaches
 * fastify: Node hands it to 'connect'.
 */
export function acceptEveryMethod(app: FastifyInstance): void {
  for (const method of METHODS) {
    if (method !== 'CONNECT' && !app.supportedMethods.includes(method)) app.addHttpMethod(method);
  }
}

function hostHeaders(raw: string[]): number {
  let n = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length === 4 && name.toLowerCase() === 'host') n++;
  }
  return n;
}

/** What every listener registers: request ids, the lenient JSON parser, the error catalog, metrics. */
export function registerCommon(app: FastifyInstance, tallies: RouteTallies): void {
  // An Expect other than 100-continue (RFC 9110 §10.1.1) is refused before any route runs; Node's
  // own 417 has an empty body.
  // On HTTP/2 `res` is Node's compatibility response, which answers writeHead and end alike.
  app.server.on('checkExpectation', (_req, res: ServerResponse) => writeRaw(res, 'expectationFailed'));
  app.decorateRequest('gatewayRoute', '');
  // Callback-style hooks: these run on every request, and an async hook costs a promise each time.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    // RFC 9112 §3.2: a server MUST answer 400 to an HTTP/1.1 request without Host, with more than
    // one, or with one that is not a host (`evil:1@127.0.0.1`). Node's own check (requireHostHeader,
    // turned off in listenerOptions) answers with an empty body; Node keeps the first of two. HTTP/2
    // says it in :authority (RFC 9113 §8.3.1), which goes upstream as X-Forwarded-Host all the same.
    const { host, ':authority': authority } = request.headers as { host?: string; ':authority'?: string };
    const http1 = request.raw.httpVersionMajor === 1;
    const refused = host === undefined && authority === undefined
      ? request.raw.httpVersion === '1.1'
      : (host !== undefined && !isValidHost(host)) || (authority !== undefined && !isValidHost(authority)) || hostHeaders(request.raw.rawHeaders) > 1;
    if (refused) {
      if (http1) reply.header('connection', 'close');
      sendError(reply, 'badRequest');
    }
    done();
  });
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
  // While Postgres is away every request that needs it fails: one line per interval says so, with
  // a count, instead of a line with a stack per request (issue 18: 9,349 lines in a 5 s outage).
  const storageFailures = failureLog(app.log as Logger, 'storage unavailable: requests that need Postgres are answered 503', { recoveredMessage: 'storage answers again' });
  const overloaded = failureLog(app.log as Logger, 'request refused with a server error');
  app.addHook('onResponse', (_request, reply, done) => {
    if (reply.statusCode < 500) storageFailures.recovered();
    done();
  });
  app.setErrorHandler((error: FastifyError, request, reply) => {
    if (error instanceof GatewayError) {
      if (error.code === 'rateLimited') request.log.info({ ip: request.ip }, 'auth rate limit reached');
      else if (ERRORS[error.code].status >= 500) overloaded.failed(error, { reqId: request.id, code: error.code });
      return sendError(reply, error.code, error.extra);
    }
    if (isUnavailable(error)) {
      storageFailures.failed(error, { reqId: request.id, url: request.url });
      return sendError(reply, 'storageUnavailable');
    }
    // A value Postgres cannot hold (a NUL in text) that a check missed: the client's request, not
    // a fault of ours, so no 500; warned, so that the missing check is found (CONTRACT §26).
    if (isRefusedInput(error)) {
      request.log.warn({ err: error, url: request.routeOptions.url }, 'request refused by Postgres: a value it cannot hold');
      return sendError(reply, 'badRequest');
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
