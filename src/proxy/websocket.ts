// WebSocket routes (CONTRACT §10). An upgrade on a `websocket: true` route is an ordinary request
// until its guards have passed: it goes through fastify's routing like any other (hooks, the Host
// rule, CORS, the proxy's handler, the pipeline, the catalog's denials), and only once the
// pipeline allows it is the upstream's WebSocket opened, with the headers any proxied request
// gets (headers.ts). The client's handshake is completed after the upstream's, so the upstream's
// refusal (its 403 or 404) reaches the client as an HTTP answer and its chosen subprotocol is the
// one the client gets. Then messages are relayed both ways, with backpressure, until either side
// closes; openSockets.ts closes the ones whose user no longer passes the route's guards.
//
// Not @fastify/http-proxy's WebSocket support: it is a proxy of its own, one fixed upstream per
// registration with its own routes, accepts the client before the upstream answers, and closes its
// sockets by patching server.close. `ws`, which it is built on, is used directly instead.
import { ServerResponse, type IncomingHttpHeaders, type IncomingMessage, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { TLSSocket } from 'node:tls';
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import WebSocket, { WebSocketServer, type RawData } from 'ws';
import type { Denial } from '../errors/index.js';
import type { RequestContexts } from '../live/requestContext.js';
import { downstreamHeaders } from './headers.js';
import { GOING_AWAY, type OpenSocket, type OpenSockets } from './openSockets.js';
import type { UpstreamTls } from '../live/upstreamTls.js';

// A relayed direction stops reading from its sender while this much is waiting to be written to
// its receiver, and reads again below half of it: a fast sender cannot fill the gateway's memory.
const HIGH_WATER_BYTES = 1024 * 1024;
const INTERNAL_ERROR = 1011;
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
// The Sec-WebSocket-* headers belong to one handshake: the upstream's is made by the client here.
// (Host is upstreamHeaders' to drop, as for every forwarded request: headers.ts.)
const HANDSHAKE_HEADERS = new Set(['sec-websocket-key', 'sec-websocket-version', 'sec-websocket-extensions', 'sec-websocket-protocol']);
// And in the answer: the client's 101 gets the ones of its own handshake, which ws writes.
const ANSWER_HANDSHAKE_HEADERS = new Set(['sec-websocket-accept', 'sec-websocket-extensions', 'sec-websocket-protocol']);

export interface WebSocketsDeps {
  sockets: OpenSockets;
  /** Messages from clients larger than this close the socket (1009): server.bodyLimit. */
  maxPayload: number;
  /** The public listener's request contexts: an upgrade is first seen here, before fastify's hooks. */
  contexts: Pick<RequestContexts, 'of'>;
}

/** Where an allowed upgrade goes, and what its socket's standing is checked against later. */
export interface WebSocketTarget {
  /** The upstream's http(s) URL: path after rewritePrefix, and the query to send. */
  url: string;
  /** What the upstream receives (upstreamHeaders of headers.ts, on handshakeless() headers). */
  headers: IncomingHttpHeaders;
  /** The gateway's own headers for the client's 101 (the RateLimit fields of a counted route). */
  responseHeaders: Record<string, string> | undefined;
  timeout: number;
  tls: UpstreamTls | undefined;
  standing: Pick<OpenSocket, 'route' | 'plans' | 'userId' | 'keyHash' | 'org'>;
}

export type Opened =
  | { kind: 'opened' }
  /** The upstream answered without upgrading: its answer went to the client. */
  | { kind: 'answered' }
  | { kind: 'failed'; error: unknown };

export class WebSockets {
  private readonly upgrades = new WeakMap<IncomingMessage, { socket: Duplex; head: Buffer }>();
  private readonly handshakes = new WeakMap<IncomingMessage, { protocol: string; headers: string[] }>();
  private readonly wss: WebSocketServer;
  private closing = false;

  constructor(private readonly deps: WebSocketsDeps) {
    this.wss = new WebSocketServer({
      noServer: true,
      clientTracking: false,
      // Compression costs CPU per message on both hops, and a compressed message can inflate to
      // far more than maxPayload checks on the wire.
      perMessageDeflate: false,
      maxPayload: deps.maxPayload,
      handleProtocols: (_offered, req) => this.handshakes.get(req)?.protocol || false,
    });
    this.wss.on('headers', (headers, req) => headers.push(...(this.handshakes.get(req)?.headers ?? [])));
  }

  /**
   * Has `server` hand upgrades to WebSocket routes to `routing` (fastify's) as requests whose
   * answer, if not the upgrade, ends the connection; every other upgrade request stays the plain
   * request it was before (an Upgrade a server may ignore, RFC 9110 §7.8).
   */
  attach(server: Server, routing: (req: IncomingMessage, res: ServerResponse) => void): void {
    const dispatch = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      this.upgrades.set(req, { socket, head });
      const res = new ServerResponse(req);
      res.shouldKeepAlive = false;
      res.assignSocket(socket as Socket);
      // Node no longer reads this connection as HTTP: after any answer but the upgrade, it ends.
      res.on('finish', () => socket.end());
      routing(req, res);
    };
    const withCallback = server as Server & { shouldUpgradeCallback?: (req: IncomingMessage) => boolean };
    if (typeof withCallback.shouldUpgradeCallback === 'function') {
      withCallback.shouldUpgradeCallback = (req) => this.wanted(req);
      server.on('upgrade', dispatch);
    } else {
      server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => (this.wanted(req) ? dispatch(req, socket, head) : replayAsPlainRequest(server, req, socket, head)));
    }
  }

  /** Whether the request is a WebSocket upgrade handed over by attach(). */
  isUpgrade(request: FastifyRequest): boolean {
    return this.upgrades.has(request.raw);
  }

  /** Opens the upstream's WebSocket, then completes the client's handshake and relays. */
  open(request: FastifyRequest, reply: FastifyReply, target: WebSocketTarget): Promise<Opened> {
    const { socket, head } = this.upgrades.get(request.raw)!;
    if (socket.destroyed) return Promise.resolve({ kind: 'failed', error: new Error('the client left during its upgrade') });
    return new Promise((resolve) => {
      let settled = false;
      const settle = (outcome: Opened) => {
        settled = true;
        socket.off('close', clientGone);
        resolve(outcome);
      };
      const upstream = new WebSocket(target.url.replace(/^http/, 'ws'), offeredProtocols(request.headers), {
        headers: target.headers as Record<string, string>,
        perMessageDeflate: false,
        handshakeTimeout: target.timeout,
        followRedirects: false,
        ...(target.tls && { secureContext: target.tls.secureContext, servername: target.tls.servername }),
      });
      // The client may leave while the upstream is being reached: then so does the upstream.
      const clientGone = () => upstream.terminate();
      socket.once('close', clientGone);
      // The upstream's 101 may carry headers of its own (a session cookie): the client's 101 gets
      // them, through the rules of any proxied response.
      let upstreamAnswer: IncomingHttpHeaders = {};
      upstream.once('upgrade', (res) => { upstreamAnswer = res.headers; });
      upstream.on('error', (error: Error) => {
        if (!settled) settle({ kind: 'failed', error: timedOut(error) });
        else request.log.debug({ err: error }, 'websocket: upstream error');
      });
      upstream.once('unexpected-response', (_req, res) => {
        settle({ kind: 'answered' });
        reply.raw.once('finish', () => upstream.terminate());
        void reply.code(res.statusCode ?? 502).headers(downstreamHeaders(res.headers, request.corsCovered)).send(res);
      });
      upstream.once('open', () => {
        settle({ kind: 'opened' });
        reply.hijack();
        if (socket.destroyed) return upstream.terminate();
        const headers = headerLines({ ...downstreamHeaders(answerHeaders(upstreamAnswer), request.corsCovered), 'x-request-id': request.id, ...target.responseHeaders });
        this.handshakes.set(request.raw, { protocol: upstream.protocol, headers });
        // A handshake ws refuses never calls back: the upstream must not outlive the client's socket.
        let accepted = false;
        socket.once('close', () => { if (!accepted) upstream.terminate(); });
        this.wss.handleUpgrade(request.raw, socket, head, (client) => {
          accepted = true;
          this.pair(client, upstream, target.standing, request.log);
        });
      });
    });
  }

  /** At shutdown: no new upgrades; every socket is closed with 1001 (going away). */
  async close(): Promise<void> {
    this.closing = true;
    await this.deps.sockets.closeAll(GOING_AWAY);
  }

  /** A GET asking for a WebSocket on a path whose route has `websocket: true`. */
  private wanted(req: IncomingMessage): boolean {
    if (this.closing || req.method !== 'GET' || req.headers.upgrade?.toLowerCase() !== 'websocket') return false;
    const { path, own, match } = this.deps.contexts.of(req);
    return path !== undefined && own.length === 0 && match.kind !== 'none' && match.route.websocket === true;
  }

  private pair(client: WebSocket, upstream: WebSocket, standing: WebSocketTarget['standing'], log: FastifyBaseLogger): void {
    relay(client, upstream);
    relay(upstream, client);
    let open = 2;
    let ended: () => void;
    const closed = new Promise<void>((resolve) => { ended = () => { if (--open === 0) resolve(); }; });
    client.once('close', (code, reason) => { closeWith(upstream, code, reason, GOING_AWAY); ended(); });
    upstream.once('close', (code, reason) => { closeWith(client, code, reason, INTERNAL_ERROR); ended(); });
    client.on('error', (err) => log.debug({ err }, 'websocket: client error'));
    this.deps.sockets.add({
      ...standing,
      closed,
      close: (code, reason) => client.close(code, reason),
      terminate: () => {
        client.terminate();
        upstream.terminate();
      },
    });
    const opened = Date.now();
    log.debug({ route: standing.route, userId: standing.userId, protocol: client.protocol || undefined }, 'websocket opened');
    void closed.then(() => log.debug({ route: standing.route, userId: standing.userId, ms: Date.now() - opened }, 'websocket closed'));
  }
}

