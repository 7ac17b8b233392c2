// startGateway(): the instance's parts, the listeners (public, admin, decisions, metrics), listen; close() undoes it in order, letting requests finish.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Http2Session } from 'node:http2';
import type { Socket } from 'node:net';
import type { Server as TlsServer, TLSSocket } from 'node:tls';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { buildApp } from './app.js';
import { buildAdminApp } from './admin/app.js';
import type { Config } from './config/schema.js';
import { buildDecisionsApp } from './decisions/app.js';
import { buildMetricsApp } from './metrics/app.js';
import { createInstance, type Instance, type InstanceOptions } from './instance.js';
import { allCertificates, listenerCertificates, type Certificates } from './listener/tls.js';
import { ownEndpointMethods } from './live/requestContext.js';
import { portalPath } from './config/schema/portal.js';
import { readiness } from './listener/health.js';

export interface RunningGateway {
  /** The instance's parts (tests look inside; modules are handed only what they use). */
  services: Instance;
  app: FastifyInstance;
  admin?: FastifyInstance;
  /** The decisions listener (CONTRACT §11), when decisions.port is set. */
  decisions?: FastifyInstance;
  /** The metrics listener (CONTRACT §28), when metrics.port is set. */
  metricsListener?: FastifyInstance;
  url: string;
  adminUrl?: string;
  decisionsUrl?: string;
  metricsUrl?: string;
  /** With server.tls or admin.tls: those listeners' certificates, read again on SIGHUP (reload.ts). */
  certificates?: Certificates;
  /**
   * Drains for `delayMs` (server.shutdownDelay on SIGTERM: /readyz 503, every response closes its
   * connection, new connections still served), then stops accepting, waits for the requests in
   * flight and closes storage. Safe to call twice.
   */
  close(delayMs?: number): Promise<void>;
}

// A connection accepted while draining gets this long to send its first request before it is closed.
const UNUSED_CONNECTION_GRACE_MS = 1000;
const IDLE_CHECK_EVERY_MS = 20;

type HttpSocket = Socket & { _httpMessage?: ServerResponse | null };

/**
 * Closing a listener without losing a request. A connection is closed only once nothing more can
 * arrive on it: while draining every response says `Connection: close` (app.ts), so a connection
 * that carries a request closes itself after answering it. One that looks idle is closed only
 * when it has read no byte since its last answer: a load balancer may have just written a request
 * on it (a keep-alive connection idle from before, picked at that moment; a new connection not
 * used yet), and closing it then resets that request (nginx answered 502 to such POSTs). A new
 * connection gets UNUSED_CONNECTION_GRACE_MS to send its first byte.
 *
 * Over TLS, HTTP/1.1 runs on the socket the handshake gives ('secureConnection'), not on the TCP
 * one. An HTTP/2 connection (server.tls.http2) is a session of streams: it is told GOAWAY (by the
 * first answer while draining, app.ts, else here at the end), lets its streams in flight finish,
 * and closes. An upgraded WebSocket's connection stays until the socket is closed (1001, app.ts).
 */
class ConnectionDrain {
  // Tracked per connection, not per request: a Set touched on every request cost ~40 µs of CPU
  // each on the proxy's hot path (npm run bench).
  private readonly sockets = new Set<HttpSocket>();
  private readonly sessions = new Set<Http2Session>();
  /** While draining: bytes a connection had read when it was last known to have nothing pending, and when that was. */
  private readonly settled = new WeakMap<Socket, { bytes: number; at: number }>();
  private draining = false;

  constructor(private readonly server: Server) {
    const tls = 'setSecureContext' in server;
    server.on(tls ? 'secureConnection' : 'connection', (socket: HttpSocket) => {
      if ((socket as TLSSocket).alpnProtocol === 'h2') return; // a session: below
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
      if (this.draining) this.settled.set(socket, { bytes: 0, at: Date.now() });
    });
    server.on('session', (session: Http2Session) => {
      this.sessions.add(session);
      session.once('close', () => this.sessions.delete(session));
    });
  }

  /** From now on (and only now: the hot path pays nothing before) connections are watched for what they read. */
  start(): void {
    if (this.draining) return;
    this.draining = true;
    const settleAfter = (res: ServerResponse, socket: Socket) => res.once('finish', () => this.settled.set(socket, { bytes: socket.bytesRead, at: Date.now() }));
    for (const socket of this.sockets) {
      if (socket._httpMessage) settleAfter(socket._httpMessage, socket);
      else this.settled.set(socket, { bytes: socket.bytesRead, at: Date.now() });
    }
    this.server.on('request', (req: IncomingMessage, res: ServerResponse) => { if (req.httpVersionMajor === 1) settleAfter(res, req.socket); });
    // http.Server#close() closes idle connections itself (Node 19+), unused ones and ones with a
    // request just arrived included: finish() does it instead, sparing those.
    this.server.closeIdleConnections = () => {};
  }

