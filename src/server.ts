// start(): services, both listeners, listen; close() undoes it in order, letting requests finish.
import type { Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { buildApp } from './app.js';
import { buildAdminApp } from './admin/app.js';
import type { Config } from './config/schema.js';
import { createServices, type ServiceOptions, type Services } from './services.js';

export interface RunningGateway {
  services: Services;
  app: FastifyInstance;
  admin?: FastifyInstance;
  url: string;
  adminUrl?: string;
  /** Stops accepting, waits for requests in flight, then closes storage. Safe to call twice. */
  close(): Promise<void>;
}

/**
 * Lets a listener drain without waiting out keep-alive timeouts. server.close() stops accepting
 * and fastify closes the connections that are idle at that moment, but a connection whose request
 * is still in flight would stay open (keep-alive) after its response, holding shutdown for up to
 * the keep-alive timeout. So responses not yet started go out with `Connection: close`, and each
 * connection that turns idle while draining is closed right away.
 */
function drainable(server: Server): () => void {
  // Tracked per connection, not per request: a Set touched on every request cost ~40 µs of CPU
  // each on the proxy's hot path (npm run bench).
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  return () => {
    for (const socket of sockets) {
      // The response this connection is serving now (node:http's own field), if any.
      const res = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
      if (!res) continue;
      if (!res.headersSent) res.setHeader('connection', 'close');
      else res.once('close', () => server.closeIdleConnections());
    }
  };
}

export async function startGateway(config: Config, options: ServiceOptions & { log: Logger }): Promise<RunningGateway> {
  const services = await createServices(config, options);
  let app: FastifyInstance | undefined;
  let admin: FastifyInstance | undefined;
  try {
    app = await buildApp(services);
    const drainApp = drainable(app.server);
    const url = await app.listen({ host: config.server.host, port: config.server.port });
    let adminUrl: string | undefined;
    let drainAdmin: (() => void) | undefined;
    if (config.admin.port !== 0) {
      admin = await buildAdminApp(services);
      drainAdmin = drainable(admin.server);
      adminUrl = await admin.listen({ host: config.admin.host, port: config.admin.port });
    }
    let closing: Promise<void> | undefined;
    const running: RunningGateway = {
      services, app, admin, url, adminUrl,
      close() {
        closing ??= (async () => {
          // Stop accepting first; fastify resolves once the requests in flight (proxied ones
          // included: the upstream agent is closed only after the listener) have been answered.
          drainApp();
          drainAdmin?.();
          await Promise.all([app!.close(), admin?.close()]);
          // Then the Postgres pool, Redis and the LISTEN connection.
          await services.close();
        })();
        return closing;
      },
    };
    return running;
  } catch (err) {
    await Promise.all([app?.close(), admin?.close()]).catch(() => {});
    await services.close();
    throw err;
  }
}
