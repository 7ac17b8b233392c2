// Start-up waits (CONTRACT §25): a gateway started beside its Postgres (docker compose, a pod
// scheduled before its database is ready) waits for it, instead of exiting at once and being
// restarted in a loop by its orchestrator. Only "not there yet" is waited for: a wrong password or
// a missing database will not fix itself, so it stops the start at once.
// pg is imported when waiting: the CLI loads this file for PostgresStartError alone.
import type pg from 'pg';
import { postgresHosts } from '../../config/schema.js';

const FIRST_DELAY_MS = 250;
const MAX_DELAY_MS = 5000;
// One attempt on a host that drops packets gives up after this (or what is left of startTimeout).
const ATTEMPT_TIMEOUT_MS = 5000;
// Postgres not listening, or not reachable yet (a compose service's name resolves once its container runs).
const WAITED_NODE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE']);
// 57P03: starting up, in recovery or shutting down; 53300: too many connections (a rolling
// restart's old instances still hold theirs); class 08: connection exceptions (PgBouncer reports
// a Postgres it cannot reach as 08P01).
// 25006: every host of a multi-host URL is a standby for now (a failover under way, CONTRACT §32).
const WAITED_SQLSTATE = /^(57P03|53300|08|25006$)/;

/** Why Postgres stopped the start, as the operator reads it: where (never the password), the code, the hint. */
export class PostgresStartError extends Error {
  constructor(message: string, readonly postgres: string, readonly code: string, readonly hint: string) {
    super(message);
    this.name = 'PostgresStartError';
  }
}

/** Where each failed attempt is said: the start's logger (pino), or stderr for `gateway migrate`. */
export interface WaitLog {
  warn(fields: Record<string, unknown>, msg: string): void;
}

interface Reason {
  code: string;
  message: string;
  wait: boolean;
}

function reasonOf(err: unknown): Reason {
  const e = err as { code?: unknown; message?: unknown; errors?: Array<{ code?: unknown }> } | null;
  const message = typeof e?.message === 'string' ? e.message : String(err);
  // A name with several addresses fails as an AggregateError whose code may sit on its parts.
  const code = typeof e?.code === 'string' ? e.code : typeof e?.errors?.[0]?.code === 'string' ? e.errors[0].code : undefined;
  if (code) return { code, message, wait: WAITED_NODE_CODES.has(code) || WAITED_SQLSTATE.test(code) };
  // node-postgres's own words: its connection timeout, and a server that hung up before answering.
  if (/timeout expired/i.test(message)) return { code: 'ETIMEDOUT', message, wait: true };
  if (/Connection terminated/i.test(message)) return { code: 'ECONNRESET', message, wait: true };
  return { code: 'ERROR', message, wait: false };
}

/** host:port as node-postgres resolves them from the URL (and PGHOST/PGPORT): no user, no password. */
function postgresAddress(Client: typeof pg.Client, url: string): string {
  const { host, port } = new Client({ connectionString: url });
  return `${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** Connects to `url`; with `writable`, also fails (25006) unless the host takes writes. */
async function connectOnce(Client: typeof pg.Client, url: string, timeoutMs: number, writable?: (c: pg.Client) => Promise<boolean>): Promise<void> {
  const client = new Client({ connectionString: url, connectionTimeoutMillis: timeoutMs });
  client.on('error', () => {}); // a late socket error after the failure is already reported
  try {
    await client.connect();
    if (writable && !(await writable(client))) throw Object.assign(new Error('the host does not accept writes (a standby)'), { code: '25006' });
  } finally {
    await client.end().catch(() => {});
  }
}

function seconds(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}

/**
 * Connects to one host of `urls`, in order: the first that takes writes when there are several
 * (storage/database/pgHosts.ts). Throws what stops the start, if any host said so, else the first failure.
 */
async function connectToAny(Client: typeof pg.Client, urls: string[], timeoutMs: number): Promise<void> {
  if (urls.length === 1) return connectOnce(Client, urls[0]!, timeoutMs);
  const { acceptsWrites } = await import('./pgHosts.js');
  const failures: unknown[] = [];
  for (const url of urls) {
    try {
      return await connectOnce(Client, url, timeoutMs, acceptsWrites);
    } catch (err) {
      failures.push(err);
    }
  }
  throw failures.find((err) => !reasonOf(err).wait) ?? failures[0];
}

/**
 * Resolves once Postgres at `url` accepts a connection (with several hosts, once one of them
 * takes writes); retries what is "not there yet" with a
 * backoff (250 ms doubling to 5 s) for up to timeoutMs, logging each failed attempt at warn.
 * Throws PostgresStartError when the time is up, or at once on anything else (authentication,
 * a missing database, TLS).
 */
export async function waitForPostgres(url: string, timeoutMs: number, log: WaitLog): Promise<void> {
  const { default: { Client } } = await import('pg');
  const hosts = postgresHosts(url);
  const urls = hosts && hosts.target !== undefined ? hosts.urls : [url];
  const postgres = urls.map((u) => postgresAddress(Client, u)).join(',');
  const deadline = Date.now() + timeoutMs;
  let delay = FIRST_DELAY_MS;
  for (;;) {
    let reason: Reason;
    try {
      await connectToAny(Client, urls, Math.max(100, Math.min(ATTEMPT_TIMEOUT_MS, deadline - Date.now())));
      return;
    } catch (err) {
      reason = reasonOf(err);
    }
    if (!reason.wait) {
      throw new PostgresStartError(`cannot use Postgres at ${postgres}: ${reason.message} (${reason.code})`, postgres, reason.code,
        'check DATABASE_URL (storage.postgres): its user, password and database name; this is not retried');
    }
    const left = deadline - Date.now();
    if (left <= 0) {
      throw new PostgresStartError(`Postgres at ${postgres} did not answer within ${seconds(timeoutMs)} (${reason.code})`, postgres, reason.code,
        'check DATABASE_URL (storage.postgres) and that Postgres runs and is reachable from here; storage.startTimeout sets how long the start waits');
    }
    const retryInMs = Math.min(delay, left);
    log.warn({ postgres, code: reason.code, retryInMs }, `waiting for Postgres at ${postgres} (${reason.code})`);
    await new Promise((resolve) => setTimeout(resolve, retryInMs));
    delay = Math.min(delay * 2, MAX_DELAY_MS);
  }
}
