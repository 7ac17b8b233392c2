// The direct lane (issue 77): a plain proxied request goes from Node's 'request' event to the
// pipeline and the relay without fastify's request, reply, hooks and router. Measured on
// 2026-12-01 (bench/profile.mjs, docs/benchmark.md): the contract's least run inside fastify (one
// catch-all route, an onRequest and an onResponse hook, the reply hijacked) served 0.75–0.78 of
// the requests a second it serves alone; the gateway's /public stood at 0.98 of that.
//
// It takes a request only where nothing before routing would answer or change it (plain()): HTTP/1,
// no body, no Origin (CORS), no Upgrade or Expect, a Host accepted, not draining, a path the gateway
// forwards (a route with an upstream, no own endpoint on it); app.ts does not attach it with tracing.
// Everything else is fastify's, as before. A request the lane decided but does not allow (a
// denial, storage away) is handed to fastify with what was decided (Forwarder.forward reads it),
// so it is answered as ever and nothing is decided or counted twice. An allowed one is forwarded
// here (Forwarder.sendAllowed), and its answer tallied and logged as fastify's onResponse and
// access line do (listener/basics.ts).
import type { IncomingHttpHeaders, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { FastifyBaseLogger } from 'fastify';
import type { Logger } from 'pino';
import { errorAnswer, type ErrorCode, type ErrorStyle } from '../errors/index.js';
import { refusesHost } from '../http.js';
import type { Decision, Pipeline } from '../pipeline/index.js';
import type { RequestContext, RequestContexts } from '../live/requestContext.js';
import { canonicalUrl } from '../routing/paths.js';
import { loggedRequest } from '../telemetry/logger.js';
import { requestId } from '../telemetry/requestSpans.js';
import type { ProxiedReply, ProxiedRequest } from './exchange.js';

/** The test seam of test/proxy/directLane.test.ts: `off` leaves every request to fastify; `taken` counts those the lane forwarded. */
export const directLane = { off: false, taken: 0 };

type Handed = { kind: 'decided'; decision: Decision } | { kind: 'failed'; error: unknown };
const HANDED = Symbol('gateway.handedOff');
type Held = IncomingMessage & { [HANDED]?: Handed };

/** What the lane decided for a request it then handed to fastify; taken once. */
export function handedOff(req: IncomingMessage): Handed | undefined {
  const handed = (req as Held)[HANDED];
  if (handed) (req as Held)[HANDED] = undefined;
  return handed;
}

export interface DirectLaneDeps {
  contexts: RequestContexts;
  pipeline: Pick<Pipeline, 'decide'>;
  /** Forwarder.sendAllowed (forwarder.ts). */
  forwarder: { sendAllowed(request: ProxiedRequest, reply: ProxiedReply, decision: Decision & { kind: 'allow' }): Promise<void> | undefined };
  lifecycle: { readonly draining: boolean };
  trustProxy: boolean;
  errorStyle: ErrorStyle;
  /** What the listener does with every answer (listener/basics.ts, registerCommon): metrics, storage recovered. */
  answered: (route: string, method: string, status: number, seconds: number) => void;
  log: Logger;
}

type Listener = (req: IncomingMessage, res: ServerResponse) => void;

/** Puts the lane in front of `server`'s one request listener, fastify's, which gets every request the lane does not take. */
export function attachDirectLane(server: Server, deps: DirectLaneDeps): void {
  const [fastify, ...others] = server.listeners('request') as Listener[];
  if (!fastify || others.length) throw new Error('the direct lane expects one request listener, fastify\'s');
  server.removeListener('request', fastify);
  const lane = new Lane(deps, fastify);
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if (!lane.take(req, res)) fastify(req, res);
  });
}

/** Nothing before routing would answer or change the request: see the file's head. */
function plain(req: IncomingMessage, h: IncomingHttpHeaders): boolean {
  const length = h['content-length'];
  return req.httpVersionMajor === 1 && h.origin === undefined && h.upgrade === undefined && h.expect === undefined
    && h['transfer-encoding'] === undefined && (length === undefined || length === '0');
}

/** A path the gateway forwards: a route with an upstream, and nothing of the gateway's own on it. */
function forwardable(context: RequestContext): boolean {
  return context.path !== undefined && context.own.length === 0 && !context.ownSpelling && context.match.kind === 'route' && context.match.route.target !== undefined;
}

class Lane {
  constructor(private readonly deps: DirectLaneDeps, private readonly fastify: Listener) {}

  /** Whether the lane took the request: it is then answered, here or by fastify with the lane's decision. */
  take(req: IncomingMessage, res: ServerResponse): boolean {
    // Node's headers are a getter that looks its object up on each call: read once here, and handed on.
    const headers = req.headers;
    if (directLane.off || !plain(req, headers) || this.deps.lifecycle.draining) return false;
    const context = this.deps.contexts.of(req);
    if (!forwardable(context) || refusesHost(req, headers)) return false;
    const decision = this.deps.pipeline.decide({ context, headers }, { forwarding: true });
    if (decision instanceof Promise) decision.then((later) => this.decided(req, res, headers, context, later), (error: unknown) => this.handOff(req, res, { kind: 'failed', error }));
    else this.decided(req, res, headers, context, decision);
    return true;
  }

