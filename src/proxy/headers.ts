// What upstreams receive (CONTRACT §3): client-sent identity headers go, the gateway's own come.
import type { IncomingHttpHeaders } from 'node:http';
import type { AuthMethod } from '../guards/authenticate.js';
import type { User } from '../storage/users.js';

/** `X_User_Id`, `x-user-id`, `X-USER-ID` … are one header to many upstream frameworks. */
export function isIdentityHeader(name: string): boolean {
  // Every identity header starts with x: the common headers are answered by one comparison.
  const first = name.charCodeAt(0);
  if (first !== 0x78 && first !== 0x58) return false;
  const n = name.toLowerCase().replace(/_/g, '-');
  return n.startsWith('x-user-') || n === 'x-auth-method' || n === 'x-gateway-assertion';
}

export interface ForwardContext {
  requestId: string;
  /** X-Forwarded-For to send: the client's chain when trusted, else the socket address alone. */
  forwardedFor: string;
  proto: string;
  host: string | undefined;
  identity?: { user: User; method: AuthMethod };
  /** The Authorization header carried the gateway's own token: it is not forwarded. */
  dropAuthorization: boolean;
  /** server.trustProxy: the client is a proxy of the operator's, whose forwarding headers are kept. */
  trustProxy: boolean;
  extra?: Record<string, string>;
}

// Hop-by-hop headers (RFC 9110 §7.6.1) describe one connection, never the next one. `expect` is
// answered by the gateway itself (node sends the 100 Continue) and undici cannot forward it.
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'expect']);
// The gateway says itself where a request came from (X-Forwarded-For, -Proto, -Host, set below),
// so the client's copies go whatever they hold; an empty Host must not let the client's
// X-Forwarded-Host through. Other headers of that family go too unless the client is a trusted
// proxy: frameworks read them for client addresses, redirects and links (Spring prefers
// `Forwarded` to X-Forwarded-*).
const SET_BY_GATEWAY = new Set(['x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'x-request-id', 'x-api-key']);
const FORWARDING_FROM_PROXIES = new Set(['forwarded', 'x-real-ip', 'x-forwarded-port', 'x-forwarded-prefix']);

// Both functions run on every proxied request: plain loops over the names, no entry arrays.
export function upstreamHeaders(incoming: IncomingHttpHeaders, ctx: ForwardContext): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = {};
  // Skipped rather than deleted afterwards: a delete turns the object V8 builds into a slow one.
  for (const name in incoming) {
    const value = incoming[name];
    if (value === undefined || isIdentityHeader(name) || HOP_BY_HOP.has(name) || SET_BY_GATEWAY.has(name)) continue;
    if (!ctx.trustProxy && FORWARDING_FROM_PROXIES.has(name)) continue;
    if (name === 'authorization' && ctx.dropAuthorization) continue;
    out[name] = value;
  }
  out['x-forwarded-for'] = ctx.forwardedFor;
  out['x-forwarded-proto'] = ctx.proto;
  if (ctx.host) out['x-forwarded-host'] = ctx.host;
  out['x-request-id'] = ctx.requestId;
  if (ctx.identity) {
    const { user, method } = ctx.identity;
    out['x-user-id'] = String(user.id);
    out['x-user-plan'] = user.plan;
    out['x-user-email'] = user.email;
    out['x-auth-method'] = method;
  }
  if (ctx.extra) Object.assign(out, ctx.extra);
  return out;
}

/**
 * What the client receives of the upstream's headers: all of them but the hop-by-hop ones (an
 * upstream's `Connection: close` must not close the client's connection) and x-request-id, which
 * stays the gateway's so a client can quote the id found in the gateway's logs.
 */
export function downstreamHeaders(incoming: Record<string, string | string[] | undefined>): Record<string, string | string[] | undefined> {
  // Headers named by Connection are hop-by-hop too; most responses name none beyond keep-alive.
  const connection = incoming.connection;
  const named = connection === undefined ? undefined : String(connection).toLowerCase().split(',').map((t) => t.trim());
  const out: Record<string, string | string[] | undefined> = {};
  for (const name in incoming) {
    const n = name.toLowerCase();
    if (HOP_BY_HOP.has(n) || n === 'x-request-id' || named?.includes(n)) continue;
    out[name] = incoming[name];
  }
  return out;
}
