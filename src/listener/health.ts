// /healthz (the process runs) and /readyz (the instance can serve), on both listeners.
import type { FastifyInstance } from 'fastify';
import { errorBody } from '../errors/index.js';
import type { Database } from '../storage/database/index.js';
import { isReadOnlyError, type RedisBreaker, type RedisClient, refusesWrites } from '../storage/redis/index.js';
import { withTimeout } from '../time.js';
import { errorOf, type EndpointSchema } from '../openapi.js';

export const CHECK_TIMEOUT_MS = 1000;

export interface ReadinessDeps {
  db: Database;
  /** The guards' Redis: a passing check closes its breaker (breaker.ts). */
  redis: RedisBreaker | null;
  /** Shutting down (server.shutdownDelay): not ready, whatever the dependencies say. */
  lifecycle: { draining: boolean };
  /** In a worker (server.workers > 1): the readiness of every worker, gathered by the primary (fleet/primary.ts). */
  fleet?: { readiness(): Promise<Readiness> };
}

/** `off`: no Redis configured. `readonly`: Redis answers but refuses writes (a replica). */
export type CheckState = 'ok' | 'down' | 'readonly' | 'off';
export type ReadinessStatus = 'ok' | 'unavailable' | 'draining';

export interface Readiness {
  status: ReadinessStatus;
  checks: Record<string, CheckState>;
}

/** A write refused by a replica (now, or just before the reconnection it caused): the server answers, the guards fall back (CONTRACT §25). */
function redisState(client: RedisClient, err: unknown): CheckState {
  return isReadOnlyError(err) || refusesWrites(client) ? 'readonly' : 'down';
}

export async function readiness(deps: ReadinessDeps): Promise<Readiness> {
  const breaker = deps.redis;
  const [postgres, redis] = await Promise.all([
    withTimeout(deps.db.query('SELECT 1'), CHECK_TIMEOUT_MS).then(() => 'ok' as const, () => 'down' as const),
    breaker
      ? breaker.check(CHECK_TIMEOUT_MS).then(() => 'ok' as const, (err: unknown) => redisState(breaker.client, err))
      : Promise.resolve('off' as const),
  ]);
  // Redis down or read-only is not a reason to leave the pool: the guards fall back in-process
  // (§4, §9), and a readiness that failed on it would drop every pod at once during an outage.
  const status = deps.lifecycle.draining ? 'draining' : postgres === 'ok' ? 'ok' : 'unavailable';
  return { status, checks: { postgres, redis } };
}

/** Each route's OpenAPI fragment (documentation only: src/openapi.ts), by handler. */
const DOCS = {
  healthz: { tags: ['health'], summary: 'The process runs', response: { 200: { type: 'object', properties: { status: { const: 'ok' } } } } },
  readyz: {
    tags: ['health'], summary: 'Postgres answers and the instance is not draining; Redis is reported in checks, never a 503',
    response: {
      200: { type: 'object', properties: { status: { const: 'ok' }, checks: { type: 'object', properties: { postgres: { const: 'ok' }, redis: { enum: ['ok', 'down', 'readonly', 'off'] } } } } },
      503: { ...errorOf(['storageUnavailable']), description: 'not ready (status unavailable: Postgres down; draining): error, status and checks' },
    },
  },
} satisfies Record<string, EndpointSchema>;

export async function healthRoutes(app: FastifyInstance, deps: ReadinessDeps): Promise<void> {
  app.get('/healthz', { schema: DOCS.healthz }, async () => ({ status: 'ok' }));
  app.get('/readyz', { schema: DOCS.readyz }, async (_request, reply) => {
    const { status, checks } = await (deps.fleet ? deps.fleet.readiness() : readiness(deps));
    if (status === 'ok') return { status, checks };
    return reply.code(503).send({ ...errorBody('storageUnavailable'), status, checks });
  });
}
