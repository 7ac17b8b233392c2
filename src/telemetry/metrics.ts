// Prometheus metrics (prom-client), one registry per gateway instance.
import { readFileSync } from 'node:fs';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** What the WebSocket gauges read when scraped (proxy/openSockets.ts provides it). */
export interface WebSocketStats {
  /** Sockets opened since start, per route. */
  readonly opened: ReadonlyMap<string, number>;
  /** Sockets open now, per route. */
  openByRoute(): Map<string, number>;
}

export type Metrics = ReturnType<typeof createMetrics>;

// src/ and dist/ both sit right under the package root.
const PACKAGE_VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

const LATENCY_NAME = 'gateway_request_duration_seconds';
const LATENCY_HELP = 'Time to answer, by route';
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** What one route's requests add up to since start. */
interface RouteTally {
  /** method → status → requests answered */
  answered: Map<string, Map<number, number>>;
  /** guard outcome → requests */
  decided: Map<string, number>;
  /** requests per latency bucket (LATENCY_BUCKETS, then +Inf), not cumulative */
  buckets: number[];
  count: number;
  sum: number;
}

/**
 * The per-request metrics, counted in plain maps keyed by the route's path, the method and the
 * status. prom-client hashes a label set on every call, which cost about 9 µs per proxied request,
 * some 3 % of its CPU (`npm run bench` profile); these tallies are read only when /metrics is
 * scraped. Every key is bounded: configured routes and own endpoints, parsed methods, statuses.
 */
export class RouteTallies {
  readonly routes = new Map<string, RouteTally>();
  /** `limit\0plan\0route\0outcome` → uses admitted or refused by the daily, monthly and per-minute limits. */
  readonly quotas = new Map<string, number>();

  quota(limit: 'daily' | 'monthly' | 'minute', plan: string, route: string, outcome: 'admitted' | 'refused'): void {
    const key = `${limit}\0${plan}\0${route}\0${outcome}`;
    this.quotas.set(key, (this.quotas.get(key) ?? 0) + 1);
  }

  answered(route: string, method: string, status: number, seconds: number): void {
    const t = this.tally(route);
    let byStatus = t.answered.get(method);
    if (!byStatus) t.answered.set(method, byStatus = new Map());
    byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
    let bucket = 0;
    while (bucket < LATENCY_BUCKETS.length && seconds > LATENCY_BUCKETS[bucket]!) bucket++;
    t.buckets[bucket]!++;
    t.count++;
    t.sum += seconds;
  }

  decided(route: string, outcome: string): void {
    const t = this.tally(route);
    t.decided.set(outcome, (t.decided.get(outcome) ?? 0) + 1);
  }

  private tally(route: string): RouteTally {
    let t = this.routes.get(route);
    if (!t) this.routes.set(route, t = { answered: new Map(), decided: new Map(), buckets: new Array<number>(LATENCY_BUCKETS.length + 1).fill(0), count: 0, sum: 0 });
    return t;
  }
}

/**
 * gateway_request_duration_seconds from the tallies. prom-client's Histogram takes single
 * observations only, never counts, so its series are produced here in the shape its registry
 * prints (that of Histogram#get: `le` first, then `route`).
 */
class TalliedLatency extends Histogram<'route'> {
  constructor(registry: Registry, private readonly tallies: RouteTallies) {
    super({ name: LATENCY_NAME, help: LATENCY_HELP, labelNames: ['route'], buckets: LATENCY_BUCKETS, registers: [registry] });
  }

  override get(): Promise<LatencySnapshot> {
    return Promise.resolve(this.snapshot());
  }

  /** What the registry reads when printing (Histogram's own would read its empty map). */
  getForPromString(): Promise<LatencySnapshot> {
    return this.get();
  }

  private snapshot(): LatencySnapshot {
    const values: Array<{ labels: Record<string, string | number>; value: number; metricName: string }> = [];
    for (const [route, t] of this.tallies.routes) {
      if (t.count === 0) continue;
      let cumulative = 0;
      LATENCY_BUCKETS.forEach((le, i) => {
        cumulative += t.buckets[i]!;
        values.push({ labels: { le, route }, value: cumulative, metricName: `${LATENCY_NAME}_bucket` });
      });
      values.push({ labels: { le: '+Inf', route }, value: t.count, metricName: `${LATENCY_NAME}_bucket` });
      values.push({ labels: { route }, value: t.sum, metricName: `${LATENCY_NAME}_sum` });
      values.push({ labels: { route }, value: t.count, metricName: `${LATENCY_NAME}_count` });
    }
    return { name: LATENCY_NAME, help: LATENCY_HELP, type: 'histogram', values, aggregator: 'sum' } as unknown as LatencySnapshot;
  }
}

