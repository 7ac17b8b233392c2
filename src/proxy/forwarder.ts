// The proxy: every request that is not one of the gateway's own endpoints is decided by the
// pipeline (pipeline/pipeline.ts) and, when allowed, forwarded to its upstream. Forwarding is three
// named steps: plan() (pure: the upstream request or WebSocket target a decision gives), send()
// (the relay through undici's pooled keep-alive agent, relay.ts, or the upgrade, websocket.ts), and
// the upstream failure table (upstreamFailures.ts: the answer, metric and log of each failure).
// Deciding is the pipeline's, the size of bodies bodyLimit.ts's, which headers go where headers.ts's.
import type { IncomingHttpHeaders } from 'node:http';
import type { Http2ServerRequest } from 'node:http2';
import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import type { Dispatcher } from 'undici';
import { sendDenial, sendError, type Denial, type ErrorCode } from '../errors/index.js';
import { DenialLog, failureLog, type FailureLog } from '../telemetry/logThrottle.js';
import type { Metrics } from '../telemetry/metrics.js';
import { traceDecision, type CountedUse, type Decision, type Pipeline, type UpstreamOutcome, type UseRefunds } from '../pipeline/index.js';
import type { RequestContext } from '../live/requestContext.js';
import { streamBodiesWithin } from './bodyLimit.js';
import { endRequestTrace } from '../telemetry/requestSpans.js';
import { SpanKind, STATUS_ERROR, type GatewaySpan } from '../telemetry/spans.js';
import { answerHeaders, upstreamHeaders, type ForwardContext } from './headers.js';
import { findOwnCredentials, type CredentialChecks, type OwnCredentials } from './ownTokens.js';
import { acceptEveryMethod } from './methods.js';
import { relay, UNUSABLE_ANSWER, upstreamTarget, type RelayCallbacks, type UpstreamRequest } from './relay.js';
import { handedOff } from './directLane.js';
import type { ProxiedReply, ProxiedRequest } from './exchange.js';
import { causes, classifyUpstreamFailure, UPSTREAM_FAILURES } from './upstreamFailures.js';
import { upstreamAgent } from './upstreamTls.js';
import { handshakeDenial, handshakeless, upgradeHeaders, withoutAccessToken, type WebSocketTarget, type WebSockets } from './websocket.js';

/** The undici pool to upstreams; bench/ gives its raw baseline proxy the same. */
export const UPSTREAM_POOL = { connections: 128, pipelining: 1, keepAliveTimeout: 30_000 } as const;

type Allowed = Decision & { kind: 'allow' };

/** What plan() reads of a request: its context and headers, and what the connection says. */
export interface PlanInput {
  context: RequestContext;
  headers: IncomingHttpHeaders;
  requestId: string;
  /** The client's address on this connection. */
  socketAddress: string;
  protocol: string;
  host: string | undefined;
  /** A WebSocket upgrade on a route that takes them. */
  websocket: boolean;
  /** The query to forward, before the gateway's credentials are taken out of it (an upgrade's access_token already is). */
  query: string | undefined;
  /** Where the request carries a credential of the gateway's (ownTokens.ts). */
  own: OwnCredentials;
  /** server.trustProxy. */
  trustProxy: boolean;
  /** organizations.enabled (CONTRACT §22). */
  organizations?: boolean;
}

export type ForwardPlan =
  | { kind: 'relay'; upstream: string; request: UpstreamRequest }
  | { kind: 'websocket'; upstream: string; target: WebSocketTarget }
  /** A path no request can carry (malformed percent-encoding, a `..` segment once decoded): 400. */
  | { kind: 'refused'; upstream: string };

