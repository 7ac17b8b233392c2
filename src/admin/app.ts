// The admin listener (admin.host:admin.port): metrics and health for operators, and /admin/v1.
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { clientErrorHandler, registerCommon } from '../app.js';
import { sendError } from '../errors.js';
import { healthRoutes } from '../health.js';
import { adminRoutes } from './routes.js';
import type { Services } from '../services.js';

export async function buildAdminApp(services: Services): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: services.log.child({ listener: 'admin' }) as FastifyBaseLogger,
    // Unparsable requests and undecodable URLs answer from the catalog here too.
    clientErrorHandler,
    frameworkErrors: (_error, _request, reply) => sendError(reply, 'badRequest'),
  });
  registerCommon(app, services);
  await app.register(healthRoutes, { services });
  app.get('/metrics', async (_request, reply) => {
    reply.type(services.metrics.registry.contentType);
    return services.metrics.registry.metrics();
  });
  await app.register(adminRoutes, { services, prefix: '/admin' });
  return app;
}