type LatencySnapshot = Awaited<ReturnType<Histogram<'route'>['get']>>;

export function createMetrics(options: { defaultMetrics?: boolean } = {}) {
  const registry = new Registry();
  const tallies = new RouteTallies();
  // The identity cache counts hits and misses in plain fields on its hot path too.
  let cacheStats: { hits: number; misses: number } | undefined;
  let webSockets: WebSocketStats | undefined;
  let traces: { exported: number; dropped: number } | undefined;
  // Unprefixed: stock Node.js dashboards and alerts look for process_* and nodejs_* by these names.
  if (options.defaultMetrics) collectDefaultMetrics({ register: registry });
  // The usual build-info gauge: a constant 1 whose labels say what runs, for joins in queries.
  // Summed over workers it would read N: every worker runs the same build (workers.ts).
  new Gauge({ name: 'gateway_build_info', help: 'The running gateway: version and Node.js version', labelNames: ['version', 'node'], registers: [registry], aggregator: 'first' })
    .set({ version: PACKAGE_VERSION, node: process.versions.node }, 1);

  // Fed from plain counts when Prometheus scrapes, never on the request path.
  scrapedCounter(registry, 'gateway_requests_total', 'Requests answered, by route and status', ['route', 'method', 'status'], (add) => {
    for (const [route, t] of tallies.routes) {
      for (const [method, byStatus] of t.answered) for (const [status, n] of byStatus) add({ route, method, status }, n);
    }
  });
  new TalliedLatency(registry, tallies);
  scrapedCounter(registry, 'gateway_guard_decisions_total', 'Guard denials by route and reason (allowed requests count as outcome "allowed")', ['route', 'outcome'], (add) => {
    for (const [route, t] of tallies.routes) for (const [outcome, n] of t.decided) add({ route, outcome }, n);
  });
  // Per plan and route, never per user: a label per user would grow without bound.
  scrapedCounter(registry, 'gateway_quota_uses_total', 'Uses admitted or refused by the daily, monthly and per-minute limits, by plan and route', ['limit', 'plan', 'route', 'outcome'], (add) => {
    for (const [key, n] of tallies.quotas) {
      const [limit, plan, route, outcome] = key.split('\0') as [string, string, string, string];
      add({ limit, plan, route, outcome }, n);
    }
  });
  scrapedCounter(registry, 'gateway_identity_cache_total', 'Identity cache lookups by result', ['result'], (add) => {
    if (!cacheStats) return;
    add({ result: 'hit' }, cacheStats.hits);
    add({ result: 'miss' }, cacheStats.misses);
  });

  scrapedCounter(registry, 'gateway_trace_spans_total', 'Trace spans exported, or dropped (queue full, or the collector failed)', ['outcome'], (add) => {
    if (!traces) return;
    add({ outcome: 'exported' }, traces.exported);
    add({ outcome: 'dropped' }, traces.dropped);
  });
  new Gauge({
    name: 'gateway_websockets_open', help: 'WebSockets open now, by route', labelNames: ['route'], registers: [registry],
    collect() {
      this.reset();
      for (const [route, n] of webSockets?.openByRoute() ?? []) this.set({ route }, n);
    },
  });
  scrapedCounter(registry, 'gateway_websockets_opened_total', 'WebSockets opened (upgrades accepted and relayed), by route', ['route'], (add) => {
    for (const [route, n] of webSockets?.opened ?? []) add({ route }, n);
  });

  return {
    registry,
    tallies,
    upstreamErrors: new Counter({ name: 'gateway_upstream_errors_total', help: 'Upstream failures by upstream and kind', labelNames: ['upstream', 'kind'] as const, registers: [registry] }),
    webhookDeliveries: new Counter({ name: 'gateway_webhook_deliveries_total', help: 'Webhook delivery attempts by outcome', labelNames: ['outcome'] as const, registers: [registry] }),
    observeIdentityCache(stats: { hits: number; misses: number }): void {
      cacheStats = stats;
    },
    observeWebSockets(stats: WebSocketStats): void {
      webSockets = stats;
    },
    observeTracing(stats: { exported: number; dropped: number }): void {
      traces = stats;
    },
  };
}

/** A counter whose series are rebuilt from counts kept elsewhere each time the registry is read. */
function scrapedCounter<L extends string>(
  registry: Registry,
  name: string,
  help: string,
  labelNames: readonly L[],
  fill: (add: (labels: Record<L, string | number>, n: number) => void) => void,
): void {
  new Counter<L>({
    name, help, labelNames, registers: [registry],
    collect() {
      this.reset();
      fill((labels, n) => this.inc(labels, n));
    },
  });
}
