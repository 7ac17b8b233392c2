// One Database interface over node-postgres (a pool) or embedded PGlite, with the same SQL.
// Connection-level faults become StorageUnavailableError so every caller answers 503, not 500.
import { mkdirSync } from 'node:fs';
import pg from 'pg';
import { StorageUnavailableError } from '../errors.js';

// `date` columns (users.last_usage_date) stay 'YYYY-MM-DD' strings: a Date would shift with the time zone.
const DATE_OID = 1082;
pg.types.setTypeParser(DATE_OID, (v: string) => v);

export interface Queryable {
  query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]>;
}

export interface Database extends Queryable {
  readonly kind: 'postgres' | 'embedded';
  /** Runs fn in one transaction; rolls back when it throws. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  /** Runs a script of several statements (migrations). */
  exec(sql: string): Promise<void>;
  /**
   * Subscribes to NOTIFY on the channels. onState(true) is called once the subscription is live
   * (and again after every reconnection), onState(false) when it is lost: notifications may
   * have been missed in between, so caches must not trust themselves then.
   */
  listen(channels: string[], onNotify: (channel: string, payload: string) => void, onState: (live: boolean) => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

// SQLSTATE classes that mean "the server is not there or not usable", not "your query is wrong".
const UNAVAILABLE_SQLSTATE = /^(08|53|57P0[1-4]|58)/;
const UNAVAILABLE_NODE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN']);

export function isUnavailable(err: unknown): boolean {
  if (err instanceof StorageUnavailableError) return true;
  const e = err as { code?: unknown; message?: unknown } | null;
  if (!e) return false;
  if (typeof e.code === 'string' && (UNAVAILABLE_SQLSTATE.test(e.code) || UNAVAILABLE_NODE_CODES.has(e.code))) return true;
  const message = typeof e.message === 'string' ? e.message : '';
  return /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|connection is closed|Cannot use a pool after calling end/i.test(message);
}

function translate(err: unknown): never {
  throw isUnavailable(err) ? new StorageUnavailableError(err) : err;
}

export function postgresDatabase(url: string): Database {
  const pool = new pg.Pool({
    connectionString: url,
    max: 20,
    // Fail fast when Postgres is down, so requests get a 503 instead of hanging.
    connectionTimeoutMillis: 2000,
    idleTimeoutMillis: 30_000,
    keepAlive: true,
  });
  // An idle client losing its connection must not crash the process; the next query reconnects.
  pool.on('error', () => {});

  const query = async <T>(sql: string, params?: unknown[]): Promise<T[]> => {
    try {
      return (await pool.query(sql, params as unknown[])).rows as T[];
    } catch (err) {
      return translate(err);
    }
  };

  return {
    kind: 'postgres',
    query,
    async exec(sql) {
      await query(sql);
    },
    async transaction(fn) {
      let client: pg.PoolClient;
      try {
        client = await pool.connect();
      } catch (err) {
        return translate(err);
      }
      const tx: Queryable = {
        async query<T>(sql: string, params?: unknown[]) {
          try {
            return (await client.query(sql, params as unknown[])).rows as T[];
          } catch (err) {
            return translate(err);
          }
        },
      };
      let broken: unknown;
      try {
        await tx.query('BEGIN');
        const result = await fn(tx);
        await tx.query('COMMIT');
        return result;
      } catch (err) {
        await client.query('ROLLBACK').catch((e: unknown) => { broken = e; });
        throw err;
      } finally {
        client.release(broken instanceof Error ? broken : undefined);
      }
    },
    async listen(channels, onNotify, onState) {
      let client: pg.Client | undefined;
      let stopped = false;
      let retry: NodeJS.Timeout | undefined;
      let delay = 200;
      const connect = async () => {
        if (stopped) return;
        const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000, keepAlive: true });
        client = c;
        const lost = () => {
          if (client !== c) return;
          client = undefined;
          onState(false);
          c.end().catch(() => {});
          if (!stopped) retry = setTimeout(connect, delay);
          delay = Math.min(delay * 2, 2000);
        };
        c.on('error', lost);
        c.on('end', lost);
        c.on('notification', (n) => onNotify(n.channel, n.payload ?? ''));
        try {
          await c.connect();
          for (const channel of channels) await c.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
          delay = 200;
          if (client === c) onState(true);
        } catch {
          lost();
        }
      };
      await connect();
      return async () => {
        stopped = true;
        clearTimeout(retry);
        const c = client;
        client = undefined;
        await c?.end().catch(() => {});
      };
    },
    async close() {
      await pool.end();
    },
  };
}

export async function embeddedDatabase(dir: string): Promise<Database> {
  // Imported lazily: deployments on a real Postgres never load the WASM build.
  const { PGlite } = await import('@electric-sql/pglite');
  mkdirSync(dir, { recursive: true });
  const db = await PGlite.create(dir, { parsers: { [DATE_OID]: (v: string) => v } });
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
      await db.close();
    },
  };
}

export async function openDatabase(storage: { postgres: string; embeddedDir: string }): Promise<Database> {
  return storage.postgres ? postgresDatabase(storage.postgres) : embeddedDatabase(storage.embeddedDir);
}
