// The route table compiled from gateway.yaml: longest prefix wins, on segment boundaries.
import { HTTP_METHODS, type Config, type RouteConfig, type UpstreamConfig } from '../config/schema.js';

export interface CompiledRoute extends RouteConfig {
  upstreamName: string;
  /** `path` as matchKey() reads it, and how many segments it has. */
  key: string;
  segments: number;
  target: UpstreamConfig;
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

  constructor(config: Pick<Config, 'routes' | 'upstreams'>) {
    this.routes = config.routes
      .map((route) => ({
        ...route,
        upstreamName: route.upstream,
        key: matchKey(route.path),
        segments: route.path === '/' ? 0 : route.path.split('/').length - 1,
        target: config.upstreams[route.upstream]!,
        // HEAD is read as GET, as every HTTP server does.
        allowedMethods: route.methods ? new Set([...route.methods, ...(route.methods.includes('GET') ? ['HEAD'] : [])]) : PROXIED_METHODS,
      }))
      .sort((a, b) => b.path.length - a.path.length);
  }

  get all(): readonly CompiledRoute[] {
    return this.routes;
  }

  /**
   * `path` must already be normalized (no dot segments): see normalizePath. The route is chosen
   * by matchKey(path); the path itself is forwarded as the client sent it.
   */
  match(method: string, path: string): Match {
    const key = matchKey(path);
    for (const route of this.routes) {
      const p = route.key;
      if (p !== '/' && key !== p && !key.startsWith(`${p}/`)) continue;
      if (!route.allowedMethods.has(method)) return { kind: 'method-not-allowed', route };
      if (route.rewritePrefix === undefined) return { kind: 'route', route, upstreamPath: path };
      // The prefix's segments are replaced whatever case or parameters the client wrote them with.
      const rest = key === path ? path.slice(p === '/' ? 0 : p.length) : afterSegments(path, route.segments);
      return { kind: 'route', route, upstreamPath: joinPath(route.rewritePrefix, rest) };
    }
    return { kind: 'none' };
  }
}

// Upstreams disagree on what names the same resource, and a route must guard every spelling any
// of them serves, or a public route on a shorter prefix lets the spelling through unguarded:
// Express, ASP.NET and IIS route without regard to case (`/PAID` is `/paid` there), and servlet
// containers (Tomcat, Jetty, Spring) drop `;parameters` from each segment (`/paid;x/item` is
// `/paid/item` there). So routes are matched on the path with ASCII case folded and segment
// parameters removed.
const NEEDS_KEY = /[A-Z;]/;
const SEGMENT_PARAMETERS = /;[^/]*/g;

/**
 * The form of a normalized path that routes are matched on (see above). A segment of parameters
 * alone disappears, as servlet containers fold the `//` it leaves: `/races/;x/premium` is
 * `/races/premium` there.
 */
export function matchKey(path: string): string {
  return NEEDS_KEY.test(path) ? path.replace(SEGMENT_PARAMETERS, '').replace(/\/{2,}/g, '/').toLowerCase() : path;
}

/** What follows the first `segments` segments of `path` as matchKey counts them ('' or a string starting with '/'). */
function afterSegments(path: string, segments: number): string {
  let at = 0; // the '/' that opens the current segment
  let counted = 0;
  while (counted < segments) {
    if (path[at + 1] !== ';') counted++; // a segment of parameters alone is none to matchKey
    const end = path.indexOf('/', at + 1);
    if (end === -1) return '';
    at = end;
  }
  return path.slice(at);
}

function joinPath(prefix: string, rest: string): string {
  const joined = `${prefix.replace(/\/+$/, '')}${rest}`;
  return joined.startsWith('/') ? joined : `/${joined}`;
}

// Percent-escapes of unreserved characters (RFC 3986 §2.3) name the same resource as the bare
// character, and many upstream frameworks decode them before routing: `/p%61id` is `/paid` there.
const ESCAPE = /%([0-9A-Fa-f]{2})/g;
const UNRESERVED = /^[A-Za-z0-9\-._~]$/;
// Only paths that may need work go through the URL parser; the common case costs one regex test.
const MAY_NEED_WORK = /[%#\\]|\/\/|\/\./;

/**
 * The path as an upstream will understand it: unreserved escapes decoded, dot segments (also
 * percent-encoded) resolved and repeated slashes folded, so `/public/../paid` is matched, guarded
 * and forwarded as `/paid`, never matched as one route and served as another. Undefined when an
 * upstream could read it as another path than we do: a backslash or `#`, an encoded slash or backslash
 * (`/public%2F..%2Fpaid` is `/paid` to an upstream that decodes before splitting) or a `..;`
 * segment (`/public/..;/paid` is `/paid` to servlet containers), or when it is not a path at all.
 */
export function normalizePath(rawPath: string): string | undefined {
  if (!rawPath.startsWith('/')) return undefined;
  if (!MAY_NEED_WORK.test(rawPath)) return rawPath;
  // A `#` has no place in a request target (RFC 9112 §3.2); the proxy's URL parser would cut the
  // path there, after matching: `/races/premium#` would be matched as itself and sent as `/races/premium`.
  if (/[\\#]/.test(rawPath)) return undefined;
  const decoded = rawPath.replace(ESCAPE, (escape, hex: string) => {
    const char = String.fromCharCode(parseInt(hex, 16));
    return UNRESERVED.test(char) ? char : escape;
  });
  if (/%2f|%5c/i.test(decoded) || /\/\.\.?;/.test(decoded)) return undefined;
  try {
    return new URL(decoded.replace(/\/{2,}/g, '/'), 'http://gateway.invalid').pathname;
  } catch {
    return undefined;
  }
}

/**
 * request.url with its path normalized (query untouched), for fastify's rewriteUrl: every route,
 * the gateway's own endpoints included, is matched on the same path the proxy forwards. A path
 * that cannot be normalized is left as is; the proxy answers it 400.
 */
export function canonicalUrl(url: string): string {
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  const normalized = normalizePath(path);
  if (normalized === undefined || normalized === path) return url;
  return q === -1 ? normalized : normalized + url.slice(q);
}