  private decided(req: IncomingMessage, res: ServerResponse, headers: IncomingHttpHeaders, context: RequestContext, decision: Decision): void {
    if (decision.kind === 'deny') return this.handOff(req, res, { kind: 'decided', decision });
    directLane.taken++;
    const request = new DirectRequest(req, headers, context, this.deps);
    // A failed search for the gateway's credentials is fastify's to answer, as any thrown error.
    this.deps.forwarder.sendAllowed(request, new DirectReply(res, request, this.deps), decision)?.catch((error: unknown) => this.handOff(req, res, { kind: 'failed', error }));
  }

  private handOff(req: IncomingMessage, res: ServerResponse, handed: Handed): void {
    (req as Held)[HANDED] = handed;
    this.fastify(req, res);
  }
}

/** Fastify's last entry of a repeated forwarding header. */
function lastEntry(value: string | string[]): string {
  const text = String(value);
  const comma = text.lastIndexOf(',');
  return comma === -1 ? text.trim() : text.slice(comma + 1).trim();
}

/** The request as forwarding and the access line read it, with what fastify's request would give. */
class DirectRequest implements ProxiedRequest {
  readonly id: string;
  readonly socket: Socket;
  readonly trace = undefined;
  readonly corsCovered: boolean;
  readonly body = null;
  readonly startedAt = performance.now();
  gatewayRoute = '';
  private logger: FastifyBaseLogger | undefined;

  constructor(readonly raw: IncomingMessage, readonly headers: IncomingHttpHeaders, readonly context: RequestContext, private readonly deps: DirectLaneDeps) {
    this.id = requestId(headers['x-request-id']);
    this.socket = raw.socket;
    this.corsCovered = context.live.cors?.covering(context.match) !== undefined;
  }

  get method(): string {
    return this.context.method;
  }

  /** As fastify's rewriteUrl gives it (app.ts). */
  get url(): string {
    return canonicalUrl(this.raw.url ?? '/');
  }

  get protocol(): string {
    const forwarded = this.deps.trustProxy ? this.headers['x-forwarded-proto'] : undefined;
    if (forwarded) return lastEntry(forwarded);
    return (this.socket as Socket & { encrypted?: boolean }).encrypted ? 'https' : 'http';
  }

  get host(): string {
    const forwarded = this.deps.trustProxy ? this.headers['x-forwarded-host'] : undefined;
    return forwarded ? lastEntry(forwarded) : this.headers.host ?? '';
  }

  /** For the access line: the client, the first X-Forwarded-For entry behind a trusted proxy. */
  get ip(): string | undefined {
    const forwarded = this.deps.trustProxy ? this.headers['x-forwarded-for'] : undefined;
    return forwarded ? String(forwarded).split(',', 1)[0]!.trim() : this.socket.remoteAddress;
  }

  /** A child logger with the request id, made only when a line is written (telemetry/logger.ts). */
  get log(): FastifyBaseLogger {
    return (this.logger ??= this.deps.log.child({ reqId: this.id }) as unknown as FastifyBaseLogger);
  }
}

/** The client's side of a forwarded request: the relay writes it; what the gateway answers itself is written here. */
class DirectReply implements ProxiedReply {
  private taken = false;

  constructor(readonly raw: ServerResponse, readonly request: DirectRequest, private readonly deps: DirectLaneDeps) {}

  get sent(): boolean {
    return this.taken || this.raw.headersSent;
  }

  /** What the CORS step and the Host check put on every answer (listener/publicOrder.ts). */
  getHeaders(): Record<string, unknown> {
    return this.request.corsCovered ? { 'x-request-id': this.request.id, vary: 'Origin' } : { 'x-request-id': this.request.id };
  }

  hijack(): void {
    this.taken = true;
  }

  /**
   * Tallied as the relay ends the answer (and answerError as it answers), not on 'finish': a listener
   * of ours beside Node's own made the response's 'finish' an array, cloned on every emit, and a
   * property of ours on the response a second shape of it (issue 77). A response cut short is not tallied.
   */
  relayed(): void {
    this.tally();
  }

  /** The catalog's answer, as errors/index.ts's sendError gives it. */
  answerError(code: ErrorCode): void {
    const answer = errorAnswer(this.deps.errorStyle, this.request.headers, { code });
    const body = JSON.stringify(answer.body);
    const headers = this.getHeaders();
    headers.vary = headers.vary ? `${String(headers.vary)}, ${answer.vary}` : answer.vary;
    headers['content-type'] = answer.contentType;
    headers['content-length'] = Buffer.byteLength(body);
    this.raw.writeHead(answer.status, headers as Record<string, string>).end(body);
    this.tally();
  }

  /** Counted and logged as fastify's onResponse and access line do (listener/basics.ts). */
  private tally(): void {
    const { request, raw, deps } = this;
    const responseTime = performance.now() - request.startedAt;
    deps.answered(request.gatewayRoute, request.method, raw.statusCode, responseTime / 1000);
    if (deps.log.isLevelEnabled('debug')) request.log.debug({ req: loggedRequest(request), res: raw, responseTime }, 'request completed');
  }
}
