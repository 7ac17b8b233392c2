// server.workers (CONTRACT §18): N processes serving the same ports through node:cluster, each a
// whole instance (its own pools, caches and in-process fallbacks) on the shared Postgres. The
// primary opens no storage and serves nothing. It checks the configuration once (at start and on
// SIGHUP) and hands that very result to every worker, all or none, so no worker ever runs a file
// the others refused. It starts a new worker when one dies, and forwards SIGTERM and SIGINT (each
// worker drains as a single instance does). It also gathers what one worker cannot answer alone:
// /metrics (every worker's registry, summed by prom-client's AggregatorRegistry) and /readyz
// (ready when every worker is). A worker asks it over the IPC channel; the primary asks every
// worker and answers the one that asked. It also holds the console's sessions and sign-in tickets
// (admin/consoleStore.ts): whichever worker a connection reaches knows them.
import cluster, { type Worker } from 'node:cluster';
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import type { Logger } from 'pino';
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import type { Config } from './config/schema.js';
import { memoryConsoleStore, type ConsoleStore, type ConsoleStoreCall } from './admin/consoleStore.js';
import type { CheckState, Readiness, ReadinessStatus } from './health.js';

type Gathered = 'metrics' | 'readiness';
type MetricsJson = MetricObjectWithValues<MetricValue<string>>[];

/** What travels on the IPC channel between the primary and a worker; `gateway` tells ours from node's and prom-client's. */
type Message =
  | { gateway: 'join' } // worker → primary, once it listens to the channel (a message sent before would be lost)
  | { gateway: 'start' | 'reload'; config: Config } // primary → worker
  | { gateway: 'stop' } // primary → worker: close without draining (the primary's SIGINT)
  | { gateway: 'listening'; url: string; admin?: string; decisions?: string } // worker → primary
  | { gateway: 'ask'; id: number; kind: Gathered } // worker → primary
  | { gateway: 'console'; id: number; call: ConsoleStoreCall } // worker → primary, answered with `answer`
  | { gateway: 'gather'; id: number; kind: Gathered } // primary → every worker
  | { gateway: 'gathered'; id: number; value: unknown } // worker → primary
  | { gateway: 'answer'; id: number; value: unknown }; // primary → the worker that asked

const isMessage = (m: unknown): m is Message => typeof m === 'object' && m !== null && typeof (m as { gateway?: unknown }).gateway === 'string';

// A worker that does not answer within this long counts as not ready, and is left out of /metrics.
const GATHER_TIMEOUT_MS = 1500;
// A worker that dies within this long of its start is restarted after a growing pause (up to
// RESTART_PAUSE_MAX_MS): a worker that cannot run must not be forked in a tight loop.
const SHORT_LIFE_MS = 10_000;
const RESTART_PAUSE_MIN_MS = 100;
const RESTART_PAUSE_MAX_MS = 10_000;

/** The processes `server.workers` asks for: `auto` is one per CPU this process may use, its cgroup's CPU quota included. */
export function workerCount(setting: number | 'auto'): number {
  if (setting !== 'auto') return setting;
  return Math.max(1, Math.min(availableParallelism(), cgroupCpus() ?? Infinity));
}

/** CPUs a container's quota allows (cgroup v2 `cpu.max`, else v1's cfs files), rounded up; undefined when unlimited or unknown. */
function cgroupCpus(): number | undefined {
  const read = (file: string) => {
    try {
      return readFileSync(file, 'utf8').trim();
    } catch {
      return undefined;
    }
  };
  const v2 = read('/sys/fs/cgroup/cpu.max')?.split(/\s+/);
  const [quota, period] = v2 ?? [read('/sys/fs/cgroup/cpu/cpu.cfs_quota_us'), read('/sys/fs/cgroup/cpu/cpu.cfs_period_us')];
  const cpus = Number(quota) / Number(period);
  return Number.isFinite(cpus) && cpus > 0 ? Math.ceil(cpus) : undefined;
}

// ---- worker side ----

