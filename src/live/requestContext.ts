// One context per request, computed once (STYLE 19, after Pomerium's evaluator.Request): the live
// snapshot pinned when the request is first seen, its method, path and query split once, the
// methods the gateway serves itself on that path, and the route the path falls under. The CORS
// hook, the pipeline, WebSocket upgrades and the forwarder all take this context instead of
// reading `live.current` again or splitting `request.url` again: a reload in the middle of a
// request cannot hand two of its steps two configurations, and the path is read one way only.
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { Http2ServerRequest } from 'node:http2';
import type { FastifyInstance } from 'fastify';
import { LRUCache } from 'lru-cache';
import { HTTP_METHODS } from '../config/schema.js';
import type { Live, LiveSnapshot } from './live.js';
import { canonicalUrl, matchKeys, normalizePath, unicodeFolded } from '../routing/paths.js';
import type { Match } from '../routing/routeTable.js';

export interface RequestContext {
  /** The live state for the whole request, even across a reload. */
  readonly live: LiveSnapshot;
  readonly method: string;
  /** The path as the request gave it, before `?` (in the listener's canonical form on the public listener). */
  readonly rawPath: string;
  /** The path as upstreams will read it (routing/paths.ts); undefined when it cannot be read one way only. */
  readonly path: string | undefined;
  /** What follows `?`; undefined when the URL has no `?` ('' for a bare one). */
  readonly query: string | undefined;
  /** Methods the public listener serves itself on `path` (its own endpoints); empty for everything else. */
  readonly own: readonly string[];
  /**
   * `path` is another spelling of an own endpoint (case, trailing slash, `;params`, a format
   * suffix): one spelling per endpoint is served, and none of them is ever proxied.
   */
  readonly ownSpelling: boolean;
  /** The route `path` falls under, for `method`; none for own endpoints and unreadable paths (the pipeline refuses own spellings before it looks). */
  readonly match: Match;
}

export type OwnMethods = (path: string) => readonly string[];

const NONE: readonly string[] = [];
const NO_MATCH: Match = { kind: 'none' };

/** The context of a request for `method` and `url` (path and query), read against `live`. */
export function requestContext(live: LiveSnapshot, method: string, url: string, ownMethods: OwnMethods): RequestContext {
  const q = url.indexOf('?');
  const rawPath = q === -1 ? url : url.slice(0, q);
  const query = q === -1 ? undefined : url.slice(q + 1);
  const path = normalizePath(rawPath);
  if (path === undefined) return keptSeparators(live, method, rawPath, query, ownMethods);
  const own = ownMethods(path);
  if (own.length) return { live, method, rawPath, path, query, own, ownSpelling: false, match: NO_MATCH };
  const match = live.routes.match(method, path);
  if (readElsewhere(live, method, path, match, ownMethods)) return unreadable(live, method, rawPath, query);
  return { live, method, rawPath, path, query, own, ownSpelling: isOwnSpelling(path, ownMethods), match };
}

const routeOf = (match: Match) => (match.kind === 'none' ? undefined : match.route);

const unreadable = (live: LiveSnapshot, method: string, rawPath: string, query: string | undefined): RequestContext =>
  ({ live, method, rawPath, path: undefined, query, own: NONE, ownSpelling: false, match: NO_MATCH });

/**
 * Whether an upstream that folds Unicode (NFKC, or case in any locale: CONTRACT §19, §26) reads
 * `path` as an own endpoint or under another route than `match`: `/api/v1/ｒeports` or
 * `/api/v1/prof%C4%B1le` taken by a public route on `/` while NFKC or Java's equalsIgnoreCase serve
 * them as `/api/v1/reports` and `/api/v1/profile`. Such a path cannot be read one way only: it is refused (400). So is one whose
 * folded form the gateway would refuse if sent as such (`/admin%E3%80%80`: `/admin ` trimmed).
 */
function readElsewhere(live: LiveSnapshot, method: string, path: string, match: Match, ownMethods: OwnMethods, keepSeparators = false): boolean {
  const folded = unicodeFolded(path);
  if (folded === undefined) return false;
  const read = normalizePath(folded, keepSeparators);
  return read === undefined || ownMethods(read).length > 0 || isOwnSpelling(read, ownMethods) || routeOf(live.routes.match(method, read)) !== routeOf(match);
}

/**
 * A path refused for its encoded separators is served only by a route that keeps them
 * (`encodedSeparators: keep`, CONTRACT §19), matched and forwarded with them as sent. Never an own
 * endpoint: those paths have no encoded separators.
 */
function keptSeparators(live: LiveSnapshot, method: string, rawPath: string, query: string | undefined, ownMethods: OwnMethods): RequestContext {
  const kept = normalizePath(rawPath, true);
  const match = kept === undefined ? NO_MATCH : live.routes.match(method, kept);
  if (kept === undefined || match.kind === 'none' || match.route.encodedSeparators !== 'keep' || readElsewhere(live, method, kept, match, ownMethods, true)) {
    return unreadable(live, method, rawPath, query);
  }
  return { live, method, rawPath, path: kept, query, own: NONE, ownSpelling: false, match };
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the public listener's first step (listener/publicOrder.ts). */
    context: RequestContext;
  }
}

