// CORS (CONTRACT §10): which pages on other origins may call the gateway, and read its answers.
// The gateway answers preflights itself, before any guard runs: a browser's preflight never carries
// the Authorization header or the API key, so a guarded route would refuse it with 401 and the
// page could never make its real request. The gateway's own errors carry the headers too, or a
// page could not read the French message of its 401, 403 or 429.
//
// Not @fastify/cors: it passes a preflight from an origin it refuses on to the route (a guarded
// route then answers 401, where the contract wants 204), it registers an `OPTIONS *` route that
// collides with the proxy's catch-all, its per-route settings are fastify route options (the
// gateway's routes are a table that a reload swaps), and its Allow-Methods is one fixed list
// where the contract wants the matched route's methods.
import { CORS_DEFAULTS, type Config, type CorsConfig, type RouteConfig } from '../config/schema.js';
import type { Match } from './routeTable.js';

/** One CORS policy (the global one, or a route's with its override), its header values made once. */
export class CorsPolicy {
  private readonly anyOrigin: boolean;
  private readonly origins: ReadonlySet<string>;
  private readonly response: Record<string, string>;
  private readonly preflight: Record<string, string>;

  constructor(config: CorsConfig) {
    this.anyOrigin = config.origins.includes('*');
    this.origins = new Set(config.origins);
    this.response = {};
    if (config.credentials) this.response['access-control-allow-credentials'] = 'true';
    if (config.exposeHeaders.length) this.response['access-control-expose-headers'] = config.exposeHeaders.join(', ');
    this.preflight = {};
    if (config.credentials) this.preflight['access-control-allow-credentials'] = 'true';
    if (config.headers.length) this.preflight['access-control-allow-headers'] = config.headers.join(', ');
    this.preflight['access-control-max-age'] = String(Math.floor(config.maxAge / 1000));
  }

  allows(origin: string): boolean {
    // `null` is the origin of sandboxed frames and file:// pages: anybody can make one.
    return origin !== 'null' && (this.anyOrigin || this.origins.has(origin));
  }

  /** The headers of an actual response to an allowed origin. */
  responseHeaders(origin: string): Record<string, string> {
    return { 'access-control-allow-origin': origin, ...this.response };
  }

  /** The headers of a preflight's answer to an allowed origin, for a path that takes `methods`. */
  preflightHeaders(origin: string, methods: Iterable<string>): Record<string, string> {
    const allowed = [...methods].join(', ');
    return { 'access-control-allow-origin': origin, ...(allowed ? { 'access-control-allow-methods': allowed } : {}), ...this.preflight };
  }
}

/** The policies of one configuration: the global one, and each route's (its override on the global one). */
export class CorsPolicies {
  readonly global: CorsPolicy | undefined;
  private readonly byRoute = new Map<string, CorsPolicy>();

  private constructor(config: Pick<Config, 'cors' | 'routes'>) {
    this.global = config.cors && new CorsPolicy(config.cors);
    for (const route of config.routes) {
      if (route.cors) this.byRoute.set(route.path, new CorsPolicy(effective(config.cors, route)));
    }
  }

  /** Undefined when nothing in the configuration asks for CORS: then the gateway adds nothing. */
  static of(config: Pick<Config, 'cors' | 'routes'>): CorsPolicies | undefined {
    return config.cors || config.routes.some((route) => route.cors) ? new CorsPolicies(config) : undefined;
  }

  forRoute(path: string): CorsPolicy | undefined {
    return this.byRoute.get(path) ?? this.global;
  }

  /** The policy covering a request: its route's, or the global one where no route matched (own endpoints). */
  covering(match: Match): CorsPolicy | undefined {
    return match.kind === 'none' ? this.global : this.forRoute(match.route.path);
  }
}

/** A route's policy: what its override names, the global policy (or the defaults) for the rest. */
function effective(global: CorsConfig | undefined, route: RouteConfig): CorsConfig {
  const override = Object.fromEntries(Object.entries(route.cors ?? {}).filter(([, value]) => value !== undefined));
  // The schema makes sure `origins` comes from one of the two.
  return { ...CORS_DEFAULTS, ...global, ...override } as CorsConfig;
}
