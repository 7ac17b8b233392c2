// start(): services, both listeners, listen; close() undoes it in order, letting requests finish.
import type { Server, ServerResponse } from 'node:http';
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
  const inFlight = new Set<ServerResponse>();
  let draining = false;
  server.on('request', (_req, res: ServerResponse) => {
    inFlight.add(res);
    res.once('close', () => {
      inFlight.delete(res);
      if (draining) server.closeIdleConnections();
    });
  });
  return () => {
    draining = true;
    for (const res of inFlight) if (!res.headersSent) res.setHeader('connection', 'close');
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
