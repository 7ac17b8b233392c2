// Request tracing on every listener (CONTRACT §17): a server span per request named after its
// route, and request ids kept across hops when harmless. What the pipeline decided is written on
// the span by the pipeline (pipeline/decisionTrace.ts); the listeners and the proxy begin and end it here.
import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { RequestTrace, Tracing } from './tracing.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** With tracing (telemetry.otlp): the request's trace. */
    trace: RequestTrace | undefined;
  }
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
  app.addHook('onRequest', (request, _reply, done) => {
    beginTrace(tracing, request, pathOf(request));
    done();
  });
  traceAnswers(app, tracing, carried);
}

/** The request's server span, begun; `path` without the query. */
export function beginTrace(tracing: Tracing, request: FastifyRequest, path: string): void {
  request.trace = tracing.begin(request.method, path, request.headers);
}

/**
 * traceRequests without its onRequest hook, for a listener whose own first hook calls beginTrace
 * (the public one's, publicOrder.ts): the trace carried into the handler, and ended with the answer.
 */
export function traceAnswers(app: FastifyInstance, tracing: Tracing, carried: (request: FastifyRequest) => boolean): void {
  app.decorateRequest('trace', undefined);
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
