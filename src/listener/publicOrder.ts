// The order a request meets on the public listener, declared once: PUBLIC_ORDER. The steps before
// routing run in publicRequestHook, the listener's one onRequest hook; the rest are the lines of
// the forwarder's forward() (proxy/forwarder.ts), where only proxied requests go. The hook calls
// each step's function in the list's order, in straight-line code: a loop over the list, or one
// fastify hook per step, cost more per request (issue 48). test/architecture/publicOrder.test.ts
// holds both to the list; docs/architecture.md says how to add a step.
import type { Http2ServerRequest } from 'node:http2';
import type { FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import type { RequestContexts } from '../live/requestContext.js';
import type { Tracing } from '../telemetry/tracing.js';
import { checkHost } from './basics.js';
import { answerCors } from './cors.js';
import { beginTrace } from '../telemetry/requestSpans.js';

/** Each step, and why it comes where it does. The first five are publicRequestHook's, the last four forward()'s. */
export const PUBLIC_ORDER = [
  { step: 'context', why: 'the live snapshot pinned, the path read and the route matched once: every later step reads them' },
  { step: 'host', why: 'the request id on every answer; a refused Host (RFC 9112 §3.2) answered before anything reads the request, untraced' },
  { step: 'trace', why: 'the span begins before anything that answers but the Host check, so a preflight and a denial are traced' },
  { step: 'draining', why: 'every answer from here on, a preflight\'s too, closes its connection while the listener drains' },
  { step: 'cors', why: 'preflights answered before any guard, rate limit or route; other covered requests get Vary: Origin' },
  { step: 'bodyless', why: 'a GET or HEAD with a body refused (400) before anything is decided or counted for it' },
  { step: 'upgrade', why: 'a malformed WebSocket handshake refused (400) before it is decided or counted' },
  { step: 'decide', why: 'the pipeline: route, guard stages (pipeline/stages.ts), identity; a denial answers' },
  { step: 'forward', why: 'plan the upstream request without the gateway\'s credentials, then relay it or open the WebSocket' },
] as const;

export type PublicStep = (typeof PUBLIC_ORDER)[number]['step'];

/** What the hook's steps read. */
export interface PublicHookDeps {
  contexts: RequestContexts;
  /** With telemetry tracing only. */
  tracing: Tracing | undefined;
  lifecycle: { readonly draining: boolean };
}

/**
 * The public listener's onRequest hook: the steps before routing, one line each in PUBLIC_ORDER's
 * order. A step that answers ends it as fastify ends its hooks: nothing after it runs.
 */
export function publicRequestHook({ contexts, tracing, lifecycle }: PublicHookDeps): onRequestHookHandler {
  return function publicRequest(request, reply, done) {
    request.context = contexts.of(request.raw);
    checkHost(request, reply);
    if (reply.sent) return done();
    if (tracing) beginTrace(tracing, request, request.context.rawPath);
    closeWhileDraining(lifecycle, request, reply);
    // Answered: a fastify hook that sends does not call done().
    if (answerCors(request, reply)) return;
    done();
  };
}

/**
 * While draining (server.shutdownDelay), every answer closes its connection: a load balancer's
 * keep-alive connection must not be idle in its pool when the listener closes, or the request it
 * sends next on it is lost (a POST is never retried). HTTP/2 has no Connection header: its
 * equivalent is GOAWAY, which lets the session's streams in flight finish and starts no new one.
 */
function closeWhileDraining(lifecycle: PublicHookDeps['lifecycle'], request: FastifyRequest, reply: FastifyReply): void {
  if (lifecycle.draining) {
    if (request.raw.httpVersionMajor === 1) reply.header('connection', 'close');
    else (request.raw as unknown as Http2ServerRequest).stream.session?.close();
  }
}
