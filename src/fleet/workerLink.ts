// A worker's side of server.workers (CONTRACT §18; the primary's is fleet/primary.ts): it starts
// with the configuration the primary checked, asks the primary for what one worker cannot answer
// alone (/metrics and /readyz over every worker, the console's sessions and tickets), and answers
// the primary's gatherings with its own.
import cluster from 'node:cluster';
import type { ConsoleStore, ConsoleStoreCall } from '../storage/operators/index.js';
import type { Config } from '../config/schema.js';
import type { Readiness } from '../listener/health.js';
import { isMessage, type Gathered, type Message, type MetricsJson } from './messages.js';

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
  listening(urls: { url: string; admin?: string; decisions?: string; metrics?: string }): void;
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
