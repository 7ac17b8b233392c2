// The customer portal's one door (CONTRACT §30, docs/portal.md): its pages, GET {path}api/config and
// its sessions under {path}api/, registered by the public listener's builder when portal.enabled.
// Nothing in the proxy's path imports this room (test/architecture/imports.test.ts): what the proxy
// must know of the portal (no route on its host, its cookie never forwarded) is below, in
// routing/portalHost.ts and credentials/shapes.ts. One encapsulated scope: its hooks (guard.ts)
// hold for every portal answer and for nothing else.
import type { FastifyInstance } from 'fastify';
import rateLimit, { type RateLimitPluginOptions } from '@fastify/rate-limit';
import { SPEC_FIELD_ENDPOINTS, type AuthFeatures } from '../auth/index.js';
import type { Config } from '../config/schema.js';
import { refuseUnfitInput } from '../listener/inputs.js';
import { portalHostRule } from '../routing/portalHost.js';
import { configRoute } from './config.js';
import { readPortalFiles, type PortalFile } from './files.js';
import { guardPortal } from './guard.js';
import { pageRoutes } from './pages.js';
import { PortalCookie, sessionRoutes } from './sessions.js';

export { shownProviders, shownSso } from './config.js';
export { PORTAL_CSP, LOGO_CSP } from './guard.js';

export interface PortalDeps {
  config: Config;
  /** The sign-in handlers of /api/v1/auth the portal serves again (auth/index.ts). */
  sessionEndpoints: AuthFeatures['sessionEndpoints'];
  /** The auth rate limit's options: one budget per client address for both. */
  rateLimit: RateLimitPluginOptions;
  /** The pages (files.ts); the package's portal/ folder unless a test gives its own. */
  files?: ReadonlyMap<string, PortalFile>;
}

/** Registers the portal on the public listener; nothing without portal.enabled. */
export async function registerPortal(app: FastifyInstance, deps: PortalDeps): Promise<void> {
  const portal = deps.config.portal;
  if (!portal?.enabled) return;
  const api = `${portal.path}api/`;
  await app.register(async (scope) => {
    guardPortal(scope, { path: portal.path, publicUrl: portal.publicUrl, onPortalHost: portalHostRule(portal, deps.config.server.trustProxy) });
    pageRoutes(scope, portal, deps.files ?? readPortalFiles());
    configRoute(scope, deps.config, portal);
    // The namesakes' rules for their inputs and their budget, as under /api/v1/auth.
    await scope.register(async (sessions) => {
      refuseUnfitInput(sessions, { readsOwnFields: SPEC_FIELD_ENDPOINTS.map((p) => `${api}${p}`) });
      await sessions.register(rateLimit, deps.rateLimit);
      sessionRoutes(sessions, { api, cookie: new PortalCookie(portal.publicUrl, Math.floor(deps.config.auth.refreshTokenTtl / 1000)), endpoints: deps.sessionEndpoints });
    });
  });
}
