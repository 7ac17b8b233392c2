// Prometheus metrics (prom-client), one registry per gateway instance.
import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export type Metrics = ReturnType<typeof createMetrics>;

export function createMetrics(options: { defaultMetrics?: boolean } = {}) {
  const registry = new Registry();
  // The identity cache counts hits and misses in plain fields on its hot path; they are copied
  // into the counter only when Prometheus scrapes.
  let cacheStats: { hits: number; misses: number } | undefined;
  if (options.defaultMetrics) collectDefaultMetrics({ register: registry, prefix: 'gateway_' });
  return {
    registry,
    requests: new Counter({ name: 'gateway_requests_total', help: 'Requests answered, by route and status', labelNames: ['route', 'method', 'status'] as const, registers: [registry] }),
    latency: new Histogram({
      name: 'gateway_request_duration_seconds', help: 'Time to answer, by route', labelNames: ['route'] as const, registers: [registry],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    }),
    guardDecisions: new Counter({ name: 'gateway_guard_decisions_total', help: 'Guard denials by route and reason (allowed requests count as outcome "allowed")', labelNames: ['route', 'outcome'] as const, registers: [registry] }),
    upstreamErrors: new Counter({ name: 'gateway_upstream_errors_total', help: 'Upstream failures by upstream and kind', labelNames: ['upstream', 'kind'] as const, registers: [registry] }),
    webhookDeliveries: new Counter({ name: 'gateway_webhook_deliveries_total', help: 'Webhook delivery attempts by outcome', labelNames: ['outcome'] as const, registers: [registry] }),
    cache: new Counter({
      name: 'gateway_identity_cache_total', help: 'Identity cache lookups by result', labelNames: ['result'] as const, registers: [registry],
      collect() {
        if (!cacheStats) return;
        this.reset();
        this.inc({ result: 'hit' }, cacheStats.hits);
        this.inc({ result: 'miss' }, cacheStats.misses);
      },
    }),
    observeIdentityCache(stats: { hits: number; misses: number }): void {
      cacheStats = stats;
    },
  };
}
