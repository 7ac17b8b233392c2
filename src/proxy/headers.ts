// What upstreams receive (CONTRACT §3): client-sent identity headers go, the gateway's own come.
import type { IncomingHttpHeaders } from 'node:http';
import type { AuthMethod } from '../guards/authenticate.js';
import type { User } from '../storage/users.js';

/** `X_User_Id`, `x-user-id`, `X-USER-ID` … are one header to many upstream frameworks. */
export function isIdentityHeader(name: string): boolean {
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
  extra?: Record<string, string>;
}

export function upstreamHeaders(incoming: IncomingHttpHeaders, ctx: ForwardContext): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = {};
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined || isIdentityHeader(name)) continue;
    out[name] = value;
  }
  delete out['x-api-key'];
  delete out['x-request-id'];
  if (ctx.dropAuthorization) delete out.authorization;
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