  /** Once the listener is closing: closes each connection as soon as it can carry nothing more; resolves when none is left. */
  async finish(): Promise<void> {
    this.start();
    for (const session of this.sessions) session.close();
    while (this.sockets.size || this.sessions.size) {
      const now = Date.now();
      for (const socket of this.sockets) {
        const res = socket._httpMessage;
        if (res) {
          if (!res.headersSent) res.setHeader('connection', 'close');
          continue;
        }
        const settled = this.settled.get(socket);
        // Bytes read since the last answer: a request is arriving, and will be answered (and closed).
        if (settled && socket.bytesRead > settled.bytes) continue;
        // Never used yet: it gets a moment to send its request.
        if (settled && settled.bytes === 0 && now - settled.at < UNUSED_CONNECTION_GRACE_MS) continue;
        socket.destroy();
      }
      if (this.sockets.size || this.sessions.size) await new Promise((resolve) => setTimeout(resolve, IDLE_CHECK_EVERY_MS));
    }
  }
}

export async function startGateway(config: Config, options: InstanceOptions & { log: Logger }): Promise<RunningGateway> {
  const services = await createInstance(config, options);
  let app: FastifyInstance | undefined;
  let admin: FastifyInstance | undefined;
  let decisions: FastifyInstance | undefined;
  let metricsListener: FastifyInstance | undefined;
  try {
    app = await buildApp(services);
    const drains = [new ConnectionDrain(app.server)];
    const url = await app.listen({ host: config.server.host, port: config.server.port });
    let adminUrl: string | undefined;
    if (config.admin.port !== 0) {
      const publicApp = app;
      admin = await buildAdminApp(services, { publicDocument: () => publicApp.swagger() as Record<string, unknown> });
      drains.push(new ConnectionDrain(admin.server));
      adminUrl = await admin.listen({ host: config.admin.host, port: config.admin.port });
    }
    const certificates = allCertificates([
      config.server.tls && listenerCertificates(app.server as unknown as TlsServer, config.server.tls, 'public'),
      admin && config.admin.tls ? listenerCertificates(admin.server as unknown as TlsServer, config.admin.tls, 'admin') : undefined,
    ]);
    services.metrics.observe({ storage: async () => (await readiness(services)).checks, certificates: certificates?.expiries });
    let decisionsUrl: string | undefined;
    if (config.decisions.port !== 0) {
      // The public listener's own endpoints are never a route, for a decision either.
      decisions = await buildDecisionsApp(services, { ownMethods: ownEndpointMethods(app, portalPath(services.config)) });
      drains.push(new ConnectionDrain(decisions.server));
      decisionsUrl = await decisions.listen({ host: config.decisions.host, port: config.decisions.port });
    }
    let metricsUrl: string | undefined;
    if (config.metrics.port !== 0) {
      metricsListener = await buildMetricsApp(services);
      drains.push(new ConnectionDrain(metricsListener.server));
      metricsUrl = await metricsListener.listen({ host: config.metrics.host, port: config.metrics.port });
    }
    let closing: Promise<void> | undefined;
    const running: RunningGateway = {
      services, app, admin, decisions, metricsListener, url, adminUrl, decisionsUrl, metricsUrl, certificates,
      close(delayMs = 0) {
        closing ??= (async () => {
          services.lifecycle.draining = true;
          for (const drain of drains) drain.start();
          if (delayMs > 0) {
            options.log.info({ delayMs }, 'draining: /readyz answers 503, responses close their connections');
            await new Promise((resolve) => setTimeout(resolve, delayMs));
          }
          // Stop accepting, and close each connection once it can carry nothing more; fastify
          // resolves once the requests in flight (proxied ones included: the upstream agent is
          // closed only after the listener) have been answered.
          await Promise.all([app!.close(), admin?.close(), decisions?.close(), metricsListener?.close(), ...drains.map((drain) => drain.finish())]);
          // Then the Postgres pool, Redis and the LISTEN connection.
          await services.close();
        })();
        return closing;
      },
    };
    return running;
  } catch (err) {
    await Promise.all([app?.close(), admin?.close(), decisions?.close(), metricsListener?.close()]).catch(() => {});
    await services.close();
    throw err;
  }
}
