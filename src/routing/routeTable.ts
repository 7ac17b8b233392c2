// The route table compiled from gateway.yaml: longest prefix wins, on segment boundaries.
import { HTTP_METHODS, type Config, type RouteConfig, type UpstreamConfig } from '../config/schema.js';
import { matchKey, matchKeys } from './paths.js';

/** An upstream as a route reaches it: its configuration and its name (the assertion's `aud`). */
export interface Upstream extends UpstreamConfig {
  name: string;
}

export interface CompiledRoute extends RouteConfig {
  /** `path` as matchKey() reads it, and how many segments it has. */
  key: string;
  segments: number;
  /** Undefined for a decision-only route (CONTRACT §11): decided on the decisions listener, never proxied. */
  target: Upstream | undefined;
  allowedMethods: ReadonlySet<string>;
}

// A route without `methods` takes every method the gateway proxies; TRACE, WebDAV's and the
// other methods Node parses are answered 405 on a route's path, never forwarded.
const PROXIED_METHODS: ReadonlySet<string> = new Set(HTTP_METHODS);

export type Match =
  | { kind: 'route'; route: CompiledRoute; upstreamPath: string }
  | { kind: 'method-not-allowed'; route: CompiledRoute }
  | { kind: 'none' };

export class RouteTable {
  private readonly routes: CompiledRoute[];
  /**
   * Each route by its key. A path is matched by looking up its own key and each parent key
   * (O(segments)), not by scanning the routes: a scan of 1,000 routes sharing the path's prefix
   * cost 21 µs a match. The schema takes route paths only in the form requests are read in, and one
   * route per key, so a key is as long as its path: the longest key found is the longest path.
   */
  private readonly byKey = new Map<string, CompiledRoute>();

  constructor(config: Pick<Config, 'routes' | 'upstreams'>) {
    this.routes = config.routes
      .map((route) => ({
        ...route,
        key: matchKey(route.path),
        segments: route.path === '/' ? 0 : route.path.split('/').length - 1,
        target: route.upstream === undefined ? undefined : { ...config.upstreams[route.upstream]!, name: route.upstream },
        // HEAD is read as GET, as every HTTP server does.
        allowedMethods: route.methods ? new Set([...route.methods, ...(route.methods.includes('GET') ? ['HEAD'] : [])]) : PROXIED_METHODS,
      }))
      .sort((a, b) => b.path.length - a.path.length);
    for (const route of this.routes) this.byKey.set(route.key, route);
  }

  get all(): readonly CompiledRoute[] {
    return this.routes;
  }

  /**
   * `path` must already be normalized (no dot segments): see normalizePath. The route is the
   * longest one that any of the path's keys (matchKeys: the path itself, or the path without a
   * format suffix) falls under, so a suffix can only ever select a more specific, never a weaker,
   * route. The path itself is forwarded as the client sent it.
   */
  match(method: string, path: string): Match {
    const [key, ...withoutSuffix] = matchKeys(path);
    let route = this.find(key!);
    let cut: number | undefined; // the dots of the last segment kept by the route's key (suffix matches only)
    for (const shorter of withoutSuffix) {
      const found = this.find(shorter);
      // A route on the key without suffix is the suffix's route only if it is that very key: a
      // shorter one (a parent path) also covers the whole path, and was found above.
      if (found && found.key === shorter && (!route || found.key.length > route.key.length)) {
        route = found;
        cut = dotsIn(shorter.slice(shorter.lastIndexOf('/') + 1));
      }
    }
    if (!route) return { kind: 'none' };
    if (!route.allowedMethods.has(method)) return { kind: 'method-not-allowed', route };
    if (route.rewritePrefix === undefined) return { kind: 'route', route, upstreamPath: path };
    // The prefix's segments are replaced whatever case or parameters the client wrote them with;
    // a format suffix on the last of them stays on what replaces it (`/locked.json` → `/new.json`).
    const p = route.key;
    const rest = key === path && cut === undefined ? path.slice(p === '/' ? 0 : p.length) : afterSegments(path, route.segments, cut);
    return { kind: 'route', route, upstreamPath: joinPath(route.rewritePrefix, rest) };
  }

  /** The longest route whose key is `key` or a parent of it (a prefix that a `/` follows), else `/`'s. */
  private find(key: string): CompiledRoute | undefined {
    for (let end = key.length; end > 0; end = key.lastIndexOf('/', end - 1)) {
      const route = this.byKey.get(end === key.length ? key : key.slice(0, end));
      if (route) return route;
    }
    return this.byKey.get('/');
  }
}

function dotsIn(text: string): number {
  let n = 0;
  for (let i = text.indexOf('.'); i !== -1; i = text.indexOf('.', i + 1)) n++;
  return n;
}

/**
 * What follows the first `segments` segments of `path` as matchKey counts them ('' or a string
 * starting with '/'). With `keptDots`, the last of those segments was matched without its format
 * suffix: what follows starts at the dot after the first `keptDots` dots of that segment.
 */
function afterSegments(path: string, segments: number, keptDots?: number): string {
  if (segments === 0) return path;
  let at = 0; // the '/' that opens the current segment
  let counted = 0;
  for (;;) {
    if (path[at + 1] !== ';') counted++; // a segment of parameters alone is none to matchKey
    const next = path.indexOf('/', at + 1);
    const end = next === -1 ? path.length : next;
    if (counted === segments) {
      if (keptDots === undefined) return path.slice(end);
      let dot = path.indexOf('.', at + 1);
      for (let kept = 0; kept < keptDots; kept++) dot = path.indexOf('.', dot + 1);
      return path.slice(dot);
    }
    if (next === -1) return '';
    at = next;
  }
}

function joinPath(prefix: string, rest: string): string {
  const joined = `${prefix.replace(/\/+$/, '')}${rest}`;
  return joined.startsWith('/') ? joined : `/${joined}`;
}

