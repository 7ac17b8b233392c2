// Every request that is not one of the gateway's own endpoints: match a route, run its guards
// (auth → plan → daily), then stream it to the upstream through undici's pooled keep-alive agent.
import { METHODS } from 'node:http';
import { finished, Transform, type TransformCallback } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import replyFrom from '@fastify/reply-from';
import { LRUCache } from 'lru-cache';
import { HTTP_METHODS } from '../config/schema.js';
import { sendDenial, sendError, type Denial } from '../errors.js';
import { authenticate, bearerToken, type AuthResult } from '../guards/authenticate.js';
import { headerValue } from '../http.js';
import { checkPlan } from '../guards/plan.js';
import type { Services } from '../services.js';
import { downstreamHeaders, upstreamHeaders, type ForwardContext } from './headers.js';
import { normalizePath } from './routeTable.js';

const OWN_PATHS_CACHE_SIZE = 10_000;
// Own endpoints' paths are short; a longer path is looked up each time rather than kept, or a client
// sending distinct paths of 16 kB (the most Node takes) would pin 10,000 of them, ~160 MB.
const OWN_PATHS_CACHED_LENGTH = 256;
// Headers by which frameworks let a request run as another method than its request line's:
// Symfony and Laravel read X-HTTP-Method-Override, Express's method-override too, ASP.NET and
// OData X-HTTP-Method. With `_` read as `-`, as for identity headers (CONTRACT §3).
const METHOD_OVERRIDE_HEADERS = new Set(['x-http-method-override', 'x-http-method', 'x-method-override']);
// A JWS compact serialization, which is what a gateway token looks like wherever it sits in a header.
const JWS = /[\w-]+\.[\w-]+\.[\w-]+/g;
const JWS_CANDIDATES = 4;
const NONE: readonly string[] = [];

