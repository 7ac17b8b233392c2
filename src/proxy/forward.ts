// The proxy: every request that is not one of the gateway's own endpoints goes through the
// pipeline (src/pipeline.ts) and, when allowed, is relayed to its upstream through undici's
// pooled keep-alive agent (relay.ts), or, for a WebSocket upgrade, by websocket.ts. This file only
// forwards: deciding is the pipeline's, the size of bodies bodyLimit.ts's, and which headers go
// where headers.ts's.
import type { Http2ServerRequest } from 'node:http2';
import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import { HTTP_METHODS } from '../config/schema.js';
import { sendDenial, sendError, type Denial } from '../errors.js';
import { acceptEveryMethod } from '../listener/common.js';
import { DenialLog, failureLog, type FailureLog } from '../logThrottle.js';
import type { Live } from '../live.js';
import type { Metrics } from '../metrics.js';
import type { Pipeline } from '../pipeline.js';
import { BODY_TOO_LARGE, streamBodiesWithin } from './bodyLimit.js';
import { downstreamHeaders, upstreamHeaders, type ForwardContext } from './headers.js';
import { findOwnCredentials, type CredentialChecks } from './ownTokens.js';
import { CLIENT_GONE, relay, upstreamTarget } from './relay.js';
import { upstreamAgent } from './upstreamTls.js';
import { handshakeDenial, handshakeless, upgradeFacts, withoutAccessToken, type WebSockets } from './websocket.js';

const OWN_PATHS_CACHE_SIZE = 10_000;
// Own endpoints' paths are short; a longer path is looked up each time rather than kept, or a client
// sending distinct paths of 16 kB (the most Node takes) would pin 10,000 of them, ~160 MB.
const OWN_PATHS_CACHED_LENGTH = 256;
const NONE: readonly string[] = [];
/** The undici pool to upstreams; bench/ gives its raw baseline proxy the same. */
export const UPSTREAM_POOL = { connections: 128, pipelining: 1, keepAliveTimeout: 30_000 } as const;

export interface ProxyDeps {
  pipeline: Pipeline;
  live: Live;
  /** Tells the gateway's own credentials, which never reach an upstream. */
  credentials: CredentialChecks;
  /** Methods the listener serves itself on a path (ownEndpointMethods). */
  ownMethods: (path: string) => readonly string[];
  websockets: WebSockets;
  upstreamErrors: Metrics['upstreamErrors'];
}