/**
 * What is wrong with the client's side of the handshake (RFC 6455 §4.2.1), checked before the
 * guards so that a malformed one costs no daily use and opens nothing upstream.
 */
export function handshakeDenial(headers: IncomingHttpHeaders): Denial | undefined {
  const version = headers['sec-websocket-version'];
  // RFC 6455's version only: 8 is a draft's (hybi-08), which the ws library would still speak.
  if (version !== '13') return { code: 'badRequest', headers: { 'sec-websocket-version': '13' } };
  if (!/^[+/0-9A-Za-z]{22}==$/.test(String(headers['sec-websocket-key'] ?? ''))) return { code: 'badRequest' };
  const protocols = offeredProtocols(headers);
  if (protocols.some((p) => !TOKEN.test(p)) || new Set(protocols).size !== protocols.length) return { code: 'badRequest' };
  return undefined;
}

/** The upstream's 101 headers without its handshake's own. */
function answerHeaders(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = {};
  for (const name in headers) if (!ANSWER_HANDSHAKE_HEADERS.has(name)) out[name] = headers[name];
  return out;
}

/** Header lines for ws's 'headers' event, a line per value (Set-Cookie is never joined). */
function headerLines(headers: Record<string, string | string[] | undefined>): string[] {
  return Object.entries(headers).flatMap(([name, value]) => (value === undefined ? [] : Array.isArray(value) ? value : [value]).map((v) => `${name}: ${v}`));
}