export async function proxyRoutes(app: FastifyInstance, opts: { services: Services }): Promise<void> {
  const { services } = opts;

  await app.register(replyFrom, {
    undici: { connections: 128, pipelining: 1, keepAliveTimeout: 30_000 },
    // The gateway logs each request once itself; reply-from's own lines would double them.
    disableRequestLogging: true,
  });

  // Bodies are streamed to the upstream untouched, never parsed; only their size is checked.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (request, payload, done) => {
    const bodyLimit = services.config.server.bodyLimit;
    const declared = Number(request.headers['content-length']);
    if (declared > bodyLimit) {
      done(bodyTooLarge(), undefined);
      return;
    }
    if (Number.isFinite(declared)) {
      done(null, payload);
      return;
    }
    const limited = sizeLimit(bodyLimit);
    // pipe() does not pass an abort on: a client gone mid-body must end the upstream request too.
    finished(payload, (err) => { if (err) limited.destroy(err); });
    done(null, payload.pipe(limited));
  });

  const handler = async (request: FastifyRequest, reply: FastifyReply) => {
    // request.url is already normalized (canonicalUrl in app.ts); undefined: it could not be.
    const path = normalizePath(request.url.split('?', 1)[0]!);
    if (path === undefined) return sendError(reply, 'badRequest');
    // The gateway's own paths never reach an upstream, whatever the route table says: another
    // method on /api/v1/auth/login is a 405 here, not a request to the application behind.
    const own = ownMethods(path);
    if (own.length) {
      reply.header('allow', own.join(', '));
      return deny(request, reply, 'own', { code: 'methodNotAllowed' });
    }
    const routes = services.routes; // one table for the whole request, even across a reload
    const match = routes.match(request.method, path);
    if (match.kind === 'none') return sendError(reply, 'routeNotFound');
    const route = match.route;
    request.gatewayRoute = route.path;
    // A POST carrying `X-HTTP-Method-Override: DELETE` (or `?_method=DELETE`) runs as a DELETE in
    // the upstream: it gets the 405 a DELETE gets, or `methods` would restrict nothing.
    if (match.kind === 'method-not-allowed' || overridingMethods(request).some((method) => !route.allowedMethods.has(method))) {
      reply.header('allow', [...route.allowedMethods].join(', '));
      return deny(request, reply, route.path, { code: 'methodNotAllowed' });
    }

    // auth → plan → daily, each only when the route asks for it (STYLE: the one-way flow).
    const bearer = bearerToken(request.headers);
    let auth: AuthResult = { kind: 'anonymous' };
    if (route.auth !== 'none') {
      auth = await authenticate(request.headers, services, bearer);
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
    // routes it belongs to the upstream unless it is one of ours: an access token, valid or
    // expired, or a refresh token sent by mistake (a 30-day credential). Sent by mistake without
    // `Bearer ` or under another scheme, it is still ours: the upstream could replay it here.
    const authorization = bearer === undefined ? headerValue(request.headers, 'authorization') : '';
    const dropAuthorization = bearer !== undefined
      ? auth.kind === 'authenticated' || (await services.tokens.isOwn(bearer))
      : authorization.includes('.') && (await carriesOwnToken(authorization));
    const xff = request.headers['x-forwarded-for'];
    const socketAddress = request.socket.remoteAddress ?? '';
    const context: ForwardContext = {
      requestId: request.id,
      forwardedFor: services.config.server.trustProxy && xff ? `${String(xff)}, ${socketAddress}` : socketAddress,
      proto: request.protocol,
      host: request.host || undefined,
      identity: auth.kind === 'authenticated' ? { user: auth.user, method: auth.method } : undefined,
      dropAuthorization,
      trustProxy: services.config.server.trustProxy,
      extra: auth.kind === 'authenticated' && route.target.assertion && services.assertions
        ? await services.assertions.headerFor(auth.user, auth.method, route.upstreamName)
        : undefined,
    };

    services.metrics.tallies.decided(route.path, 'allowed');
    request.log.debug({ route: route.path, upstream: route.upstreamName, userId: user?.id }, 'proxying');
    try {
      return reply.from(`${route.target.url}${match.upstreamPath}`, {
        timeout: route.target.timeout,
        // reply-from's copy: Host already set to the upstream's, Connection and the headers it
        // names already gone (so `Connection: x-user-id` cannot remove what we add next).
        rewriteRequestHeaders: (_request, base) => upstreamHeaders(base, context),
        rewriteHeaders: (headers) => downstreamHeaders(headers),
        // Never resend: a retried POST could run twice, and a 503 is the upstream's answer to pass on.
        retryDelay: () => null,
        onError: (replyOnError, { error }) => upstreamFailed(request, replyOnError as FastifyReply, route.upstreamName, error),
      });
    } catch (err) {
      // reply-from refuses paths it cannot build (malformed percent-encoding).
      request.log.info({ err }, 'path refused by the proxy');
      return sendError(reply, 'badRequest');
    }
  };

  // Every other method Node parses reaches the handler too, for the 405 (or 404) of the contract
  // rather than a bare not-found. CONNECT never reaches fastify: Node hands it to 'connect'.
  for (const method of METHODS) {
    if (method !== 'CONNECT' && !app.supportedMethods.includes(method)) app.addHttpMethod(method);
  }
  app.route({ method: app.supportedMethods, url: '/*', handler });

  // Seven router lookups cost a few microseconds; proxied paths repeat, so their answers are kept.
  const ownMethodsByPath = new LRUCache<string, readonly string[]>({ max: OWN_PATHS_CACHE_SIZE });

  /** Methods the gateway itself serves on this path (its own endpoints), if any. */
  function ownMethods(path: string): readonly string[] {
    let methods = ownMethodsByPath.get(path);
    if (methods === undefined) {
      methods = HTTP_METHODS.filter((method) => {
        const found = app.findRoute({ method, url: path });
        // Everything else lands on this catch-all, whose match carries the `*` parameter.
        return found !== null && !('*' in (found.params as Record<string, unknown>));
      });
      if (path.length <= OWN_PATHS_CACHED_LENGTH) ownMethodsByPath.set(path, methods.length ? methods : NONE);
    }
    return methods;
  }

  /** Whether an Authorization value the Bearer syntax does not read still carries a token of ours. */
  async function carriesOwnToken(value: string): Promise<boolean> {
    // A few candidates only: a header full of dotted junk must not cost a signature check each.
    for (const candidate of (value.match(JWS) ?? []).slice(0, JWS_CANDIDATES)) {
      if (await services.tokens.isOwn(candidate)) return true;
    }
    return false;
  }

  function deny(request: FastifyRequest, reply: FastifyReply, routePath: string, denial: Denial): FastifyReply {
    request.log.info({ route: routePath, reason: denial.code }, 'request denied');
    services.metrics.tallies.decided(routePath, denial.code);
    return sendDenial(reply, denial);
  }

  function upstreamFailed(request: FastifyRequest, reply: FastifyReply, upstream: string, error: unknown): void {
    const chain = causes(error);
    // A chunked body that outgrew bodyLimit fails the upstream request from our side.
    if (chain.some((e) => e.code === 'FST_ERR_CTP_BODY_TOO_LARGE')) {
      request.log.info({ upstream }, 'request body over the limit');
      if (!reply.sent) sendError(reply, 'payloadTooLarge');
      else reply.raw.destroy();
      return;
    }
    // The client closed or broke its connection mid-request, which cut the upstream request on our
    // side: nobody to answer, and no upstream fault to count (operators alert on that metric).
    if (request.raw.socket?.destroyed) {
      request.log.info({ upstream }, 'client went away before the response');
      reply.raw.destroy();
      return;
    }
    const timedOut = chain.some((e) => e.statusCode === 504 || /TIMEOUT/.test(e.code ?? ''));
    const code = chain.map((e) => e.code).filter(Boolean).at(-1);
    request.log.warn({ upstream, code, timedOut }, 'upstream failed');
    services.metrics.upstreamErrors.inc({ upstream, kind: timedOut ? 'timeout' : 'unavailable' });
    if (reply.sent) {
      // Headers already went out: all that is left is to cut the response short.
      reply.raw.destroy();
      return;
    }
    sendError(reply, timedOut ? 'upstreamTimeout' : 'upstreamUnavailable');
  }
}

