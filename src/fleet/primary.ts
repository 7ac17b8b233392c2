// server.workers (CONTRACT §18): N processes serving the same ports through node:cluster, each a
// whole instance (its own pools, caches and in-process fallbacks) on the shared Postgres. The
// primary opens no storage and serves nothing. It checks the configuration once (at start and on
// SIGHUP) and hands that very result to every worker, all or none, so no worker ever runs a file
// the others refused. It starts a new worker when one dies, and forwards SIGTERM and SIGINT (each
// worker drains as a single instance does). It also gathers what one worker cannot answer alone:
// /metrics (every worker's registry, summed by prom-client's AggregatorRegistry) and /readyz
// (ready when every worker is). A worker asks it over the IPC channel; the primary asks every
// worker and answers the one that asked. It also holds the console's sessions and sign-in tickets
// (storage/operators/consoleStore.ts): whichever worker a connection reaches knows them.
import cluster, { type Worker } from 'node:cluster';
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import type { Logger } from 'pino';
import { AggregatorRegistry } from 'prom-client';
import { memoryConsoleStore } from '../storage/operators/index.js';
import type { Config } from '../config/schema.js';
import type { CheckState, Readiness, ReadinessStatus } from '../listener/health.js';
import { isMessage, type Gathered, type Message, type MetricsJson } from './messages.js';

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

export interface PrimaryOptions {
  config: Config;
  count: number;
  /** Reads and checks the file again (SIGHUP); throws ConfigError when it is refused. */
  load(): Promise<Config>;
  log: Logger;
  /** How long a worker may take to drain and close after SIGTERM before it is killed. */
  stopTimeoutMs: number;
  /** Once every worker serves: the listeners' addresses (the same in every worker). */
  listening(urls: { url: string; admin?: string; decisions?: string; metrics?: string }): void;
}

/**
 * Runs the workers until SIGTERM or SIGINT; resolves with the exit code: 0 once every worker has
 * stopped, 1 if one could not start at all (it logged why).
 */
export function runPrimary(options: PrimaryOptions): Promise<number> {
  // Structured clone, not JSON, on the channel: the configuration arrives as it was checked.
  cluster.setupPrimary({ serialization: 'advanced' });
  return new Primary(options).run();
}

interface WorkerState {
  startedAt: number;
  listening: boolean;
}

interface Gathering {
  waiting: Set<Worker>;
  values: unknown[];
  done(): void;
}

/** The primary's state: its workers, the gatherings under way, and whether it is stopping. */
class Primary {
  private config: Config;
  private readonly workers = new Map<Worker, WorkerState>();
  private readonly gatherings = new Map<number, Gathering>();
  // The console's, for every worker: gone with the primary, as one instance's are with it.
  private readonly consoleStore = memoryConsoleStore();
  private nextGathering = 0;
  private started = false;
  private stopping = false;
  private quickDeaths = 0;
  private exitCode = 0;
  private resolveExit!: (code: number) => void;
  private readonly onHangUp = () => this.reload();

  constructor(private readonly options: PrimaryOptions) {
    this.config = options.config;
  }

  run(): Promise<number> {
    const exit = new Promise<number>((resolve) => { this.resolveExit = resolve; });
    process.on('SIGHUP', this.onHangUp);
    // `on`, not `once`: a second signal must not end the primary (the default action) while workers drain.
    process.on('SIGTERM', () => this.stop('SIGTERM'));
    process.on('SIGINT', () => this.stop('SIGINT'));
    for (let i = 0; i < this.options.count; i++) this.fork();
    return exit.then(() => this.exitCode);
  }

  private listeningWorkers(): Worker[] {
    return [...this.workers].filter(([, s]) => s.listening).map(([w]) => w);
  }

  private fork(): void {
    const worker = cluster.fork();
    this.workers.set(worker, { startedAt: Date.now(), listening: false });
    worker.on('message', (message: unknown) => { if (isMessage(message)) this.receive(worker, message); });
    worker.on('exit', (code, signal) => this.workerExited(worker, code, signal));
  }

  private receive(worker: Worker, message: Message): void {
    const reply = (id: number) => (value: unknown) => {
      if (worker.isConnected()) worker.send({ gateway: 'answer', id, value } satisfies Message);
    };
    switch (message.gateway) {
      case 'join': worker.send({ gateway: 'start', config: this.config } satisfies Message); break;
      case 'listening': this.workerListening(worker, message); break;
      case 'ask': void this.answer(message.kind).then(reply(message.id)); break;
      case 'console': void this.consoleStore.call(message.call).then(reply(message.id)); break;
      case 'gathered': {
        const gathering = this.gatherings.get(message.id);
        if (!gathering?.waiting.delete(worker)) return;
        if (message.value !== undefined) gathering.values.push(message.value);
        if (gathering.waiting.size === 0) gathering.done();
        break;
      }
    }
  }

