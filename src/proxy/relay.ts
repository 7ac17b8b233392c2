// One proxied request, relayed between Node's request and response and undici's dispatcher: the
// upstream's answer is written to the client as it arrives, with no stream in between. Through
// @fastify/reply-from each response became a Readable (undici's request API) piped into the
// reply, with the listeners, ticks and eos bookkeeping that go with it: about a third of the
// proxy's CPU per request (`npm run bench`, the raw @fastify/http-proxy baseline pays it too).
// What is relayed is decided elsewhere: the headers by headers.ts, the body's size by
// bodyLimit.ts, what a failure answers by upstreamFailures.ts.
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import type { Http2ServerResponse } from 'node:http2';
import type { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import type { ProxiedReply } from './exchange.js';


/** What the upstream is asked for. */
export interface UpstreamRequest {
  origin: string;
  /** Path and query, as the upstream receives them. */
  path: string;
  method: string;
  headers: IncomingHttpHeaders;
  /** For the upstream's headers, then between two chunks of its body (ms). */
  timeout: number;
}

export interface RelayCallbacks {
  /** The client's response headers: `into` (the headers the gateway set, a fresh object) with the upstream's written into it. */
  responseHeaders(into: Record<string, unknown>, upstream: Record<string, string | string[] | undefined>): Record<string, unknown>;
  /** The upstream answered (its status line and headers arrived). */
  answered(statusCode: number): void;
  /** The upstream request failed, before or after the client got headers (reply.sent tells). */
  failed(error: Error): void;
}

/** An answer undici parsed but Node cannot pass on (a status outside 100–599). */
export const UNUSABLE_ANSWER = 'GW_UPSTREAM_UNUSABLE_ANSWER';
/** The client's connection closed before the upstream's answer was through. */
export const CLIENT_GONE = 'GW_CLIENT_GONE';

/**
 * Sends `request`, with `body` (the request body as it streams in, bodyLimit.ts, or null), through
 * `dispatcher` and relays the answer on `reply`, which it takes over once the upstream answers.
 */
export function relay(dispatcher: Dispatcher, reply: ProxiedReply, request: UpstreamRequest, body: Readable | null, callbacks: RelayCallbacks): void {
  const handler = new Relay(reply, callbacks);
  dispatcher.dispatch({
    origin: request.origin,
    path: request.path,
    method: request.method as Dispatcher.HttpMethod,
    headers: request.headers as Record<string, string | string[]>,
    body,
    headersTimeout: request.timeout,
    bodyTimeout: request.timeout,
  }, handler);
}

class Relay implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | undefined;
  private clientLeft: boolean;
  private draining = false;
  /** The upstream's answer went out whole: a close after it is the connection's, not a departure. */
  private relayed = false;

  constructor(private readonly reply: ProxiedReply, private readonly callbacks: RelayCallbacks) {
    // A client that leaves stops the upstream request at once, whatever stage it is at.
    this.clientLeft = isClosed(reply.raw);
    if (!this.clientLeft) reply.raw.on('close', this.clientClosed);
  }

  // Not `writableEnded`: the gateway may have answered the client itself while the upstream request
  // still waits (a malformed chunk in the body: the catalog's 400, then the connection goes), and
  // that request must end too, or it holds the upstream (and a shutdown) until its timeout.
  private readonly clientClosed = (): void => {
    if (this.relayed) return;
    this.clientLeft = true;
    this.controller?.abort(clientGone());
  };

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.clientLeft) controller.abort(clientGone());
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: Record<string, string | string[] | undefined>): void {
    const { reply } = this;
    const res = reply.raw;
    if (statusCode > 599) {
      controller.abort(Object.assign(new Error(`upstream answered status ${statusCode}`), { code: UNUSABLE_ANSWER }));
      return;
    }
    this.callbacks.answered(statusCode);
    // The headers the gateway set (x-request-id, CORS, Connection while draining), then the upstream's.
    const out = this.callbacks.responseHeaders(reply.getHeaders(), headers);
    const req = reply.request.raw;
    // An HTTP/1.1 connection whose request body was not read to its end cannot carry another request.
    if (req.httpVersionMajor === 1 && !req.complete) out.connection = 'close';
    try {
      res.writeHead(statusCode, out as Record<string, string | string[]>);
    } catch (err) {
      // A header value Node refuses to write: nothing went out, and the gateway answers instead,
      // without what the refused call had already set.
      for (const name of res.getHeaderNames()) res.removeHeader(name);
      controller.abort(Object.assign(err as Error, { code: UNUSABLE_ANSWER }));
      return;
    }
    // From here on the response is the relay's: fastify sends nothing more on it.
    reply.hijack();
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.reply.raw.write(chunk)) return;
    // The client reads slower than the upstream sends: hold the upstream until it catches up.
    controller.pause();
    if (this.draining) return;
    this.draining = true;
    this.reply.raw.on('drain', () => this.controller?.resume());
  }

  onResponseEnd(): void {
    this.relayed = true;
    this.reply.raw.end();
    this.reply.relayed?.();
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.callbacks.failed(error);
  }
}

