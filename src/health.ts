// /healthz (the process runs) and /readyz (its dependencies answer), on both listeners.
import type { FastifyInstance } from 'fastify';
import { errorBody } from './errors.js';
import type { Services } from './services.js';
import { withTimeout } from './timeout.js';

const CHECK_TIMEOUT_MS = 1000;

export async function readiness(services: Services): Promise<{ ready: boolean; checks: Record<string, 'ok' | 'down' | 'disabled'> }> {
  const [postgres, redis] = await Promise.all([
    withTimeout(services.db.query('SELECT 1'), CHECK_TIMEOUT_MS).then(() => 'ok' as const, () => 'down' as const),
    services.redis
      ? withTimeout(services.redis.ping(), CHECK_TIMEOUT_MS).then(() => 'ok' as const, () => 'down' as const)
      : Promise.resolve('disabled' as const),
  ]);
  return { ready: postgres === 'ok' && redis !== 'down', checks: { postgres, redis } };
}

export async function healthRoutes(app: FastifyInstance, opts: { services: Services }): Promise<void> {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    const { ready, checks } = await readiness(opts.services);
    if (ready) return { status: 'ready', checks };
    return reply.code(503).send({ ...errorBody('storageUnavailable'), checks });
  });
}