  private workerListening(worker: Worker, urls: { url: string; admin?: string; decisions?: string; metrics?: string }): void {
    this.workers.get(worker)!.listening = true;
    if (!this.started && this.listeningWorkers().length === this.options.count) {
      this.started = true;
      this.options.listening({ url: urls.url, admin: urls.admin, decisions: urls.decisions, metrics: urls.metrics });
    }
  }

  /** Every serving worker's answer to `kind` (those that answer within GATHER_TIMEOUT_MS). */
  private gather(kind: Gathered): Promise<unknown[]> {
    return new Promise<unknown[]>((resolve) => {
      const id = this.nextGathering++;
      const waiting = new Set(this.listeningWorkers());
      const values: unknown[] = [];
      const done = () => {
        clearTimeout(timer);
        this.gatherings.delete(id);
        resolve(values);
      };
      const timer = setTimeout(done, GATHER_TIMEOUT_MS);
      this.gatherings.set(id, { waiting, values, done });
      for (const worker of waiting) worker.send({ gateway: 'gather', id, kind } satisfies Message);
      if (waiting.size === 0) done();
    });
  }

  private async answer(kind: Gathered): Promise<unknown> {
    const values = await this.gather(kind);
    if (kind === 'metrics') return AggregatorRegistry.aggregate(values.filter((v): v is MetricsJson => Array.isArray(v))).metrics();
    return fleetReadiness(values.filter((v): v is Readiness => typeof v === 'object' && v !== null), this.options.count);
  }

  private workerExited(worker: Worker, code: number | null, signal: string | null): void {
    const { log } = this.options;
    const state = this.workers.get(worker)!;
    this.workers.delete(worker);
    for (const gathering of this.gatherings.values()) {
      if (gathering.waiting.delete(worker) && gathering.waiting.size === 0) gathering.done();
    }
    if (this.stopping) {
      if (this.workers.size === 0) this.resolveExit(0);
      return;
    }
    if (!this.started) {
      // It logged why; the others cannot do better with the same configuration.
      log.fatal({ worker: worker.id, code, signal }, 'a worker could not start: stopping');
      this.stop('SIGTERM', 1);
      return;
    }
    const lived = Date.now() - state.startedAt;
    this.quickDeaths = lived < SHORT_LIFE_MS ? this.quickDeaths + 1 : 0;
    const pauseMs = this.quickDeaths === 0 ? 0 : Math.min(RESTART_PAUSE_MAX_MS, RESTART_PAUSE_MIN_MS * 2 ** (this.quickDeaths - 1));
    log.error({ worker: worker.id, code, signal, livedMs: lived, restartInMs: pauseMs }, 'worker stopped: starting another');
    setTimeout(() => { if (!this.stopping) this.fork(); }, pauseMs);
  }

  private killAll(): void {
    for (const worker of this.workers.keys()) worker.process.kill('SIGKILL');
  }

  private stop(signal: NodeJS.Signals, code = 0): void {
    const { log } = this.options;
    if (this.stopping) {
      // A second signal, as for one instance: at once.
      log.error({ signal }, `second ${signal}: stopping every worker now`);
      this.exitCode = 1;
      this.killAll();
      return;
    }
    this.stopping = true;
    this.exitCode = code;
    process.off('SIGHUP', this.onHangUp);
    if (code === 0) log.info({ signal, workers: this.workers.size }, 'shutting down: every worker finishes its requests in flight');
    if (this.workers.size === 0) this.resolveExit(code);
    for (const worker of this.workers.keys()) {
      if (signal === 'SIGINT' && worker.isConnected()) worker.send({ gateway: 'stop' } satisfies Message);
      else worker.process.kill('SIGTERM');
    }
    // A worker still draining after its time is stopped: the primary does not wait forever.
    setTimeout(() => this.killAll(), this.options.stopTimeoutMs).unref();
  }

  private reload(): void {
    const { log } = this.options;
    log.info({ signal: 'SIGHUP' }, 'reloading the configuration');
    this.options.load().then((next) => {
      this.config = next;
      for (const worker of this.workers.keys()) worker.send({ gateway: 'reload', config: next } satisfies Message);
      log.info({ workers: this.workers.size }, 'configuration handed to every worker');
    }, (err: unknown) => {
      const problems = (err as { problems?: string[] }).problems ?? [err instanceof Error ? err.message : String(err)];
      log.error({ problems }, 'configuration reload refused: keeping the running configuration');
    });
  }
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
