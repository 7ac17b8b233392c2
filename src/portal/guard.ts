// What every portal answer is held to (CONTRACT §30), as hooks of the portal's scope: its origin
// (on another host, 308 to publicUrl), the CSRF rule of `{path}api/`, and the headers of every
// answer, errors and redirects included.
import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { sendError } from '../errors/index.js';
import { headerValue } from '../http.js';

/**
 * No inline script or style, nothing from another origin, no CDN: a script injected through a
 * product, organization or key name cannot run, and no page can be framed. Checkout and Stripe's
 * Customer Portal are top-level navigations to the URL the API answered, which form-action and
 * connect-src do not govern.
 */
export const PORTAL_CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; "
  + "form-action 'self'; base-uri 'none'; frame-ancestors 'none'";
/** The logo's own: an SVG opened alone runs no script (its inline styles are all it may use). */
export const LOGO_CSP = "default-src 'none'; style-src 'unsafe-inline'";

/** The header the pages' script sends on every call: a form or a link of another site cannot. */
export const PORTAL_HEADER = 'x-gateway-portal';

const SAFE_METHODS = new Set(['GET', 'HEAD']);

/**
 * Whether a `{path}api/` request is refused as cross-site (403 `Jeton CSRF invalide`): it needs
 * X-Gateway-Portal: 1 (a custom header: no form, link or image sends it, and no other origin's
 * script may without a CORS preflight the portal never grants), Sec-Fetch-Site same-origin when the
 * browser sends it, and Origin equal to publicUrl. Sign-in included: no other site may sign a
 * browser in as someone else. A GET (api/config) needs Origin only when one is sent: browsers send
 * none on a same-origin GET, and a GET changes nothing.
 */
export function refusedAsCrossSite(method: string, headers: IncomingHttpHeaders, publicUrl: string): boolean {
  if (headerValue(headers, PORTAL_HEADER) !== '1') return true;
  const site = headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin') return true;
  const origin = headers.origin;
  if (origin === undefined) return !SAFE_METHODS.has(method);
  return origin !== publicUrl;
}

export interface PortalGuardSettings {
  /** portal.path: `/portal/`. */
  path: string;
  publicUrl: string;
  /** Whether the request is for the portal's host; undefined with sharedOrigin (every host serves it). */
  onPortalHost: ((headers: IncomingHttpHeaders) => boolean) | undefined;
}

/** The portal's hooks, on its scope (index.ts): every route of the scope is the portal's. */
export function guardPortal(scope: FastifyInstance, settings: PortalGuardSettings): void {
  const api = `${settings.path}api/`;
  scope.addHook('onRequest', function portalOrigin(request: FastifyRequest, reply: FastifyReply, done: () => void) {
    // On another host, the same path on the portal's origin: its pages never run beside an upstream's.
    if (settings.onPortalHost && !settings.onPortalHost(request.headers)) {
      request.log.info('portal asked for on another host: sent to portal.publicUrl');
      void reply.redirect(`${settings.publicUrl}${request.url}`, 308);
      return;
    }
    if (request.url.startsWith(api) && refusedAsCrossSite(request.method, request.headers, settings.publicUrl)) {
      request.log.info({ origin: request.headers.origin, site: request.headers['sec-fetch-site'] }, 'portal request refused: not from the portal\'s pages');
      sendError(reply, 'consoleCsrf');
      return;
    }
    done();
  });
  scope.addHook('onSend', function portalHeaders(request, reply, payload, done) {
    if (!reply.hasHeader('content-security-policy')) reply.header('content-security-policy', PORTAL_CSP);
    // Pages opened from a mail carry a token in their URL: it must not leave in a Referer.
    reply.header('referrer-policy', 'no-referrer');
    reply.header('x-content-type-options', 'nosniff');
    reply.header('cross-origin-opener-policy', 'same-origin');
    if (request.url.startsWith(api)) reply.header('cache-control', 'no-store');
    done(null, payload);
  });
}
