// One Database interface over node-postgres (a pool) or embedded PGlite, with the same SQL.
// Connection-level faults become StorageUnavailableError so every caller answers 503, not 500.
import { mkdirSync } from 'node:fs';
import pg from 'pg';
import { holdDirectory } from './dirLock.js';
import { CommitInDoubtError, isUnavailable, translate, UNREPLICATED_COMMIT_SQLSTATE } from './failures.js';
import { HOST_CONNECT_TIMEOUT_MS, hostedClient, WritableHost } from './pgHosts.js';

// `date` columns (users.last_usage_date) stay 'YYYY-MM-DD' strings: a Date would shift with the time zone.
const DATE_OID = 1082;
/**
 * The type parsers of this Database's connections: pg's own, but `date` as text. Given to each
 * pool and client, never set on pg.types, which would change every other user of pg in the process.
 */
export const PG_TYPES: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: string) => (oid === DATE_OID ? (v: string) => v : pg.types.getTypeParser(oid, format as 'text'))) as pg.CustomTypesConfig['getTypeParser'],
};

export interface Queryable {
  query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]>;
}

export interface TransactionOptions {
  /** Per-statement timeout instead of the database's (Postgres only): migrations need a long one. */
  queryTimeoutMs?: number;
}

export interface Database extends Queryable {
  readonly kind: 'postgres' | 'embedded';
  /** Runs fn in one transaction; rolls back when it throws. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>, options?: TransactionOptions): Promise<T>;
  /** Runs a script of several statements (migrations). */
  exec(sql: string): Promise<void>;
  /**
   * Subscribes to NOTIFY on the channels. onState(true) is called once the subscription is live
   * (and again after every reconnection), onState(false) when it is lost: notifications may
   * have been missed in between, so caches must not trust themselves then.
   */
  listen(channels: string[], onNotify: (channel: string, payload: string) => void, onState: (live: boolean) => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
  /** Postgres only: the transactions whose COMMIT was sent and whose answer was lost (CONTRACT §32). */
  readonly stats?: StorageStats;
}

export interface StorageStats {
  inDoubtCommits: number;
}

// A connection whose packets are dropped (firewall, partition, hung server) neither answers nor
// fails, and TCP keepalive takes minutes to notice: without a client-side limit every request that
// needs the database would hang. Our queries are single-row lookups and updates that take
// milliseconds, so 5 s only cuts a connection that is gone, and is well under the 30 s or more
// that clients and load balancers wait, so they get the 503 instead of their own timeout.
// node-postgres then rejects with 'Query read timeout' (-> 503) and the pool destroys the client.
// storage.queryTimeout sets it (CONTRACT §32); this is its default.
export const QUERY_TIMEOUT_MS = 5000;
export const DEFAULT_POOL_SIZE = 20;
// The LISTEN connection only receives, so it would never notice it is cut off: it sends a trivial
// statement this often, under the same timeout, and counts as lost when that fails.
const LISTEN_PING_EVERY_MS = 1000;
// TCP keepalives on every connection, first probe after this much silence: an idle pooled
// connection to a host that went away is found dead before a request picks it (the query timeout
// and the LISTEN ping bound what a request or the change feed waits meanwhile).
const KEEPALIVE_IDLE_MS = 10_000;

/**
 * The client-side limit alone leaves the statement running on the server: a counting UPDATE that
 * waits on a locked row (an operator's open transaction) past it still commits once the lock goes,
 * using up the day of a request already answered 503. So Postgres is told to give up a little
 * earlier (statement_timeout): a statement the client gives up on has been cancelled and rolled back.
 * It is set with SET LOCAL in every transaction, not as a connection's startup parameter: PgBouncer
 * in transaction mode drops startup parameters (and refuses to start without being told to ignore
 * them), and a transaction's SET LOCAL goes wherever the transaction goes.
 */
function serverTimeoutMs(clientTimeoutMs: number): number {
  return Math.max(1, Math.floor(clientTimeoutMs * 0.8));
}

export interface PostgresOptions {
  /** Client-side limit on every ordinary query (storage.queryTimeout); tests shorten it. */
  queryTimeoutMs?: number;
  /**
   * Where LISTEN connects (storage.postgresDirect): a pooler in transaction mode (PgBouncer)
   * hands each transaction to any server connection, so notifications never come back through it.
   */
  listenUrl?: string;
  /** Connections the pool may open (storage.poolSize). */
  poolSize?: number;
  /** Told of each in-doubt commit (the instance logs it). */
  onInDoubt?: (err: unknown) => void;
}

/** A pooled connection, with the host it was opened to (pgHosts.ts). */
type HostedClient = pg.PoolClient & { hostUrl?: string };

export function postgresDatabase(url: string, options: PostgresOptions = {}): Database {
  const queryTimeout = options.queryTimeoutMs ?? QUERY_TIMEOUT_MS;
  const hosts = new WritableHost(url);
  const pool = new pg.Pool({
    connectionString: hosts.urls[0],
    Client: hostedClient(hosts),
    types: PG_TYPES,
    max: options.poolSize ?? DEFAULT_POOL_SIZE,
    // Fail fast when Postgres is down, so requests get a 503 instead of hanging.
    connectionTimeoutMillis: HOST_CONNECT_TIMEOUT_MS,
    query_timeout: queryTimeout,
    idleTimeoutMillis: 30_000,
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_IDLE_MS,
  });
  // An idle client losing its connection must not crash the process; the next query reconnects.
  pool.on('error', () => {});
  // Nor any connection between the pool's listener and a statement's (one released destroyed
  // after a fault, say): a stray message reaching it (a FATAL as a partition healed, seen in CI)
  // is an 'error' event, and unheard, one ends the process.
  pool.on('connect', (client) => client.on('error', () => {}));
  const stats: StorageStats = { inDoubtCommits: 0 };
  const connection = { pool, hosts, stats, onInDoubt: options.onInDoubt };
  // listenUrl may name other hosts (a pooler in front, the servers direct): a choice of its own.
  const listenHosts = options.listenUrl && options.listenUrl !== url ? new WritableHost(options.listenUrl) : hosts;

  return {
    kind: 'postgres',
    stats,
    query: (sql, params) => onConnection(connection, queryTimeout, (tx) => tx.query(sql, params)),
    async exec(sql) {
      await onConnection(connection, queryTimeout, (tx) => tx.query(sql));
    },
    transaction: (fn, txOptions = {}) => onConnection(connection, txOptions.queryTimeoutMs ?? queryTimeout, fn, true),
    listen: (channels, onNotify, onState) => listenWithReconnect({ hosts: listenHosts, queryTimeout }, channels, onNotify, onState),
    async close() {
      await pool.end();
    },
  };
}

interface PoolConnection {
  pool: pg.Pool;
  hosts: WritableHost;
  stats: StorageStats;
  onInDoubt: ((err: unknown) => void) | undefined;
}

/**
 * `fn` on a connection of the pool, under a per-statement limit on both sides; in one transaction
 * when `transaction` is set. A connection that fails as unavailable (lost, timed out, read-only,
 * shutting down) is destroyed rather than pooled, and its host looked for again by the next one.
 */
async function onConnection<T>(connection: PoolConnection, timeoutMs: number, fn: (tx: Queryable) => Promise<T>, transaction = false): Promise<T> {
  let client: HostedClient;
  try {
    client = await connection.pool.connect();
  } catch (err) {
    return translate(err);
  }
  // A checked-out connection reports its loss (Postgres restarting, a terminated backend, a
  // stray message after a fault) as an 'error' event, not through a query, when it comes
  // between two statements; unheard, that event is an uncaught exception that ends the process.
  // Heard, it marks the connection broken: the next statement fails as unavailable and the
  // release below destroys it instead of pooling it.
  let broken = false;
  const onError = () => { broken = true; };
  client.on('error', onError);
  const tx: Queryable = {
    async query<R>(sql: string, params?: unknown[]) {
      try {
        // Without a query_timeout of its own, the pool's applies. node-postgres reads it per
        // query (lib/client.js), but @types/pg does not declare it.
        const config: pg.QueryConfig & { query_timeout?: number } = { text: sql, values: params, query_timeout: timeoutMs };
        return (await client.query(config)).rows as R[];
      } catch (err) {
        return translate(err);
      }
    },
  };
  try {
    if (!transaction) return await fn(tx);
    await tx.query('BEGIN');
    await tx.query(`SET LOCAL statement_timeout = ${serverTimeoutMs(timeoutMs)}`);
    const result = await fn(tx);
    await commit(connection, client, tx);
    return result;
  } catch (err) {
    // A connection that failed or timed out would only make ROLLBACK wait (and time out) too:
    // releasing it with the error destroys it, and Postgres aborts the transaction on disconnect.
    if (isUnavailable(err)) broken = true;
    else if (transaction && !broken) await client.query('ROLLBACK').catch(() => { broken = true; });
    throw err;
  } finally {
    client.removeListener('error', onError);
    if (broken) connection.hosts.lost(client.hostUrl ?? connection.hosts.urls[0]!);
    client.release(broken); // true: destroyed, not pooled
  }
}

/**
 * COMMIT; its answer lost is an in-doubt commit: counted, told, and thrown as such. So is one
 * answered with a warning that it may not have reached the standby: durable here, maybe not after
 * a failover, so nothing that depends on it is handed out.
 */
async function commit(connection: PoolConnection, client: pg.PoolClient, tx: Queryable): Promise<void> {
  let unreplicated: { message?: string; code?: string; detail?: string } | undefined;
  const onNotice = (notice: { message?: string; code?: string; detail?: string }) => {
    if (UNREPLICATED_COMMIT_SQLSTATE.test(notice.code ?? '')) unreplicated ??= notice;
  };
  client.on('notice', onNotice);
  try {
    await tx.query('COMMIT');
  } catch (err) {
    if (!isUnavailable(err)) throw err;
    inDoubt(connection, err);
  } finally {
    client.removeListener('notice', onNotice);
  }
  if (unreplicated) inDoubt(connection, new Error(`COMMIT answered with a warning: ${unreplicated.message}${unreplicated.detail ? ` (${unreplicated.detail})` : ''}`));
}

function inDoubt(connection: PoolConnection, err: unknown): never {
  connection.stats.inDoubtCommits++;
  connection.onInDoubt?.(err);
  throw new CommitInDoubtError(err);
}

/**
 * LISTEN on a connection of its own, to the host that takes writes (notifications are sent by
 * the primary's transactions), pinged so a silent cut is noticed, reconnected with backoff;
 * onState says when notifications may have been missed.
 */
async function listenWithReconnect(
  connection: { hosts: WritableHost; queryTimeout: number },
  channels: string[],
  onNotify: (channel: string, payload: string) => void,
  onState: (live: boolean) => void,
): Promise<() => Promise<void>> {
  let client: pg.Client | undefined;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined; // the next ping while live, the next attempt while lost
  let delay = 200;
  const { hosts } = connection;
  // The ping repeats a LISTEN (a no-op on a channel already listened to), so the connection
  // still shows as the LISTEN one in pg_stat_activity, where operators and tests look for it.
  const ping = channels[0] ? `LISTEN ${pg.escapeIdentifier(channels[0])}` : 'SELECT 1';
  const connect = async () => {
    if (stopped) return;
    const c = new (hostedClient(hosts))({
      connectionString: hosts.urls[0], types: PG_TYPES, connectionTimeoutMillis: HOST_CONNECT_TIMEOUT_MS, query_timeout: connection.queryTimeout,
      keepAlive: true, keepAliveInitialDelayMillis: KEEPALIVE_IDLE_MS,
    }) as pg.Client & { hostUrl?: string };
    client = c;
    const lost = () => {
      if (client !== c) return;
      client = undefined;
      clearTimeout(timer);
      hosts.lost(c.hostUrl ?? hosts.urls[0]!);
      onState(false);
      // With a query in flight, end() destroys the socket rather than wait for a goodbye.
      c.end().catch(() => {});
      if (!stopped) timer = setTimeout(connect, delay);
      delay = Math.min(delay * 2, 2000);
    };
    const check = () => {
      c.query(ping).then(() => {
        if (client === c) timer = setTimeout(check, LISTEN_PING_EVERY_MS);
      }, lost);
    };
    c.on('error', lost);
    c.on('end', lost);
    c.on('notification', (n) => onNotify(n.channel, n.payload ?? ''));
    try {
      await c.connect();
      for (const channel of channels) await c.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
      delay = 200;
      if (client === c) {
        onState(true);
        timer = setTimeout(check, LISTEN_PING_EVERY_MS);
      }
    } catch {
      lost();
    }
  };
  await connect();
  return async () => {
    stopped = true;
    clearTimeout(timer);
    const c = client;
    client = undefined;
    await c?.end().catch(() => {});
  };
}

export async function embeddedDatabase(dir: string): Promise<Database> {
  // Imported lazily: deployments on a real Postgres never load the WASM build.
  const { PGlite } = await import('@electric-sql/pglite');
  mkdirSync(dir, { recursive: true });
  const release = holdDirectory(dir);
  const db = await PGlite.create(dir, { parsers: { [DATE_OID]: (v: string) => v } }).catch((err: unknown) => {
    release();
    throw err;
  });
  return {
    kind: 'embedded',
    async query<T>(sql: string, params?: unknown[]) {
      return (await db.query<T>(sql, params)).rows;
    },
    async exec(sql) {
      await db.exec(sql);
    },
    async transaction(fn) {
      return db.transaction(async (tx) => fn({
        async query<T>(sql: string, params?: unknown[]) {
          return (await tx.query<T>(sql, params)).rows;
        },
      }));
    },
    async listen(channels, onNotify, onState) {
      // In-process: the subscription cannot be lost while the database is open.
      const stops = await Promise.all(channels.map((channel) => db.listen(channel, (payload) => onNotify(channel, payload))));
      onState(true);
      return async () => {
        await Promise.all(stops.map((stop) => stop()));
      };
    },
    async close() {
      try {
        await db.close();
      } finally {
        release();
      }
    },
  };
}

/** The storage settings a Database is opened from (config's storage block). */
export interface StorageSettings {
  postgres: string;
  postgresDirect?: string;
  poolSize?: number;
  queryTimeout?: number;
  embeddedDir: string;
}

export async function openDatabase(storage: StorageSettings, onInDoubt?: (err: unknown) => void): Promise<Database> {
  return storage.postgres
    ? postgresDatabase(storage.postgres, { listenUrl: storage.postgresDirect, poolSize: storage.poolSize, queryTimeoutMs: storage.queryTimeout, onInDoubt })
    : embeddedDatabase(storage.embeddedDir);
}

/** A Postgres integer column's largest value: a larger id names no row, and would fail the query (500). */
const MAX_INTEGER_ID = 2 ** 31 - 1;

/** The id of a row with an integer key, from outside (a URL, a token, a body): a decimal or number within range, else undefined. */
export function parseIntegerId(value: unknown): number | undefined {
  const n = typeof value === 'string' && /^[1-9]\d{0,9}$/.test(value) ? Number(value) : typeof value === 'number' ? value : NaN;
  return Number.isInteger(n) && n >= 1 && n <= MAX_INTEGER_ID ? n : undefined;
}
