// Several Postgres hosts (CONTRACT §32): libpq's multi-host URL
// (postgres://h1:5432,h2:5432/db?target_session_attrs=read-write), which node-postgres does not
// take (its URL parser refuses the comma), and the one place that decides which host the gateway
// talks to. The pool, the LISTEN connection and everything that holds a lock or a claim go
// through db.ts, which asks a WritableHost for each new connection. No maintained package does
// this for node-postgres; the layer is what libpq does: try each host in order, each within 2 s,
// keep the first that accepts writes, and look again when a connection says it no longer does.
// A URL with one host is passed through as it was, with no check added to its connections (a
// proxy or a managed endpoint that follows the primary: a read-only answer still discards the
// connection, db.ts).
import pg from 'pg';
import { postgresHosts } from '../../config/schema.js';
import { StorageUnavailableError } from '../../errors/index.js';

/** Connecting to one host gives up after this (CONTRACT §32). */
export const HOST_CONNECT_TIMEOUT_MS = 2000;

/** host:port of a single-host URL, as logs and errors name it (never the user or password). */
export function hostAddress(url: string): string {
  return /^postgres(?:ql)?:\/\/(?:[^@/?#]*@)?([^/?#]*)/.exec(url)?.[1] || 'the default host';
}

/**
 * Whether the connection's server takes writes: libpq's read-write check. A standby's transactions
 * are read-only whatever its settings (Postgres' hot standby), as a demoted or read-only-by-default
 * primary's are.
 */
export async function acceptsWrites(client: pg.ClientBase): Promise<boolean> {
  const { rows } = await client.query<{ ro: string }>("SELECT current_setting('transaction_read_only') AS ro");
  return rows[0]!.ro === 'off';
}

/** A host found read-only when a connection was opened to it: the statement is answered 503, the next one looks again. */
export class ReadOnlyHostError extends StorageUnavailableError {
  readonly code = '25006';
  constructor(address: string) {
    super(new Error(`${address} does not accept writes (a standby, or a demoted primary)`));
  }
}

/**
 * The host of a storage URL that takes writes now: the first, in the URL's order, that accepts a
 * connection within 2 s and answers that it is not in recovery. Remembered until a connection to
 * it fails or answers read-only (lost()), then looked for again by the next connection. One
 * search at a time: every connection opened during a failover waits for the same one.
 */
export class WritableHost {
  readonly urls: readonly string[];
  /** More than one host: each new connection is checked, as libpq's target_session_attrs does. */
  readonly several: boolean;
  private current: string | undefined;
  private searching: Promise<string> | undefined;

  constructor(url: string, private readonly connectTimeoutMs = HOST_CONNECT_TIMEOUT_MS) {
    const hosts = postgresHosts(url);
    this.urls = hosts && hosts.target !== undefined ? hosts.urls : [url];
    this.several = this.urls.length > 1;
  }

  /** The single-host URL to open a connection to now. */
  url(): Promise<string> {
    if (!this.several) return Promise.resolve(this.urls[0]!);
    if (this.current) return Promise.resolve(this.current);
    this.searching ??= this.search().finally(() => {
      this.searching = undefined;
    });
    return this.searching;
  }

  /** The host and port node-postgres reads from `url`, one of `urls` (read per connection: a failover's few). */
  endpoint(url: string): { host: string; port: number } {
    const { host, port } = new pg.Client({ connectionString: url });
    return { host, port };
  }

  /** A connection to `url` failed or answered read-only: the next connection looks again. */
  lost(url: string): void {
    if (this.current === url) this.current = undefined;
  }

  private async search(): Promise<string> {
    const why: string[] = [];
    for (const url of this.urls) {
      const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: this.connectTimeoutMs, query_timeout: this.connectTimeoutMs });
      client.on('error', () => {}); // a late socket error after the answer below
      try {
        await client.connect();
        if (await acceptsWrites(client)) {
          this.current = url;
          return url;
        }
        why.push(`${hostAddress(url)}: read-only`);
      } catch (err) {
        why.push(`${hostAddress(url)}: ${err instanceof Error ? err.message : String(err)}`);
      } finally {
        await client.end().catch(() => {});
      }
    }
    throw new StorageUnavailableError(new Error(`no host of the URL accepts writes (${why.join('; ')})`));
  }
}

/**
 * node-postgres' Client, opening each connection to the host `hosts` names now and, with several
 * hosts, checking that it takes writes (as libpq's target_session_attrs=read-write does). One
 * host: pg's own Client, unchanged.
 */
export function hostedClient(hosts: WritableHost): typeof pg.Client {
  if (!hosts.several) return pg.Client;
  return class HostedClient extends pg.Client {
    hostUrl: string | undefined;
    override connect(): Promise<pg.Client>;
    override connect(callback: (err: Error | null, c?: pg.Client) => void): void;
    override connect(callback?: (err: Error | null, c?: pg.Client) => void): Promise<pg.Client> | void {
      const connected = this.connectToWritable();
      if (!callback) return connected;
      connected.then((c) => callback(null, c), (err: Error) => callback(err));
    }

    private async connectToWritable(): Promise<pg.Client> {
      const url = await hosts.url();
      const endpoint = hosts.endpoint(url);
      this.host = endpoint.host;
      this.port = endpoint.port;
      this.hostUrl = url;
      try {
        await super.connect();
        if (!(await acceptsWrites(this))) throw new ReadOnlyHostError(hostAddress(url));
        return this;
      } catch (err) {
        hosts.lost(url);
        // Not awaited: a connection that never opened may never say it ended.
        this.end().catch(() => {});
        throw err;
      }
    }
  };
}