export async function proxyRoutes(app: FastifyInstance, deps: ProxyDeps): Promise<void> {
  const { pipeline, live, credentials, ownMethods, websockets } = deps;

  // With the TLS setup of each upstream; closed after the listener.
  const agent = upstreamAgent(UPSTREAM_POOL, (origin) => live.current.upstreamTls.get(origin));
  app.addHook('onClose', () => agent.close());
  streamBodiesWithin(app, () => live.current.config.server.bodyLimit);
  // An upstream that is down fails every request routed to it: one line per interval and upstream,
  // with a count (issue 18), and one when it answers again. `failing` keeps that check off the
  // path of upstreams that answer.
  const failureLogs = new Map<string, FailureLog>();
  const failing = new Set<string>();
  const failureLogFor = (upstream: string): FailureLog => {
    let log = failureLogs.get(upstream);
    if (!log) failureLogs.set(upstream, (log = failureLog(app.log.child({ upstream }) as Logger, 'upstream failed: its requests are answered 502 or 504', { recoveredMessage: 'upstream answers again' })));
    return log;
  };
  const denials = new DenialLog();
  const answered = (upstream: string): void => {
    if (failing.size === 0 || !failing.delete(upstream)) return;
    failureLogFor(upstream).recovered();
  };

  const proxy = async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    // Node reads a GET's or HEAD's body, which fastify does not parse: the upstream would run
    // another request than the client sent (a search without its query). Refused instead.
    if ((request.method === 'GET' || request.method === 'HEAD') && hasBody(request)) {
      sendError(reply, 'badRequest');
      return;
    }
    const upgrade = websockets.isUpgrade(request);
    const malformed = upgrade ? handshakeDenial(request.headers) : undefined;
    if (malformed) {
      sendDenial(reply, malformed);
      return;
    }
    const decision = await pipeline.decide(upgrade ? upgradeFacts(request) : request, { ownMethods, forwarding: true });
    if (decision.kind === 'deny') {
      if (decision.route) request.gatewayRoute = decision.route;
      deny(request, reply, decision.route, decision.denial);
      return;
    }
    const { route, auth } = decision;
    const target = route.target!; // decide() with forwarding never allows a route without one
    request.gatewayRoute = route.path;
    const { server } = live.current.config;
    // An upgrade's access_token is a credential of the gateway's, never the upstream's, whoever signed it.
    const url = upgrade ? withoutAccessToken(request.url) : request.url;
    const own = await findOwnCredentials({ headers: request.headers, url, bearer: decision.bearer, authenticatedByBearer: auth.kind === 'authenticated' && auth.method === 'bearer' }, credentials);
    const xff = request.headers['x-forwarded-for'];
    const socketAddress = request.socket.remoteAddress ?? '';
    const context: ForwardContext = {
      requestId: request.id,
      forwardedFor: server.trustProxy && xff ? `${String(xff)}, ${socketAddress}` : socketAddress,
      proto: request.protocol,
      host: request.host || undefined,
      identity: decision.identity,
      dropAuthorization: own.authorization,
      cookie: own.cookie,
      carryingCredentials: own.headers,
      trustProxy: server.trustProxy,
    };

    const userId = auth.kind === 'authenticated' ? auth.user.id : undefined;
    request.log.debug({ route: route.path, upstream: target.name, userId }, 'proxying');
    if (upgrade && route.websocket) {
      const query = own.query ?? (url.includes('?') ? url.slice(url.indexOf('?') + 1) : '');
      const opened = await websockets.open(request, reply, {
        url: `${target.url}${decision.upstreamPath}${query ? `?${query}` : ''}`,
        headers: upstreamHeaders(handshakeless(request.headers), context),
        responseHeaders: decision.responseHeaders,
        timeout: target.timeout,
        tls: live.current.upstreamTls.get(new URL(target.url).origin),
        standing: { route: route.path, plans: route.plans, userId, keyHash: auth.kind === 'authenticated' ? auth.keyHash : undefined },
      });
      if (opened.kind === 'failed') upstreamFailed(request, reply, target.name, opened.error);
      else answered(target.name);
      return;
    }
    const upstream = upstreamTarget(target.url, decision.upstreamPath);
    if (!upstream) {
      // A path no request can carry (malformed percent-encoding, a `..` segment once decoded).
      request.log.info({ upstream: target.name }, 'path refused by the proxy');
      sendError(reply, 'badRequest');
      return;
    }
    // The query as the client sent it, or without the pairs that carried a gateway credential.
    const q = url.indexOf('?');
    const search = own.query !== undefined ? (own.query ? `?${own.query}` : '') : q === -1 ? '' : url.slice(q);
    const headers = upstreamHeaders(request.headers, context);
    headers.host = upstream.origin.slice(upstream.origin.indexOf('//') + 2);
    relay(agent, reply, {
      origin: upstream.origin,
      path: upstream.path + search,
      method: request.method,
      headers,
      body: (request.body as Readable | undefined) ?? null,
      timeout: target.timeout,
    }, {
      // The gateway's RateLimit fields on a counted route, in place of any the upstream sent.
      responseHeaders: (upstreamHeaders) => (decision.responseHeaders ? { ...downstreamHeaders(upstreamHeaders, request.corsCovered), ...decision.responseHeaders } : downstreamHeaders(upstreamHeaders, request.corsCovered)),
      answered: () => answered(target.name),
      // Never resent: a retried POST could run twice.
      failed: (error) => upstreamFailed(request, reply, target.name, error),
    });
  };
  // Not an async handler: fastify would wait on the reply as a promise (an eos listener per
  // request); the reply is answered by the relay, or by sendError, or by the error handler here.
  const handler = (request: FastifyRequest, reply: FastifyReply): void => {
    proxy(request, reply).catch((err: unknown) => reply.send(err));
  };

  // Every other method Node parses reaches the handler too, for the 405 (or 404) of the contract
  // rather than a bare not-found.
  acceptEveryMethod(app);
  app.route({ method: app.supportedMethods, url: '/*', handler });

  function deny(request: FastifyRequest, reply: FastifyReply, route: string | undefined, denial: Denial): void {
    // 400 and 404 name no route and decide nothing: not worth a line each at info.
    if (route) denials.denied(request.log, route, denial.code);
    sendDenial(reply, denial);
  }

  function upstreamFailed(request: FastifyRequest, reply: FastifyReply, upstream: string, error: unknown): void {
    const chain = causes(error);
    // A chunked body that outgrew bodyLimit fails the upstream request from our side.
    if (chain.some((e) => e.code === BODY_TOO_LARGE)) {
      request.log.info({ upstream }, 'request body over the limit');
      if (!reply.sent) sendError(reply, 'payloadTooLarge');
      else reply.raw.destroy();
      return;
    }
    // The client closed or broke its connection mid-request, which cut the upstream request on our
    // side: nobody to answer, and no upstream fault to count (operators alert on that metric).
    if (request.raw.socket?.destroyed || chain.some((e) => e.code === CLIENT_GONE)) {
      request.log.info({ upstream }, 'client went away before the response');
      reply.raw.destroy();
      return;
    }
    // undici refused to build the request from what it was given: the client's input, not the upstream.
    if (chain.some((e) => e.code === 'UND_ERR_INVALID_ARG')) {
      request.log.warn({ upstream, err: error }, 'request refused by the HTTP client: not forwarded');
      if (!reply.sent) sendError(reply, 'badRequest');
      else reply.raw.destroy();
      return;
    }
    // undici's UND_ERR_HEADERS_TIMEOUT, UND_ERR_BODY_TIMEOUT and UND_ERR_CONNECT_TIMEOUT.
    const timedOut = chain.some((e) => /TIMEOUT/.test(e.code ?? ''));
    const code = chain.map((e) => e.code).filter(Boolean).at(-1);
    failing.add(upstream);
    // The innermost cause (undici's error, or the body stream's that ended the request).
    failureLogFor(upstream).failed(chain.at(-1) ?? error, { reqId: request.id, code, timedOut });
    deps.upstreamErrors.inc({ upstream, kind: timedOut ? 'timeout' : 'unavailable' });
    if (reply.sent) {
      // Headers already went out: all that is left is to cut the response short.
      reply.raw.destroy();
      return;
    }
    sendError(reply, timedOut ? 'upstreamTimeout' : 'upstreamUnavailable');
  }
}

