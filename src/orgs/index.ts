// The organizations room's one door (CONTRACT §22, part one: the account side): /api/v1/orgs and
// what hangs from it, registered only with organizations.enabled; otherwise these paths are not the
// gateway's and fall to the routes (or 404) as any path no endpoint takes. Every endpoint takes a
// bearer sign-in only (§21). Creating an organization and accepting an invitation are under the
// auth rate limit, with the other endpoints that create accounts' things or take a link's token.
import rateLimit, { type RateLimitPluginOptions } from '@fastify/rate-limit';
import type { FastifyInstance } from 'fastify';
import { factorGuard, type Mailer } from '../auth/index.js';
import type { Audit } from '../audit.js';
import type { Config } from '../config/schema.js';
import { refuseUnfitInput } from '../listener/inputs.js';
import { requireBearer, type RequireUser } from '../listener/requireUser.js';
import type { MailWords } from '../mail/index.js';
import type { Database } from '../storage/db.js';
import { acceptRoute, invitationRoutes } from './invitations.js';
import { memberRoutes } from './members.js';
import { orgKeyRoutes } from './apiKeys.js';
import type { IdentityCache } from '../storage/identityCache.js';
import { createOrgRoute, orgRoutes, type OrgRoutesDeps } from './orgs.js';

export const ORGS_PREFIX = '/api/v1/orgs';

export interface OrganizationsDeps {
  config: Pick<Config, 'organizations' | 'mail' | 'apiKeys'>;
  /** Where a revoked organization key is forgotten at once (the feed tells the other instances). */
  identities: Pick<IdentityCache, 'forgetKey'>;
  db: Database;
  audit: Audit;
  clock: () => Date;
  requireUser: RequireUser;
  mailer: Mailer;
  mailWords: MailWords;
  /** The auth rate limit's options (listener/authRateLimit.ts): one budget with /api/v1/auth. */
  rateLimit: RateLimitPluginOptions;
  /** With billing (CONTRACT §23): sets the organization's running subscriptions to cancel at period end; false when Stripe could not be told. */
  cancelSubscriptions?: OrgRoutesDeps['cancelSubscriptions'];
}

/** Registers /api/v1/orgs/* when organizations are enabled; nothing otherwise. */
export async function registerOrganizations(app: FastifyInstance, deps: OrganizationsDeps): Promise<void> {
  const settings = deps.config.organizations;
  const invitationUrl = deps.config.mail?.invitationUrl;
  // The schema refuses enabled organizations without mail.invitationUrl.
  if (!settings?.enabled || !invitationUrl) return;
  const { db, audit, clock } = deps;
  const bearer = requireBearer(deps.requireUser);
  const factor = factorGuard({ db, clock, mailConfigured: deps.config.mail !== undefined });
  const orgDeps = { db, audit, clock, bearer, factor, maxOwnedPerUser: settings.maxOwnedPerUser, cancelSubscriptions: deps.cancelSubscriptions };
  const invitationDeps = { db, audit, clock, bearer, mailer: deps.mailer, words: deps.mailWords, invitationUrl, invitationTtlMs: settings.invitationTtl };
  await app.register(async (orgs) => {
    refuseUnfitInput(orgs);
    await orgs.register(async (limited) => {
      await limited.register(rateLimit, deps.rateLimit);
      await limited.register(createOrgRoute, orgDeps);
      await limited.register(acceptRoute, invitationDeps);
    });
    await orgs.register(orgRoutes, orgDeps);
    await orgs.register(invitationRoutes, invitationDeps);
    await orgs.register(memberRoutes, { db, audit, clock, bearer });
    await orgs.register(orgKeyRoutes, { db, audit, clock, bearer, apiKeys: deps.config.apiKeys, identities: deps.identities });
  }, { prefix: ORGS_PREFIX });
}
