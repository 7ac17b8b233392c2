// /api/v1/user/*: the signed-in user's own resources (CONTRACT §4, §13), one file per resource,
// registered here once under the prefix. Those that check a password or end sessions are under
// the auth rate limit, as the /api/v1/auth endpoints are.
import rateLimit, { type RateLimitPluginOptions } from '@fastify/rate-limit';
import type { FastifyInstance } from 'fastify';
import type { ApiTokenDeps } from './apiToken.js';
import { apiTokenRoutes } from './apiToken.js';
import { apiKeyRollRoutes } from './apiKeyRoll.js';
import { apiKeyUsageRoutes } from './apiKeyUsage.js';
import { usageRoutes } from './usage.js';
import { identitiesRoutes, type IdentitiesDeps } from './identities.js';
import { deleteMe, patchMe, readMe, type DeleteMeDeps, type MeDeps } from './me.js';
import { passkeysRoutes, type PasskeysDeps } from './passkeys.js';
import { sessionRoutes, type SessionsDeps } from './sessions.js';
import { webhookRoutes, type WebhookDeps } from './webhook.js';

export type UserRoutesDeps = MeDeps & DeleteMeDeps & SessionsDeps & ApiTokenDeps & WebhookDeps & PasskeysDeps & IdentitiesDeps & {
  /** The auth rate limit's options (listener/authRateLimit.ts): one budget with /api/v1/auth. */
  rateLimit: RateLimitPluginOptions;
  /** auth.passkeys is configured: without it, /passkeys answers 404 as the ceremonies do. */
  passkeys: boolean;
  /** auth.oidc is configured: without it, /identities answers 404 as the sign-in endpoints do. */
  oidc: boolean;
};

export async function userRoutes(app: FastifyInstance, deps: UserRoutesDeps): Promise<void> {
  await app.register(async (limited) => {
    await limited.register(rateLimit, deps.rateLimit);
    await limited.register(sessionRoutes, deps);
    await limited.register(deleteMe, deps);
    if (deps.passkeys) await limited.register(passkeysRoutes, deps);
    if (deps.oidc) await limited.register(identitiesRoutes, deps);
  });
  await app.register(readMe, deps);
  await app.register(patchMe, deps);
  await app.register(apiTokenRoutes, deps);
  await app.register(apiKeyRollRoutes, deps);
  await app.register(apiKeyUsageRoutes, deps);
  await app.register(usageRoutes, deps);
  await app.register(webhookRoutes, deps);
}
