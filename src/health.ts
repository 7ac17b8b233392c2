// /healthz (the process runs) and /readyz (its dependencies answer), on both listeners.
import type { FastifyInstance } from 'fastify';
import { errorBody } from './errors.js';
import type { Database } from './storage/db.js';
import { probeRedis, type RedisClient } from './storage/redis.js';
import { withTimeout } from './time.js';

export const CHECK_TIMEOUT_MS = 1000;

export interface ReadinessDeps {
  db: Database;
  redis: RedisClient | null;
  /** Shutting down (server.shutdownDelay): not ready, whatever the dependencies say. */
  lifecycle: { draining: boolean };
  /** In a worker (server.workers > 1): the readiness of every worker, gathered by the primary (workers.ts). */
  fleet?: { readiness(): Promise<Readiness> };
}

export type CheckState = 'ok' | 'down' | 'disabled' | 'draining';

export interface Readiness {
  ready: boolean;
  checks: Record<string, CheckState>;
}

export async function readiness(deps: ReadinessDeps): Promise<Readiness> {
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
    const { ready, checks } = await (deps.fleet ? deps.fleet.readiness() : readiness(deps));
    if (ready) return { status: 'ready', checks };
    return reply.code(503).send({ ...errorBody('storageUnavailable'), checks });
  });
}
