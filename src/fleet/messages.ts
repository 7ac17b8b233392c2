// What travels on the IPC channel between the fleet's primary (fleet/primary.ts) and its workers
// (fleet/workerLink.ts), sent with structured clone: the configuration arrives as it was checked.
import type { MetricObjectWithValues, MetricValue } from 'prom-client';
import type { ConsoleStoreCall } from '../storage/operators/index.js';
import type { Config } from '../config/schema.js';

export type Gathered = 'metrics' | 'readiness';
export type MetricsJson = MetricObjectWithValues<MetricValue<string>>[];

/** What travels on the IPC channel between the primary and a worker; `gateway` tells ours from node's and prom-client's. */
export type Message =
  | { gateway: 'join' } // worker → primary, once it listens to the channel (a message sent before would be lost)
  | { gateway: 'start' | 'reload'; config: Config } // primary → worker
  | { gateway: 'stop' } // primary → worker: close without draining (the primary's SIGINT)
  | { gateway: 'listening'; url: string; admin?: string; decisions?: string; metrics?: string } // worker → primary
  | { gateway: 'ask'; id: number; kind: Gathered } // worker → primary
  | { gateway: 'console'; id: number; call: ConsoleStoreCall } // worker → primary, answered with `answer`
  | { gateway: 'gather'; id: number; kind: Gathered } // primary → every worker
  | { gateway: 'gathered'; id: number; value: unknown } // worker → primary
  | { gateway: 'answer'; id: number; value: unknown }; // primary → the worker that asked

export const isMessage = (m: unknown): m is Message => typeof m === 'object' && m !== null && typeof (m as { gateway?: unknown }).gateway === 'string';