/** The upstream request (or WebSocket target) an allowed decision gives. Pure. */
export function plan(input: PlanInput, decision: Allowed): ForwardPlan {
  const { route, auth } = decision;
  const target = route.target!; // decide() with forwarding never allows a route without one
  const { own } = input;
  const xff = input.headers['x-forwarded-for'];
  const context: ForwardContext = {
    requestId: input.requestId,
    forwardedFor: input.trustProxy && xff ? `${String(xff)}, ${input.socketAddress}` : input.socketAddress,
    proto: input.protocol,
    host: input.host,
    identity: decision.identity,
    dropAuthorization: own.authorization,
    cookie: own.cookie,
    carryingCredentials: own.headers,
    trustProxy: input.trustProxy,
    organizations: input.organizations,
  };
  if (input.websocket) {
    const query = own.query ?? input.query ?? '';
    return {
      kind: 'websocket',
      upstream: target.name,
      target: {
        url: `${target.url}${decision.upstreamPath}${query ? `?${query}` : ''}`,
        headers: upstreamHeaders(handshakeless(input.headers), context),
        responseHeaders: decision.responseHeaders,
        timeout: target.timeout,
        tls: input.context.live.upstreamTls.get(new URL(target.url).origin),
        standing: {
          route: route.path, plans: route.plans, userId: auth.kind === 'authenticated' ? auth.user.id : undefined, keyHash: auth.kind === 'authenticated' ? auth.keyHash : undefined,
          // CONTRACT §22: a socket acting for an organization is read again when its membership changes.
          ...(decision.org && auth.kind === 'authenticated' ? { org: { id: decision.org.id, roles: route.roles, keyRole: auth.orgKey?.role } } : {}),
        },
      },
    };
  }
  const upstream = upstreamTarget(target.url, decision.upstreamPath);
  if (!upstream) return { kind: 'refused', upstream: target.name };
  // The query as the client sent it, or without the pairs that carried a gateway credential.
  const search = own.query !== undefined ? (own.query ? `?${own.query}` : '') : input.query === undefined ? '' : `?${input.query}`;
  // No Host here: undici writes the origin's (`host: <hostname>[:port]`, as the origin spells it), and
  // one given costs a header check and a server-name parse on every request (issue 77).
  const headers = upstreamHeaders(input.headers, context);
  return {
    kind: 'relay',
    upstream: target.name,
    request: { origin: upstream.origin, path: upstream.path + search, method: input.context.method, headers, timeout: target.timeout },
  };
}

export interface ForwarderDeps {
  pipeline: Pick<Pipeline, 'decide'>;
  /** Tells the gateway's own credentials, which never reach an upstream. */
  credentials: CredentialChecks;
  websockets: WebSockets;
  upstreamErrors: Metrics['upstreamErrors'];
  /** Gives a counted use back when the upstream failed it (CONTRACT §23, plans.refundOn). */
  refunds?: Pick<UseRefunds, 'afterUpstream'>;
  /** Start-up settings (a reload does not change them). */
  server: { trustProxy: boolean; bodyLimit: number };
  /** organizations.enabled (a start-up setting). */
  organizations?: boolean;
  /** fastify's (a pino logger). */
  log: Logger;
}

/** The catch-all route every request for an upstream takes (fastify's url). */
export const FORWARDED_ROUTE = '/*';

export class Forwarder {
  private readonly agent: Dispatcher;
  // An upstream that is down fails every request routed to it: one line per interval and upstream,
  // with a count (issue 18), and one when it answers again. `failing` keeps that check off the
  // path of upstreams that answer.
  private readonly failureLogs = new Map<string, FailureLog>();
  private readonly failing = new Set<string>();
  private readonly denials = new DenialLog();

  constructor(private readonly deps: ForwarderDeps, upstreamTls: (origin: string) => ReturnType<Parameters<typeof upstreamAgent>[1]>) {
    this.agent = upstreamAgent(UPSTREAM_POOL, upstreamTls);
  }

  /** The catch-all route on `app` (every method Node parses, for the contract's 405 or 404), its bodies streamed within bodyLimit. */
  register(app: FastifyInstance): void {
    // Closed after the listener.
    app.addHook('onClose', () => this.agent.close());
    streamBodiesWithin(app, this.deps.server.bodyLimit);
    acceptEveryMethod(app);
    // Not an async handler: fastify would wait on the reply as a promise (an eos listener per
    // request); the reply is answered by the relay, or by sendError, or by the error handler here.
    // A throw before any promise is fastify's to answer, as any handler's.
    app.route({ method: app.supportedMethods, url: FORWARDED_ROUTE, handler: (request, reply) => void this.forward(request, reply)?.catch((err: unknown) => reply.send(err)) });
  }

