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
  let inDoubt: InDoubtStats | undefined;
  // Unprefixed: stock Node.js dashboards and alerts look for process_* and nodejs_* by these names.
  if (options.defaultMetrics) collectDefaultMetrics({ register: registry });
  // The usual build-info gauge: a constant 1 whose labels say what runs, for joins in queries.
  // Summed over workers it would read N: every worker runs the same build (fleet/primary.ts).
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
  inDoubtCounters(registry, () => inDoubt);
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

  const probes = operationalGauges(registry);
  return {
    registry,
    tallies,
    ...probes,
    upstreamErrors: new Counter({ name: 'gateway_upstream_errors_total', help: 'Upstream failures by upstream and kind', labelNames: ['upstream', 'kind'] as const, registers: [registry] }),
    webhookDeliveries: new Counter({
      name: 'gateway_webhook_deliveries_total', help: 'Outbox delivery attempts by kind (webhook: a user\'s, hook: the operator\'s, billing: a Stripe meter event) and outcome',
      labelNames: ['kind', 'outcome'] as const, registers: [registry],
    }),
    observeIdentityCache(stats: { hits: number; misses: number }): void {
      cacheStats = stats;
    },
    observeWebSockets(stats: WebSocketStats): void {
      webSockets = stats;
    },
    observeTracing(stats: { exported: number; dropped: number }): void {
      traces = stats;
    },
    observeInDoubt(stats: InDoubtStats): void {
      inDoubt = stats;
    },
  };
}

/** What /metrics reads of in-doubt commits: the database's (Postgres only), and the uses they left in doubt (the daily limiter's). */
export interface InDoubtStats {
  commits: { inDoubtCommits: number } | undefined;
  uses: { usesInDoubt: number };
}

/** CONTRACT §32: a COMMIT whose answer was lost (a failover), or committed on the primary alone, may have counted uses never served. */
function inDoubtCounters(registry: Registry, stats: () => InDoubtStats | undefined): void {
  const commitsHelp = 'Postgres transactions whose COMMIT was sent and whose answer was lost (a failover, a cut connection), '
    + 'or was the warning that the wait for a synchronous standby was cancelled (committed on the primary alone): whether they outlive a failover, nobody can tell';
  scrapedCounter(registry, 'gateway_storage_in_doubt_commits_total', commitsHelp, [], (add) => {
    const commits = stats()?.commits;
    if (commits) add({}, commits.inDoubtCommits);
  });
  const usesHelp = 'Daily and monthly uses reserved or handed back by in-doubt commits: at most this many may be counted and not served';
  scrapedCounter(registry, 'gateway_quota_uses_in_doubt_total', usesHelp, [], (add) => {
    const uses = stats()?.uses;
    if (uses) add({}, uses.usesInDoubt);
  });
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

/** What the operational gauges read when scraped, each provided by the part that knows (instance.ts, server.ts). */
interface Probes {
  /** Postgres and Redis as /readyz sees them: ok, down, readonly, off. */
  storage?: () => Promise<Record<string, string>>;
  /** Seconds the oldest message still pending in the outbox has waited (0: none). */
  outboxAge?: () => Promise<number>;
  /** When the billing meter reporter last finished a pass (ms since the epoch; its start until one has); undefined without one. */
  meterReported?: () => number | undefined;
  /** When each HTTPS listener's certificate expires (ms since the epoch), by listener. */
  certificates?: () => Record<string, number>;
}

/**
 * The gauges the alert rules of deploy/monitoring/ read (CONTRACT §28), filled when scraped. Each
 * says how it adds up over workers (fleet/primary.ts sums by default): storage and certificates the
 * worst worker, the outbox's age (the same table for all) and the reporter's last pass the latest.
 */
function operationalGauges(registry: Registry) {
  const probes: Probes = {};
  new Gauge({
    name: 'gateway_storage_up', help: 'Whether Postgres and Redis answer the readiness check (1) or not (0); Redis absent when not configured',
    labelNames: ['store'], registers: [registry], aggregator: 'min',
    async collect() {
      this.reset();
      for (const [store, state] of Object.entries((await probes.storage?.()) ?? {})) if (state !== 'off') this.set({ store }, state === 'down' ? 0 : 1);
    },
  });
  new Gauge({
    name: 'gateway_outbox_oldest_pending_seconds', help: 'Age of the oldest outbox message (webhook, hook, meter event) not yet delivered, 0 when none', registers: [registry], aggregator: 'max',
    async collect() {
      // A storage failure leaves it out of the scrape: gateway_storage_up says why.
      this.reset();
      const age = await probes.outboxAge?.().catch(() => undefined);
      if (age !== undefined) this.set(age);
    },
  });
  new Gauge({
    name: 'gateway_billing_meter_last_report_timestamp_seconds', help: 'When the billing meter reporter last finished a pass (its start until one has); 0 without billing.stripe.meter',
    registers: [registry], aggregator: 'max',
    collect() {
      this.reset();
      const at = probes.meterReported?.();
      if (at !== undefined) this.set(at / 1000);
    },
  });
  new Gauge({
    name: 'gateway_tls_certificate_expiry_timestamp_seconds', help: 'When the certificate each HTTPS listener serves expires', labelNames: ['listener'], registers: [registry], aggregator: 'min',
    collect() {
      this.reset();
      for (const [listener, at] of Object.entries(probes.certificates?.() ?? {})) this.set({ listener }, at / 1000);
    },
  });
  return {
    /** Hands a gauge what it reads (each part calls it once it exists). */
    observe(more: Probes): void {
      Object.assign(probes, more);
    },
  };
}