/** A worker's link to the primary. */
export interface FleetLink {
  /** The configuration the primary checked: the worker starts with it. */
  config: Promise<Config>;
  /** Every worker's metrics, summed, in Prometheus' text format. */
  metrics(): Promise<string>;
  /** Ready when every worker is. */
  readiness(): Promise<Readiness>;
  /** The console's sessions and tickets, held by the primary for every worker. */
  consoleStore: ConsoleStore;
  /** What this worker answers when the primary gathers, once it runs. */
  serve(own: { metrics(): Promise<MetricsJson>; readiness(): Promise<Readiness> }): void;
  /** Tells the primary this worker serves. */
  listening(urls: { url: string; admin?: string; decisions?: string }): void;
  /** A configuration the primary checked after a SIGHUP. */
  onReload(apply: (config: Config) => void): void;
  /** The primary's SIGINT: close at once, without draining (SIGTERM comes as itself). */
  onStop(stop: () => void): void;
}

export function joinFleet(): FleetLink {
  if (!cluster.isWorker) throw new Error('joinFleet() is for a cluster worker');
  const send = (message: Message) => process.send!(message);
  let serving: Parameters<FleetLink['serve']>[0] | undefined;
  let applyReload: ((config: Config) => void) | undefined;
  let pendingReload: Config | undefined;
  let stop: (() => void) | undefined;
  let resolveConfig!: (config: Config) => void;
  const config = new Promise<Config>((resolve) => { resolveConfig = resolve; });
  const asked = new Map<number, (value: unknown) => void>();
  let nextId = 0;
  const ask = (kind: Gathered) => new Promise<unknown>((resolve) => {
    const id = nextId++;
    asked.set(id, resolve);
    send({ gateway: 'ask', id, kind });
  });
  const consoleCall = (call: ConsoleStoreCall) => new Promise<unknown>((resolve) => {
    const id = nextId++;
    asked.set(id, resolve);
    send({ gateway: 'console', id, call });
  }) as Promise<Awaited<ReturnType<ConsoleStore['get']>>>;

  process.on('message', (message: unknown) => {
    if (!isMessage(message)) return;
    switch (message.gateway) {
      case 'start': resolveConfig(message.config); break;
      case 'reload':
        // One that comes while this worker still starts is applied as soon as it can be.
        if (applyReload) applyReload(message.config);
        else pendingReload = message.config;
        break;
      case 'stop': stop?.(); break;
      case 'answer': asked.get(message.id)?.(message.value); asked.delete(message.id); break;
      case 'gather': {
        // Not serving yet (still starting): nothing to count, and not ready.
        const own = serving ? (message.kind === 'metrics' ? serving.metrics() : serving.readiness()) : Promise.resolve(undefined);
        void own.catch(() => undefined).then((value) => send({ gateway: 'gathered', id: message.id, value }));
        break;
      }
    }
  });
  send({ gateway: 'join' });
  // Reloads come from the primary, which read the file once for all: a SIGHUP sent to the whole
  // process group must not make each worker read it again, nor end it (the default action).
  process.on('SIGHUP', () => {});
  // Ctrl-C in a terminal reaches every process of the group: the primary's word is the one that
  // counts, or the worker would take the primary's forwarded SIGINT for a second one and exit at once.
  process.on('SIGINT', () => {});
  return {
    config,
    metrics: () => ask('metrics') as Promise<string>,
    readiness: () => ask('readiness') as Promise<Readiness>,
    consoleStore: {
      get: (key) => consoleCall({ op: 'get', key }),
      take: (key) => consoleCall({ op: 'take', key }),
      put: async (key, entry) => { await consoleCall({ op: 'put', key, entry }); },
    },
    serve(own) { serving = own; },
    listening(urls) { send({ gateway: 'listening', ...urls }); },
    onReload(apply) {
      applyReload = apply;
      if (pendingReload) apply(pendingReload);
      pendingReload = undefined;
    },
    onStop(close) { stop = close; },
  };
}