  /**
   * PUBLIC_ORDER's steps after routing (listener/publicOrder.ts), one line each and in its order:
   * bodyless, upgrade, decide, forward. Every way out answers the client once. A promise only when
   * a step needed one: a request decided in memory is forwarded in the same tick, without the
   * promises an async function makes (issue 77); one decided later comes back here with its
   * `decided` decision, past the steps already taken.
   */
  forward(request: FastifyRequest, reply: FastifyReply, decided?: Decision): Promise<void> | undefined {
    // Decided already by the direct lane, which answers only what it allowed (directLane.ts).
    const handed = decided === undefined ? handedOff(request.raw) : undefined;
    if (handed) {
      if (handed.kind === 'failed') return Promise.reject(handed.error);
      decided = handed.decision;
    }
    const upgrade = this.deps.websockets.isUpgrade(request);
    if (decided === undefined) {
      // Node reads a GET's or HEAD's body, which fastify does not parse: the upstream would run
      // another request than the client sent (a search without its query). Refused instead.
      if ((request.method === 'GET' || request.method === 'HEAD') && hasBody(request)) return void sendError(reply, 'badRequest');
      if (upgrade && refusedHandshake(request, reply)) return undefined;
      const { context, trace } = request;
      const pending = this.deps.pipeline.decide({ context, headers: upgrade ? upgradeHeaders(request.headers, context.query) : request.headers, trace }, { forwarding: true });
      if (pending instanceof Promise) return pending.then((later) => this.forward(request, reply, later));
      decided = pending;
    }
    const decision = decided;
    traceDecision(request.trace, decision);
    if (decision.kind === 'deny') return void this.deny(request, reply, decision.route, decision.denial);
    return this.sendAllowed(request, reply, decision, upgrade);
  }

  /** An allowed request: its gateway credentials found (a promise only when a search was needed), then sent. */
  sendAllowed(request: ProxiedRequest, reply: ProxiedReply, decision: Allowed, upgrade = false): Promise<void> | undefined {
    request.gatewayRoute = decision.route.path;
    // An upgrade's access_token is a credential of the gateway's, never the upstream's, whoever signed it.
    const query = upgrade ? withoutAccessToken(request.context.query) : request.context.query;
    const { auth } = decision;
    const found = findOwnCredentials({ headers: request.headers, query, authorizationIsOwn: auth.kind === 'authenticated' && auth.method === 'bearer' }, this.deps.credentials);
    return found instanceof Promise ? found.then((own) => this.sendPlanned(request, reply, decision, upgrade, query, own)) : this.sendPlanned(request, reply, decision, upgrade, query, found);
  }

  /** Plans the upstream request (plan()), then sends it: relayed, upgraded, or refused. */
  private sendPlanned(request: ProxiedRequest, reply: ProxiedReply, decision: Allowed, upgrade: boolean, query: string | undefined, own: OwnCredentials): Promise<void> | undefined {
    const { auth } = decision;
    const planned = plan({
      context: request.context, headers: request.headers, requestId: request.id, socketAddress: request.socket.remoteAddress ?? '', protocol: request.protocol,
      host: request.host || undefined, websocket: upgrade && decision.route.websocket === true, query, own, trustProxy: this.deps.server.trustProxy, organizations: this.deps.organizations,
    }, decision);
    // Asked of the forwarder's logger: the direct lane makes a request's own (a pino child) only
    // for a line that is written, and a debug line at info would make one for every request.
    if (this.deps.log.isLevelEnabled('debug')) {
      request.log.debug({ route: decision.route.path, upstream: planned.upstream, userId: auth.kind === 'authenticated' ? auth.user.id : undefined }, 'proxying');
    }
    switch (planned.kind) {
      case 'refused':
        request.log.info({ upstream: planned.upstream }, 'path refused by the proxy');
        return void answerError(reply, 'badRequest');
      case 'websocket':
        // Only an upgrade plans a WebSocket, and upgrades come through fastify (forward()).
        return this.openSocket(request as FastifyRequest, reply as FastifyReply, planned.upstream, planned.target, this.refunder(request, decision.use));
      case 'relay': {
        const span = upstreamSpan(request, planned.upstream, planned.request.method, planned.request.headers);
        relay(this.agent, reply, planned.request, (request.body as Readable | undefined) ?? null, new RelayOutcome(this, request, reply, planned.upstream, span, decision));
        return undefined;
      }
    }
  }