/**
 * The client's headers without its handshake's own (the upstream's handshake is another). The
 * hop-by-hop ones, Connection and the headers it names, are upstreamHeaders' to drop.
 */
export function handshakeless(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = {};
  for (const name in headers) {
    if (!HANDSHAKE_HEADERS.has(name)) out[name] = headers[name];
  }
  return out;
}

/**
 * The headers as the pipeline reads them on an upgrade: browsers cannot set Authorization on a
 * WebSocket, so the access token may come as the `access_token` query parameter (RFC 6750 §2.3),
 * read as a bearer token when no Authorization header came. Upgrades only: anywhere else a token
 * in a URL ends up in logs and Referer headers, and the header is there to carry it.
 */
export function upgradeHeaders(headers: IncomingHttpHeaders, query: string | undefined): IncomingHttpHeaders {
  if (headers.authorization !== undefined || query === undefined) return headers;
  const token = new URLSearchParams(query).get('access_token') ?? undefined;
  return token === undefined ? headers : { ...headers, authorization: `Bearer ${token}` };
}

/** `query` without any `access_token` parameter (undefined when nothing is left): the gateway's credential, never the upstream's. */
export function withoutAccessToken(query: string | undefined): string | undefined {
  if (query === undefined || !query.includes('access_token')) return query;
  const kept = query.split('&').filter((pair) => safeDecode(pair.split('=', 1)[0]!) !== 'access_token');
  return kept.length ? kept.join('&') : undefined;
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return text;
  }
}

