// The live state of an instance: what a reload (SIGHUP) may change without a restart. One holder,
// one swap: a reload builds a whole new snapshot and replaces it at once. A request pins the
// snapshot once, in its RequestContext (requestContext.ts), and sees one consistent configuration
// from start to end, even across a reload. Everything else an instance holds was wired at start
// from the start-up Config and never changes: the live settings are a type of their own, so that
// reading a start-up setting (server.*, storage.*, admin.*) through the live holder does not compile.
import type { Config } from '../config/schema.js';
import { CorsPolicies } from '../routing/cors.js';
import { RouteTable } from '../routing/routeTable.js';
import { readUpstreamTls, type UpstreamTls } from './upstreamTls.js';

/** Setting paths a reload applies to the running instance (reload.ts); the rest need a restart. */
export const LIVE_SETTINGS = ['routes', 'upstreams', 'cors', 'plans', 'auth.rateLimit', 'admin.apiKey', 'hooks'] as const;

/** The settings of LIVE_SETTINGS, and only those. */
export interface LiveSettings {
  readonly routes: Config['routes'];
  readonly upstreams: Config['upstreams'];
  readonly cors: Config['cors'];
  readonly plans: Config['plans'];
  readonly auth: { readonly rateLimit: Config['auth']['rateLimit'] };
  /** The shared admin key (CONTRACT §24): rotated by SIGHUP, read per request by the admin listener. */
  readonly admin: { readonly apiKey: string };
  /** Operator hooks (CONTRACT §24): where the next attempt of a hook message goes, what signs it, which events are written. */
  readonly hooks: Config['hooks'];
}

type LiveSource = Pick<Config, 'routes' | 'upstreams' | 'cors' | 'plans'> & { auth: Pick<Config['auth'], 'rateLimit'>; admin: Pick<Config['admin'], 'apiKey'>; hooks?: Config['hooks'] };

export function liveSettingsOf(config: LiveSource): LiveSettings {
  const { routes, upstreams, cors, plans, hooks } = config;
  return { routes, upstreams, cors, plans, auth: { rateLimit: config.auth.rateLimit }, admin: { apiKey: config.admin.apiKey }, hooks };
}

export interface LiveSnapshot {
  readonly settings: LiveSettings;
  readonly routes: RouteTable;
  /** Undefined when the configuration asks for no CORS at all. */
  readonly cors: CorsPolicies | undefined;
  /** The TLS setup of each https:// upstream origin with `tls`, its files read when the snapshot was made. */
  readonly upstreamTls: ReadonlyMap<string, UpstreamTls>;
}

export class Live {
  private snapshot: LiveSnapshot;

  constructor(settings: LiveSettings) {
    this.snapshot = Live.snapshotOf(settings);
  }

  /** Throws when a file the settings name cannot be read or used (upstream TLS). */
  static snapshotOf(settings: LiveSettings): LiveSnapshot {
    return { settings, routes: new RouteTable(settings), cors: CorsPolicies.of(settings), upstreamTls: readUpstreamTls(settings.upstreams) };
  }

  /** The snapshot now. A request reads it once (its RequestContext); background work per use. */
  get current(): LiveSnapshot {
    return this.snapshot;
  }

  replace(next: LiveSnapshot): void {
    this.snapshot = next;
  }
}
