// /healthz (the process runs) and /readyz (its dependencies answer), on both listeners.
import type { FastifyInstance } from 'fastify';
import { errorBody } from './errors.js';
import type { Database } from './storage/db.js';
import { probeRedis, type RedisClient } from './storage/redis.js';
import { withTimeout } from './time.js';

const CHECK_TIMEOUT_MS = 1000;

export interface ReadinessDeps {
  db: Database;
  redis: RedisClient | null;
  /** Shutting down (server.shutdownDelay): not ready, whatever the dependencies say. */
  lifecycle: { draining: boolean };
}

export async function readiness(deps: ReadinessDeps): Promise<{ ready: boolean; checks: Record<string, 'ok' | 'down' | 'disabled' | 'draining'> }> {
  // A load balancer must stop sending before the listener closes: say so at once, no probe needed.
  if (deps.lifecycle.draining) return { ready: false, checks: { shutdown: 'draining' } };
  const [postgres, redis] = await Promise.all([
    withTimeout(deps.db.query('SELECT 1'), CHECK_TIMEOUT_MS).then(() => 'ok' as const, () => 'down' as const),
    deps.redis
      ? withTimeout(probeRedis(deps.redis), CHECK_TIMEOUT_MS).then(() => 'ok' as const, () => 'down' as const)
      : Promise.resolve('disabled' as const),
  ]);
  return { ready: postgres === 'ok' && redis !== 'down', checks: { postgres, redis } };
}

export async function healthRoutes(app: FastifyInstance, deps: ReadinessDeps): Promise<void> {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    const { ready, checks } = await readiness(deps);
    if (ready) return { status: 'ready', checks };
    return reply.code(503).send({ ...errorBody('storageUnavailable'), checks });
  });
}