  private async openSocket(request: FastifyRequest, reply: FastifyReply, upstream: string, target: WebSocketTarget, refund: (outcome: UpstreamOutcome) => Promise<unknown>): Promise<void> {
    // The handshake with the upstream is the upstream call: its span, and its traceparent.
    const span = upstreamSpan(request, upstream, 'GET', target.headers);
    const opened = await this.deps.websockets.open(request, reply, target);
    if (opened.kind === 'failed') {
      failedSpan(span, opened.error);
      this.failed(request, reply, upstream, opened.error, refund);
    } else {
      span?.end();
      // Opened: the client's 101 goes out on the socket, past fastify's onResponse.
      if (opened.kind === 'opened') endRequestTrace(request, 101);
      this.answered(upstream);
    }
  }

  private deny(request: FastifyRequest, reply: FastifyReply, route: string | undefined, denial: Denial): void {
    if (route) request.gatewayRoute = route;
    // 400 and 404 name no route and decide nothing: not worth a line each at info.
    if (route) this.denials.denied(request.log, route, denial.code);
    sendDenial(reply, denial);
  }

  /** @internal RelayOutcome's. */
  answered(upstream: string): void {
    if (this.failing.size === 0 || !this.failing.delete(upstream)) return;
    this.failureLogFor(upstream).recovered();
  }

  /**
   * The request's one chance at a refund (CONTRACT §23): the first outcome reported decides, later
   * ones (a failure after the answer started) change nothing. Resolves once the refund is written.
   */
  refunder(request: ProxiedRequest, use: CountedUse | undefined): (outcome: UpstreamOutcome) => Promise<unknown> {
    let pending = use;
    const refunds = this.deps.refunds;
    return async (outcome) => {
      if (!pending || !refunds) return;
      const counted = pending;
      pending = undefined;
      await refunds.afterUpstream(counted, request.context.live.settings.plans.refundOn, outcome);
    };
  }

  /** Applies the row of UPSTREAM_FAILURES the error falls under (and the refund it may give, before the answer). */
  /** @internal RelayOutcome's. */
  failed(request: ProxiedRequest, reply: ProxiedReply, upstream: string, error: unknown, refund?: (outcome: UpstreamOutcome) => Promise<unknown>): void {
    const kind = classifyUpstreamFailure(error, request.raw.socket?.destroyed === true);
    const handling = UPSTREAM_FAILURES[kind];
    if (handling.log === 'upstream') {
      const chain = causes(error);
      this.failing.add(upstream);
      // The innermost cause (undici's error, or the body stream's that ended the request).
      this.failureLogFor(upstream).failed(chain.at(-1) ?? error, { reqId: request.id, code: chain.map((e) => e.code).filter(Boolean).at(-1), timedOut: handling.metric === 'timeout' });
    } else if (handling.log.level === 'warn') request.log.warn({ upstream, err: error }, handling.log.message);
    else request.log.info({ upstream }, handling.log.message);
    if (handling.metric) this.deps.upstreamErrors.inc({ upstream, kind: handling.metric });
    // Headers already went out, or nobody is left to answer: all that is left is to cut the response short.
    if (reply.sent || handling.answer === undefined) reply.raw.destroy();
    else if (refund && (kind === 'timeout' || (kind === 'unavailable' && !causes(error).some((e) => e.code === UNUSABLE_ANSWER)))) {
      // Given back before the error goes out: a client retrying at once finds the use back.
      const answer = handling.answer;
      void refund({ failure: kind === 'timeout' ? 'timeout' : 'unreachable' }).finally(() => answerError(reply, answer));
    } else answerError(reply, handling.answer);
  }