/**
 * The methods a request asks the upstream to run instead of its own (METHOD_OVERRIDE_HEADERS, and
 * the `_method` query parameter of Laravel, Symfony and Express's method-override), upper-cased.
 */
function overridingMethods(request: FastifyRequest): string[] {
  const found: string[] = [];
  for (const name in request.headers) {
    if (name.charCodeAt(0) !== 0x78 || !METHOD_OVERRIDE_HEADERS.has(name.replace(/_/g, '-'))) continue;
    found.push(...String(request.headers[name]).split(','));
  }
  const q = request.url.indexOf('?');
  const query = q === -1 ? '' : request.url.slice(q + 1);
  // `%5Fmethod` is `_method` once decoded, and PHP reads `.method` or ` method` as `_method` too.
  if (/method|%/i.test(query)) {
    for (const [key, value] of new URLSearchParams(query)) {
      if (key.replace(/[. []/g, '_') === '_method') found.push(value);
    }
  }
  return found.map((method) => method.trim().toUpperCase()).filter(Boolean);
}

/** The error and its causes (reply-from wraps undici's errors, which wrap ours). */
function causes(error: unknown): Array<{ code?: string; statusCode?: number }> {
  const out: Array<{ code?: string; statusCode?: number }> = [];
  let e = error as { code?: string; statusCode?: number; cause?: unknown } | undefined;
  while (e && typeof e === 'object' && out.length < 5) {
    out.push(e);
    e = e.cause as typeof e;
  }
  return out;
}

function bodyTooLarge(): Error {
  return Object.assign(new Error('body too large'), { statusCode: 413, code: 'FST_ERR_CTP_BODY_TOO_LARGE' });
}

/** Counts a chunked body as it streams and fails it past the limit (no Content-Length to check). */
function sizeLimit(limit: number): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback) {
      seen += chunk.length;
      if (seen > limit) callback(bodyTooLarge());
      else callback(null, chunk);
    },
  });
}
