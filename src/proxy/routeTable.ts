// The route table compiled from gateway.yaml: longest prefix wins, on segment boundaries.
import type { Config, RouteConfig, UpstreamConfig } from '../config/schema.js';

export interface CompiledRoute extends RouteConfig {
  upstreamName: string;
  target: UpstreamConfig;
  allowedMethods: Set<string> | null; // null: every method
}

export type Match =
  | { kind: 'route'; route: CompiledRoute; upstreamPath: string }
  | { kind: 'method-not-allowed'; route: CompiledRoute }
  | { kind: 'none' };

export class RouteTable {
  private readonly routes: CompiledRoute[];

  constructor(config: Pick<Config, 'routes' | 'upstreams'>) {
    this.routes = config.routes
      .map((route) => ({
        ...route,
        upstreamName: route.upstream,
        target: config.upstreams[route.upstream]!,
        // HEAD is read as GET, as every HTTP server does.
        allowedMethods: route.methods ? new Set([...route.methods, ...(route.methods.includes('GET') ? ['HEAD'] : [])]) : null,
      }))
      .sort((a, b) => b.path.length - a.path.length);
  }

  get all(): readonly CompiledRoute[] {
    return this.routes;
  }

  /** `path` must already be normalized (no dot segments): see normalizePath. */
  match(method: string, path: string): Match {
    for (const route of this.routes) {
      const p = route.path;
      if (p !== '/' && path !== p && !path.startsWith(`${p}/`)) continue;
      if (route.allowedMethods && !route.allowedMethods.has(method)) return { kind: 'method-not-allowed', route };
      const rest = p === '/' ? path : path.slice(p.length);
      const upstreamPath = route.rewritePrefix === undefined ? path : joinPath(route.rewritePrefix, rest);
      return { kind: 'route', route, upstreamPath };
    }
    return { kind: 'none' };
  }
}

function joinPath(prefix: string, rest: string): string {
  const joined = `${prefix.replace(/\/+$/, '')}${rest}`;
  return joined.startsWith('/') ? joined : `/${joined}`;
}

/**
 * The path as an upstream will understand it: dot segments (also percent-encoded) resolved and
 * repeated slashes folded, so `/public/../paid` is matched, guarded and forwarded as `/paid`,
 * never matched as one route and served as another. Undefined when it cannot be a path.
 */
export function normalizePath(rawPath: string): string | undefined {
  if (!rawPath.startsWith('/') || rawPath.includes('\\')) return undefined;
  try {
    return new URL(rawPath.replace(/\/{2,}/g, '/'), 'http://gateway.invalid').pathname;
  } catch {
    return undefined;
  }
}