  private failureLogFor(upstream: string): FailureLog {
    let log = this.failureLogs.get(upstream);
    if (!log) {
      log = failureLog(this.deps.log.child({ upstream }), 'upstream failed: its requests are answered 502 or 504', { recoveredMessage: 'upstream answers again' });
      this.failureLogs.set(upstream, log);
    }
    return log;
  }
}

/**
 * What a relayed request does with its upstream's answer (relay.ts's callbacks): one object a
 * request, its methods on the prototype, where an object of closures was four functions (issue 77).
 */
class RelayOutcome implements RelayCallbacks {
  /** The use still to refund (CONTRACT §23): the first outcome reported decides, later ones change nothing. */
  private use: CountedUse | undefined;

  constructor(
    private readonly forwarder: Forwarder, private readonly request: ProxiedRequest, private readonly reply: ProxiedReply,
    private readonly upstream: string, private readonly span: GatewaySpan | undefined, private readonly decision: Allowed,
  ) {
    this.use = decision.use;
  }

  // The gateway's RateLimit fields on a counted route, in place of any the upstream sent.
  responseHeaders(into: Record<string, unknown>, upstream: Record<string, string | string[] | undefined>): Record<string, unknown> {
    return answerHeaders(into, upstream, this.request.corsCovered, this.decision.responseHeaders);
  }

  answered(status: number): void {
    this.span?.end();
    this.forwarder.answered(this.upstream);
    // The answer is the upstream's and goes on at once; a refund for its status follows it.
    if (this.use) void this.refund({ status });
  }

  // Never resent: a retried POST could run twice.
  failed(error: Error): void {
    failedSpan(this.span, error);
    this.forwarder.failed(this.request, this.reply, this.upstream, error, (outcome) => this.refund(outcome));
  }

  private refund(outcome: UpstreamOutcome): Promise<unknown> {
    const counted = this.use;
    this.use = undefined;
    return this.forwarder.refunder(this.request, counted)(outcome);
  }
}

/** With tracing: the upstream call's span, whose traceparent (and tracestate) `headers`, bound upstream, now carry. */
function upstreamSpan(request: ProxiedRequest, upstream: string, method: string, headers: IncomingHttpHeaders): GatewaySpan | undefined {
  const span = request.trace?.start('upstream', { 'gateway.upstream': upstream, 'http.request.method': method }, SpanKind.CLIENT);
  if (span) request.trace!.inject(span, headers);
  return span;
}

function failedSpan(span: GatewaySpan | undefined, error: unknown): void {
  span?.setStatus({ code: STATUS_ERROR, message: (error as NodeJS.ErrnoException).code ?? 'upstream failed' }).end();
}

/** A catalog error on `reply`: sendError on fastify's, the direct lane's own on its. */
function answerError(reply: ProxiedReply, code: ErrorCode): void {
  if (reply.answerError) reply.answerError(code);
  else sendError(reply as FastifyReply, code);
}

/** A WebSocket upgrade whose handshake is malformed is answered here (400): true. */
function refusedHandshake(request: FastifyRequest, reply: FastifyReply): boolean {
  const malformed = handshakeDenial(request.headers);
  if (malformed) sendDenial(reply, malformed);
  return malformed !== undefined;
}

/** A body follows the headers (RFC 9112 §6.3): a chunked one, or a non-zero Content-Length. */
function hasBody(request: FastifyRequest): boolean {
  // HTTP/2 frames bodies itself: a request without one ends with its HEADERS frame.
  if (request.raw.httpVersionMajor === 2) return !(request.raw as unknown as Http2ServerRequest).stream.endAfterHeaders;
  const length = request.headers['content-length'];
  return request.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}