/**
 * Methods the public listener `app` serves itself on a path (its own endpoints), if any: what the
 * pipeline needs to keep them from routes (DecideOptions.ownMethods), here and on the decisions
 * listener, and what CORS (cors.ts) and WebSocket upgrades (websocket.ts) tell apart from routes.
 * Call it once per listener: it keeps its answers.
 */
export function ownEndpointMethods(app: FastifyInstance): (path: string) => readonly string[] {
  // Seven router lookups cost a few microseconds; proxied paths repeat, so their answers are kept.
  const ownMethodsByPath = new LRUCache<string, readonly string[]>({ max: OWN_PATHS_CACHE_SIZE });
  return (path) => {
    let methods = ownMethodsByPath.get(path);
    if (methods === undefined) {
      methods = HTTP_METHODS.filter((method) => {
        const found = app.findRoute({ method, url: path });
        // Everything else lands on the proxy's catch-all, whose match carries the `*` parameter.
        return found !== null && !('*' in (found.params as Record<string, unknown>));
      });
      if (path.length <= OWN_PATHS_CACHED_LENGTH) ownMethodsByPath.set(path, methods.length ? methods : NONE);
    }
    return methods;
  };
}

/** The error and its causes (undici may wrap the error of the body stream that ended the request). */
function causes(error: unknown): Array<{ code?: string }> {
  const out: Array<{ code?: string }> = [];
  let e = error as { code?: string; cause?: unknown } | undefined;
  while (e && typeof e === 'object' && out.length < 5) {
    out.push(e);
    e = e.cause as typeof e;
  }
  return out;
}

/** A body follows the headers (RFC 9112 §6.3): a chunked one, or a non-zero Content-Length. */
function hasBody(request: FastifyRequest): boolean {
  // HTTP/2 frames bodies itself: a request without one ends with its HEADERS frame.
  if (request.raw.httpVersionMajor === 2) return !(request.raw as unknown as Http2ServerRequest).stream.endAfterHeaders;
  const length = request.headers['content-length'];
  return request.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}
