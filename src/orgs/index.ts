// The organizations room's one door (CONTRACT §22, part one: the account side): /api/v1/orgs and
// what hangs from it, registered only with organizations.enabled; otherwise these paths are not the
// gateway's and fall to the routes (or 404) as any path no endpoint takes. Every endpoint takes a
// bearer sign-in only (§21). Creating an organization and accepting an invitation are under the
// auth rate limit, with the other endpoints that create accounts' things or take a link's token.
import rateLimit, { type RateLimitPluginOptions } from '@fastify/rate-limit';
import type { FastifyInstance } from 'fastify';
import { allowedReturnTo, createTotp, factorGuard, type Mailer } from '../auth/index.js';
import type { Audit } from '../audit.js';
import type { Config } from '../config/schema.js';
import { mailLinks } from '../config/schema/portal.js';
import { refuseUnfitInput } from '../listener/inputs.js';
import { requireBearer, type RequireUser } from '../listener/requireUser.js';
import type { MailWords } from '../mail/index.js';
import type { Database } from '../storage/database/index.js';
import { acceptRoute, invitationRoutes } from './invitations.js';
import { domainRoutes } from './domains.js';
import { publicMailDomains } from '../domains/index.js';
import { memberRoutes } from './members.js';
import { orgKeyRoutes } from './apiKeys.js';
import { orgUsageRoutes } from './usage.js';
import type { IdentityCache, MembershipCache } from '../storage/feed/index.js';
import { createOrgRoute, orgRoutes, type OrgRoutesDeps } from './orgs.js';
import { samlConnectionRoutes } from './saml.js';

export const ORGS_PREFIX = '/api/v1/orgs';

// Managed accounts (CONTRACT §31, "Whose account" and "Roles"): what SAML sign-in and SCIM user
// creation share. Described at the top of managedAccounts.ts.
export {
  applyMappedRole, emailInVerifiedDomain, ensureManagedAccount, ensureManagedAccountIn, managedBy, mappedRole, samlIssuer, authorOf,
  type ManagedAccount, type ManagedAccountDeps, type ManagedAccountRequest, type ManagedOutcome, type ManagedRefusal, type ManagingActor,
  type MembershipChange, type RoleTarget, type SamlLink,
} from './managedAccounts.js';
export { emailDomain, normalizeDomain } from '../domains/index.js';
export { Refused } from './change.js';

export interface OrganizationsDeps {
  config: Pick<Config, 'organizations' | 'mail' | 'apiKeys' | 'auth' | 'portal'>;
  /** Where a revoked organization key is forgotten at once (the feed tells the other instances). */
  identities: Pick<IdentityCache, 'forgetKey'>;
  /** Where an organization changed here is forgotten at once (orgs/change.ts); the instance makes it with organizations enabled. */
  memberships: Pick<MembershipCache, 'forget'> | undefined;
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

/** The instance's membership cache, which it makes whenever organizations are enabled (what calls this). */
export function madeMemberships(memberships: Pick<MembershipCache, 'forget'> | undefined): Pick<MembershipCache, 'forget'> {
  if (!memberships) throw new Error('organizations are enabled and the instance made no membership cache');
  return memberships;
}

/** Registers /api/v1/orgs/* when organizations are enabled; nothing otherwise. */
export async function registerOrganizations(app: FastifyInstance, deps: OrganizationsDeps): Promise<void> {
  const settings = deps.config.organizations;
  // mail.invitationUrl, else the portal's page (CONTRACT §30): the schema refuses enabled organizations with neither.
  const invitationUrl = deps.config.mail ? mailLinks(deps.config).invitation : undefined;
  if (!settings?.enabled || !invitationUrl) return;
  const { db, audit, clock } = deps;
  const memberships = madeMemberships(deps.memberships);
  const changes = { db, audit, clock, memberships };
  const bearer = requireBearer(deps.requireUser);
  // Mail is configured here: without it no invitation could go out, and none of this is served.
  const factor = factorGuard({ db, clock, mailConfigured: true });
  const orgDeps = { ...changes, bearer, factor, maxOwnedPerUser: settings.maxOwnedPerUser, cancelSubscriptions: deps.cancelSubscriptions };
  const invitationDeps = { ...changes, bearer, mailer: deps.mailer, words: deps.mailWords, invitationUrl, invitationTtlMs: settings.invitationTtl };
  await app.register(async (orgs) => {
    // A name with a control character is `Nom invalide` (CONTRACT §33): the two endpoints that
    // take one read their one field themselves (common.ts's orgName refuses NUL and surrogates too).
    // An IdP's metadata XML is a document: every real IdP's (SimpleSAMLphp, Okta, Entra ID) has
    // newlines and indentation, so only NUL and lone surrogates are refused in that PUT's body.
    refuseUnfitInput(orgs, { readsOwnFields: [`POST ${ORGS_PREFIX}`, `PATCH ${ORGS_PREFIX}/:id`], payloads: [`${ORGS_PREFIX}/:id/sso/saml`] });
    await orgs.register(async (limited) => {
      await limited.register(rateLimit, deps.rateLimit);
      await limited.register(createOrgRoute, orgDeps);
      await limited.register(acceptRoute, invitationDeps);
    });
    await orgs.register(orgRoutes, orgDeps);
    await orgs.register(invitationRoutes, invitationDeps);
    await orgs.register(memberRoutes, { ...changes, bearer, identities: deps.identities });
    await orgs.register(orgUsageRoutes, { db, clock, bearer });
    await orgs.register(orgKeyRoutes, { ...changes, bearer, apiKeys: deps.config.apiKeys, identities: deps.identities });
    // CONTRACT §31: without organizations.sso, these paths are not the gateway's.
    if (settings.sso) {
      const publicMail = await publicMailDomains(settings.sso.publicMailDomains);
      await orgs.register(domainRoutes, { ...changes, bearer, factor, resolvers: settings.sso.dns.resolvers, publicMail });
    }
    // CONTRACT §31: SAML connections, only with organizations.sso (the schema asks auth.oidc beside it).
    const oidc = deps.config.auth.oidc;
    if (settings.sso && oidc) {
      const publicUrl = settings.sso.publicUrl ?? oidc.publicUrl;
      await orgs.register(samlConnectionRoutes, { ...changes, bearer, factor, totp: await createTotp(db), publicUrl, allowedReturnTo: (url) => allowedReturnTo(oidc.returnTo, url) });
    }
  }, { prefix: ORGS_PREFIX });
}
