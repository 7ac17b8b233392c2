// The customer portal's own origin (CONTRACT §30): on the host of portal.publicUrl no route is
// served, only the portal and the gateway's own endpoints. An upstream's page, script or upload on
// that origin could read any signed-in customer's account with one same-origin fetch, which no
// cookie attribute, CSRF header or Origin check stops. Here, below the proxy and the portal alike:
// the request context (live/requestContext.ts) and the decisions listener ask it, and the portal's
// pages ask it whether to serve or to send the browser to publicUrl. Pure functions of the headers.
import type { IncomingHttpHeaders } from 'node:http';

/** What the rule reads of portal: (config/schema/portal.ts). */
export interface PortalOriginSettings {
  enabled: boolean;
  publicUrl: string;
  sharedOrigin: boolean;
}

/** A host as a Host header or X-Forwarded-Host writes it, its port left out: lower case, no trailing dot. */
export function hostnameOf(host: string): string {
  const text = host.trim().toLowerCase();
  // [::1]:8080 keeps its brackets; example.com:8080 loses its port.
  const end = text.startsWith('[') ? text.indexOf(']') + 1 : text.lastIndexOf(':') === -1 ? text.length : text.lastIndexOf(':');
  return (end > 0 ? text.slice(0, end) : text).replace(/\.$/, '');
}

/**
 * The host the client asked for: the last X-Forwarded-Host under server.trustProxy (the operator's
 * proxy appends the one it received, as fastify reads it), else Host, else HTTP/2's :authority.
 */
export function requestedHost(headers: IncomingHttpHeaders, trustProxy: boolean): string {
  const forwarded = trustProxy ? headers['x-forwarded-host'] : undefined;
  if (forwarded) return (Array.isArray(forwarded) ? forwarded.join(',') : forwarded).split(',').at(-1)!.trim();
  return headers.host ?? (headers as { ':authority'?: string })[':authority'] ?? '';
}

/**
 * Whether a request is for the portal's host (every port of its name: cookies ignore ports), or
 * undefined when no host is the portal's alone (no portal, or sharedOrigin: true).
 */
export function portalHostRule(portal: PortalOriginSettings | undefined, trustProxy: boolean): ((headers: IncomingHttpHeaders) => boolean) | undefined {
  if (!portal?.enabled || portal.sharedOrigin) return undefined;
  const own = hostnameOf(new URL(portal.publicUrl).host);
  return (headers) => hostnameOf(requestedHost(headers, trustProxy)) === own;
}

/**
 * For the decisions listener, whose caller is always a proxy: the request is for the portal's host
 * when either its Host or any X-Forwarded-Host names it (a proxy that sets one and not the other
 * must not get a route decided for the portal's origin).
 */
export function decisionForPortalHost(portal: PortalOriginSettings | undefined, headers: IncomingHttpHeaders): boolean {
  if (!portal?.enabled || portal.sharedOrigin) return false;
  const own = hostnameOf(new URL(portal.publicUrl).host);
  const forwarded = headers['x-forwarded-host'];
  const named = [headers.host ?? '', ...(Array.isArray(forwarded) ? forwarded : forwarded === undefined ? [] : [forwarded]).flatMap((v) => v.split(','))];
  return named.some((host) => host.trim() !== '' && hostnameOf(host) === own);
}