// ---- primary side ----

export interface PrimaryOptions {
  config: Config;
  count: number;
  /** Reads and checks the file again (SIGHUP); throws ConfigError when it is refused. */
  load(): Promise<Config>;
  log: Logger;
  /** How long a worker may take to drain and close after SIGTERM before it is killed. */
  stopTimeoutMs: number;
  /** Once every worker serves: the listeners' addresses (the same in every worker). */
  listening(urls: { url: string; admin?: string; decisions?: string }): void;
}

interface WorkerState {
  startedAt: number;
  listening: boolean;
}

/**
 * Runs the workers until SIGTERM or SIGINT; resolves with the exit code: 0 once every worker has
 * stopped, 1 if one could not start at all (it logged why).
 */
export function runPrimary(options: PrimaryOptions): Promise<number> {
  const { log, count } = options;
  let config = options.config;
  const workers = new Map<Worker, WorkerState>();
  let started = false;
  let stopping = false;
  let quickDeaths = 0;
  let resolveExit!: (code: number) => void;
  const exit = new Promise<number>((resolve) => { resolveExit = resolve; });

  // Structured clone, not JSON, on the channel: the configuration arrives as it was checked.
  cluster.setupPrimary({ serialization: 'advanced' });
  const gatherings = new Map<number, { waiting: Set<Worker>; values: unknown[]; done(): void }>();
  // The console's, for every worker: gone with the primary, as one instance's are with it.
  const consoleStore = memoryConsoleStore();
  let nextGathering = 0;

  const listeningWorkers = () => [...workers].filter(([, s]) => s.listening).map(([w]) => w);

  /** Every serving worker's answer to `kind` (those that answer within GATHER_TIMEOUT_MS). */
  const gather = (kind: Gathered) => new Promise<unknown[]>((resolve) => {
    const id = nextGathering++;
    const waiting = new Set(listeningWorkers());
    const values: unknown[] = [];
    const done = () => {
      clearTimeout(timer);
      gatherings.delete(id);
      resolve(values);
    };
    const timer = setTimeout(done, GATHER_TIMEOUT_MS);
    gatherings.set(id, { waiting, values, done });
    for (const worker of waiting) worker.send({ gateway: 'gather', id, kind } satisfies Message);
    if (waiting.size === 0) done();
  });

  const answer = async (kind: Gathered): Promise<unknown> => {
    const values = await gather(kind);
    if (kind === 'metrics') return AggregatorRegistry.aggregate(values.filter((v): v is MetricsJson => Array.isArray(v))).metrics();
    return fleetReadiness(values.filter((v): v is Readiness => typeof v === 'object' && v !== null), count);
  };

  const fork = () => {
    const worker = cluster.fork();
    workers.set(worker, { startedAt: Date.now(), listening: false });
    worker.on('message', (message: unknown) => {
      if (!isMessage(message)) return;
      if (message.gateway === 'join') worker.send({ gateway: 'start', config } satisfies Message);
      else if (message.gateway === 'listening') {
        workers.get(worker)!.listening = true;
        if (!started && listeningWorkers().length === count) {
          started = true;
          options.listening({ url: message.url, admin: message.admin, decisions: message.decisions });
        }
      } else if (message.gateway === 'ask') {
        void answer(message.kind).then((value) => {
          if (worker.isConnected()) worker.send({ gateway: 'answer', id: message.id, value } satisfies Message);
        });
      } else if (message.gateway === 'console') {
        void consoleStore.call(message.call).then((value) => {
          if (worker.isConnected()) worker.send({ gateway: 'answer', id: message.id, value } satisfies Message);
        });
      } else if (message.gateway === 'gathered') {
        const gathering = gatherings.get(message.id);
        if (!gathering?.waiting.delete(worker)) return;
        if (message.value !== undefined) gathering.values.push(message.value);
        if (gathering.waiting.size === 0) gathering.done();
      }
    });
    worker.on('exit', (code, signal) => {
      const state = workers.get(worker)!;
      workers.delete(worker);
      for (const gathering of gatherings.values()) {
        if (gathering.waiting.delete(worker) && gathering.waiting.size === 0) gathering.done();
      }
      if (stopping) {
        if (workers.size === 0) resolveExit(0);
        return;
      }
      if (!started) {
        // It logged why; the others cannot do better with the same configuration.
        log.fatal({ worker: worker.id, code, signal }, 'a worker could not start: stopping');
        stop('SIGTERM', 1);
        return;
      }
      const lived = Date.now() - state.startedAt;
      quickDeaths = lived < SHORT_LIFE_MS ? quickDeaths + 1 : 0;
      const pauseMs = quickDeaths === 0 ? 0 : Math.min(RESTART_PAUSE_MAX_MS, RESTART_PAUSE_MIN_MS * 2 ** (quickDeaths - 1));
      log.error({ worker: worker.id, code, signal, livedMs: lived, restartInMs: pauseMs }, 'worker stopped: starting another');
      setTimeout(() => { if (!stopping) fork(); }, pauseMs);
    });
  };

  let exitCode = 0;
  const killAll = () => {
    for (const worker of workers.keys()) worker.process.kill('SIGKILL');
  };
  const stop = (signal: NodeJS.Signals, code = 0) => {
    if (stopping) {
      // A second signal, as for one instance: at once.
      log.error({ signal }, `second ${signal}: stopping every worker now`);
      exitCode = 1;
      killAll();
      return;
    }
    stopping = true;
    exitCode = code;
    process.off('SIGHUP', onHangUp);
    if (code === 0) log.info({ signal, workers: workers.size }, 'shutting down: every worker finishes its requests in flight');
    if (workers.size === 0) resolveExit(code);
    for (const worker of workers.keys()) {
      if (signal === 'SIGINT' && worker.isConnected()) worker.send({ gateway: 'stop' } satisfies Message);
      else worker.process.kill('SIGTERM');
    }
    // A worker still draining after its time is stopped: the primary does not wait forever.
    setTimeout(killAll, options.stopTimeoutMs).unref();
  };

  const onHangUp = () => {
    log.info({ signal: 'SIGHUP' }, 'reloading the configuration');
    options.load().then((next) => {
      config = next;
      for (const worker of workers.keys()) worker.send({ gateway: 'reload', config } satisfies Message);
      log.info({ workers: workers.size }, 'configuration handed to every worker');
    }, (err: unknown) => {
      const problems = (err as { problems?: string[] }).problems ?? [err instanceof Error ? err.message : String(err)];
      log.error({ problems }, 'configuration reload refused: keeping the running configuration');
    });
  };
  process.on('SIGHUP', onHangUp);
  // `on`, not `once`: a second signal must not end the primary (the default action) while workers drain.
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));

  for (let i = 0; i < count; i++) fork();
  return exit.then(() => exitCode);
}

// A check's worst state across workers wins: one worker draining or cut off makes the fleet not ready.
const SEVERITY: Record<CheckState, number> = { ok: 0, off: 0, readonly: 1, down: 2 };
const STATUS_SEVERITY: Record<ReadinessStatus, number> = { ok: 0, unavailable: 1, draining: 2 };

/** Ready when every one of `expected` workers answered ready; each check as its worst worker sees it, and `workers: down` when one is missing. */
export function fleetReadiness(answers: Readiness[], expected: number): Readiness {
  const checks: Record<string, CheckState> = {};
  let status: ReadinessStatus = 'ok';
  for (const { status: own, checks: ownChecks } of answers) {
    if (STATUS_SEVERITY[own] > STATUS_SEVERITY[status]) status = own;
    for (const [name, state] of Object.entries(ownChecks)) {
      const seen = checks[name];
      if (seen === undefined || SEVERITY[state] > SEVERITY[seen]) checks[name] = state;
    }
  }
  if (answers.length < expected) {
    checks.workers = 'down';
    if (status === 'ok') status = 'unavailable';
  }
  return { status, checks };
}
