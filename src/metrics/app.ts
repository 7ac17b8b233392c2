// The metrics listener (metrics.host:metrics.port, CONTRACT §28): /metrics alone, for a cluster's
// Prometheus, so the admin listener (its API, the console, the same /metrics) can stay on
// loopback. Nothing else is served on it: a scraper reaching the pod's network reaches no account.
// With metrics.token, a scrape needs `Authorization: Bearer <token>`.
import Fastify, { type FastifyInstance } from 'fastify';
import { sameKey } from '../credentials/digest.js';
import { sendDenial } from '../errors/index.js';
import { BEARER, headerValue } from '../http.js';
import type { Instance } from '../instance.js';
import { listenerOptions, registerCommon, registerHostCheck } from '../listener/basics.js';

/** What /metrics answers, on the admin listener and this one: in a worker, every worker's series, summed (fleet/primary.ts), as a scrape reaches any one of them. */
export function metricsText({ metrics, fleet }: Pick<Instance, 'metrics' | 'fleet'>): Promise<string> {
  return fleet ? fleet.metrics() : metrics.registry.metrics();
}

export async function buildMetricsApp(instance: Instance): Promise<FastifyInstance> {
  const { metrics, log } = instance;
  const { token } = instance.config.metrics;
  const app = Fastify(listenerOptions(log.child({ listener: 'metrics' })));
  registerCommon(app, metrics.tallies, instance.errorStyle);
  registerHostCheck(app);
  app.get('/metrics', async (request, reply) => {
    const presented = BEARER.exec(headerValue(request.headers, 'authorization'))?.[1] ?? '';
    if (token !== undefined && !sameKey(presented, token)) {
      return sendDenial(reply, { code: 'metricsUnauthorized', headers: { 'www-authenticate': 'Bearer realm="gateway-metrics"' } });
    }
    reply.type(metrics.registry.contentType);
    return metricsText(instance);
  });
  return app;
}