const CONTEXT = Symbol('gateway.requestContext');

/**
 * The public listener's contexts. A WebSocket upgrade is first seen by Node's upgrade dispatch,
 * before fastify's hooks (proxy/websocket.ts), so a context is made on first sight of the raw
 * request, whoever sees it first, and kept with it.
 */
export class RequestContexts {
  /**
   * `onPortalHost`: whether a request is for the customer portal's own host (routing/portalHost.ts),
   * where no route matches (CONTRACT §30): its context has no route, so the pipeline answers 404
   * `Route introuvable` to a request and to a WebSocket upgrade alike.
   */
  constructor(private readonly live: Live, private readonly ownMethods: OwnMethods, private readonly onPortalHost?: (headers: IncomingHttpHeaders) => boolean) {}

  // What each method and path read as under one snapshot (issue 77): requestContext's work (the
  // path normalized, folded, matched, own spellings looked for) done once per path, as proxied
  // paths repeat. Emptied when the snapshot changes or when full; long paths are read each time.
  private readings = new Map<string, Map<string, RequestContext>>();
  private readingsOf: LiveSnapshot | undefined;
  private readingsKept = 0;

  of(req: IncomingMessage | Http2ServerRequest): RequestContext {
    // Kept on the request itself: a WeakMap entry per request cost more than the context.
    const held = req as (IncomingMessage | Http2ServerRequest) & { [CONTEXT]?: RequestContext };
    if (held[CONTEXT]) return held[CONTEXT];
    // fastify's rewriteUrl already put the canonical form in req.url, keeping Node's in originalUrl;
    // a WebSocket upgrade's dispatch may see req.url as Node read it.
    const raw = req.url ?? '/';
    const url = (req as { originalUrl?: string }).originalUrl === undefined ? canonicalUrl(raw) : raw;
    const q = url.indexOf('?');
    const reading = this.reading(req.method ?? 'GET', q === -1 ? url : url.slice(0, q));
    const query = q === -1 ? undefined : url.slice(q + 1);
    const match = this.onPortalHost?.(req.headers) ? NO_MATCH : reading.match;
    const { live, method, rawPath, path, own, ownSpelling } = reading;
    return (held[CONTEXT] = { live, method, rawPath, path, query, own, ownSpelling, match });
  }

  /** The context of `method` on `rawPath` without a query, under the current snapshot. */
  private reading(method: string, rawPath: string): RequestContext {
    const live = this.live.current;
    if (live !== this.readingsOf || this.readingsKept >= READINGS_KEPT) {
      this.readings = new Map();
      this.readingsOf = live;
      this.readingsKept = 0;
    }
    let byPath = this.readings.get(method);
    const kept = byPath?.get(rawPath);
    if (kept) return kept;
    const reading = requestContext(live, method, rawPath, this.ownMethods);
    if (rawPath.length > OWN_PATHS_CACHED_LENGTH) return reading;
    if (!byPath) this.readings.set(method, (byPath = new Map()));
    byPath.set(rawPath, reading);
    this.readingsKept++;
    return reading;
  }
}

const READINGS_KEPT = 10_000;

const OWN_PATHS_CACHE_SIZE = 10_000;
// Own endpoints' paths are short; a longer path is looked up each time rather than kept, or a client
// sending distinct paths of 16 kB (the most Node takes) would pin 10,000 of them, ~160 MB.
const OWN_PATHS_CACHED_LENGTH = 256;

/**
 * Methods the public listener `app` serves itself on a path (its own endpoints), if any: what keeps
 * them from routes, here and on the decisions listener. Call it once per listener: it keeps its answers.
 */
export function ownEndpointMethods(app: FastifyInstance, ownPrefix?: string): OwnMethods {
  // Seven router lookups cost a few microseconds; proxied paths repeat, so their answers are kept.
  const ownMethodsByPath = new LRUCache<string, readonly string[]>({ max: OWN_PATHS_CACHE_SIZE });
  // Under `ownPrefix` (portal.path, CONTRACT §30) every path is the listener's own, every method:
  // the portal answers them all, through wildcard routes the test below would take for the proxy's.
  const bare = ownPrefix?.replace(/\/$/, '');
  return (path) => {
    if (ownPrefix !== undefined && (path === bare || path.startsWith(ownPrefix))) return HTTP_METHODS;
    let methods = ownMethodsByPath.get(path);
    if (methods === undefined) {
      methods = HTTP_METHODS.filter((method) => {
        const found = app.findRoute({ method, url: path });
        // Everything else lands on the proxy's catch-all, whose match carries the `*` parameter.
        return found !== null && !('*' in (found.params as Record<string, unknown>));
      });
      if (path.length <= OWN_PATHS_CACHED_LENGTH) ownMethodsByPath.set(path, methods.length ? methods : NONE);
    }
    return methods;
  };
}

/** Whether the route matcher would read `path` as one of the listener's own endpoints, spelled otherwise. */
function isOwnSpelling(path: string, ownMethods: OwnMethods): boolean {
  for (const key of matchKeys(path)) {
    const trimmed = key.length > 1 ? key.replace(/\/+$/, '') || '/' : key;
    if (trimmed !== path && ownMethods(trimmed).length) return true;
  }
  return false;
}