function offeredProtocols(headers: IncomingHttpHeaders): string[] {
  const offered = headers['sec-websocket-protocol'];
  return offered === undefined ? [] : String(offered).split(',').map((p) => p.trim()).filter(Boolean);
}

/** Relays messages from one socket to the other, pausing the sender while the receiver is behind. */
function relay(from: WebSocket, to: WebSocket): void {
  let queued = 0;
  from.on('message', (data: RawData, isBinary: boolean) => {
    if (to.readyState !== WebSocket.OPEN) return;
    const size = byteLength(data);
    queued += size;
    to.send(data, { binary: isBinary }, () => {
      queued -= size;
      if (from.isPaused && queued < HIGH_WATER_BYTES / 2) from.resume();
    });
    if (queued >= HIGH_WATER_BYTES && !from.isPaused) from.pause();
  });
}

function byteLength(data: RawData): number {
  if (Array.isArray(data)) return data.reduce((n, part) => n + part.length, 0);
  return data instanceof ArrayBuffer ? data.byteLength : data.length;
}

/** Passes a close on to the other side: the same code when it may be sent, else `fallback`. */
function closeWith(peer: WebSocket, code: number, reason: Buffer, fallback: number): void {
  if (peer.readyState === WebSocket.CONNECTING) return peer.terminate();
  if (peer.readyState !== WebSocket.OPEN) return;
  // 1005 (no code was given), 1006 (the connection dropped) and 1015 may be reported, never sent.
  const sendable = (code >= 1000 && code <= 1014 && code !== 1004 && code !== 1005 && code !== 1006) || (code >= 3000 && code <= 4999);
  if (code === 1005) peer.close();
  else if (sendable) peer.close(code, reason);
  else peer.close(fallback);
}

/** ws's handshake timeout, as the proxy's timeouts read (504 rather than 502). */
function timedOut(error: Error): Error {
  return /timed out/i.test(error.message) ? Object.assign(new Error(error.message, { cause: error }), { code: 'ETIMEDOUT' }) : error;
}

/**
 * Node before 24.9 (no shouldUpgradeCallback) hands every upgrade request to the 'upgrade'
 * listener, its body still unread on the socket. One that is not for a WebSocket route (curl's
 * `Upgrade: h2c` on a POST, a WebSocket asked of another route) is given back to Node's HTTP
 * parser as the plain request it is, its Upgrade header left out, and is served as before.
 */
function replayAsPlainRequest(server: Server, req: IncomingMessage, socket: Duplex, head: Buffer): void {
  const lines = [`${req.method} ${req.url} HTTP/${req.httpVersion}`];
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    if (req.rawHeaders[i]!.toLowerCase() !== 'upgrade') lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
  }
  socket.unshift(Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), head]));
  // Over TLS, HTTP is served on the socket the handshake gave, announced by 'secureConnection'.
  server.emit(socket instanceof TLSSocket ? 'secureConnection' : 'connection', socket);
}
