// The live state of an instance: what a reload (SIGHUP) may change without a restart. One holder,
// one swap: a reload builds a whole new snapshot and replaces it at once, so a request reads
// `live.current` once and sees one consistent configuration from start to end, even across a
// reload. Everything else an instance holds was wired at start and never changes.
import type { Config } from './config/schema.js';
import { CorsPolicies } from './routing/cors.js';
import { RouteTable } from './routing/routeTable.js';
import { readUpstreamTls, type UpstreamTls } from './proxy/upstreamTls.js';

export interface LiveSnapshot {
  readonly config: Config;
  readonly routes: RouteTable;
  /** Undefined when the configuration asks for no CORS at all. */
  readonly cors: CorsPolicies | undefined;
  /** The TLS setup of each https:// upstream origin with `tls`, its files read when the snapshot was made. */
  readonly upstreamTls: ReadonlyMap<string, UpstreamTls>;
}

export class Live {
  private snapshot: LiveSnapshot;

  constructor(config: Config) {
    this.snapshot = Live.snapshotOf(config);
  }

  /** Throws when a file the configuration names cannot be read or used (upstream TLS). */
  static snapshotOf(config: Config): LiveSnapshot {
    return { config, routes: new RouteTable(config), cors: CorsPolicies.of(config), upstreamTls: readUpstreamTls(config.upstreams) };
  }

  get current(): LiveSnapshot {
    return this.snapshot;
  }

  replace(next: LiveSnapshot): void {
    this.snapshot = next;
  }
}
