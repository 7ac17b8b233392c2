// start(): services, both listeners, listen; close() undoes it in order, letting requests finish.
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
  close(): Promise<void>;
}

export async function startGateway(config: Config, options: ServiceOptions & { log: Logger }): Promise<RunningGateway> {
  const services = await createServices(config, options);
  let app: FastifyInstance | undefined;
  let admin: FastifyInstance | undefined;
  try {
    app = await buildApp(services);
    const url = await app.listen({ host: config.server.host, port: config.server.port });
    let adminUrl: string | undefined;
    if (config.admin.port !== 0) {
      admin = await buildAdminApp(services);
      adminUrl = await admin.listen({ host: config.admin.host, port: config.admin.port });
    }
    const running: RunningGateway = {
      services, app, admin, url, adminUrl,
      async close() {
        // Stop accepting first; fastify waits for requests in flight before resolving.
        await Promise.all([app!.close(), admin?.close()]);
        await services.close();
      },
    };
    return running;
  } catch (err) {
    await Promise.all([app?.close(), admin?.close()]).catch(() => {});
    await services.close();
    throw err;
  }
}