/** Whether the client's side of the exchange is already closed (HTTP/2: its stream). */
function isClosed(res: ServerResponse): boolean {
  return res.destroyed ?? (res as unknown as Http2ServerResponse).stream?.destroyed ?? false;
}

function clientGone(): Error {
  return Object.assign(new Error('the client closed its connection'), { code: CLIENT_GONE });
}

// ── the upstream URL ─────────────────────────────────────────────────────────────────────────
// Characters the URL parser leaves as they are in a path: a path of these alone is sent as the
// client wrote it (after normalizePath), without parsing the URL on every request.
const PLAIN_PATH = /^[A-Za-z0-9\-._~!$&'()*+,;=:@/]*$/;
const BASES_KEPT = 1_000;
// Paths repeat (the request's context reads each once: live/requestContext.ts), and so does the
// upstream target a plain one gives: kept per base, up to this many, then started again (issue 77).
const TARGETS_KEPT = 10_000;
type PlainBase = { origin: string; path: string; targets: Map<string, { origin: string; path: string }> };
const bases = new Map<string, PlainBase | null>();

/**
 * Where a route's upstream is asked for `path`: the origin, and the upstream's base path with
 * `path` after it, in the form the WHATWG URL parser gives (as @fastify/reply-from built it).
 * Undefined when it cannot be a request path: malformed percent-encoding, or `..` in a segment
 * once decoded, which reply-from refused too (the client gets 400). The same object for the same
 * base and plain path: never changed by its callers.
 */
export function upstreamTarget(base: string, path: string): { origin: string; path: string } | undefined {
  const plainBase = plainBaseOf(base);
  const kept = plainBase?.targets.get(path);
  if (kept) return kept;
  // A dot segment (`/.`, `/..`) is resolved by the parser, or refused: never shortcut.
  if (plainBase && path.startsWith('/') && PLAIN_PATH.test(path) && !path.includes('/.') && !path.includes('../')) {
    const target = { origin: plainBase.origin, path: plainBase.path + path };
    if (plainBase.targets.size >= TARGETS_KEPT) plainBase.targets.clear();
    plainBase.targets.set(path, target);
    return target;
  }
  const source = base + path;
  try {
    const decoded = decodeURIComponent(source);
    if (decoded.includes('/..') || decoded.includes('../')) return undefined;
    const url = new URL(source);
    return { origin: url.origin, path: url.pathname };
  } catch {
    return undefined;
  }
}

/** `base` (an upstream's configured URL) as origin and path, when it is already in the parser's form. */
function plainBaseOf(base: string): PlainBase | null {
  let plain = bases.get(base);
  if (plain === undefined) {
    plain = null;
    try {
      const url = new URL(base);
      const path = url.pathname === '/' ? '' : url.pathname;
      if (!url.search && !url.hash && !base.includes('%') && !base.includes('..') && base === url.origin + path) plain = { origin: url.origin, path, targets: new Map() };
    } catch { /* not a URL: the slow path refuses it */ }
    if (bases.size >= BASES_KEPT) bases.clear();
    bases.set(base, plain);
  }
  return plain;
}
