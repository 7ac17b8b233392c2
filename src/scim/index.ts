// The SCIM room's one door (CONTRACT §31, SCIM 2.0 per organization): the token endpoints under
// /api/v1/orgs/{id}/scim/tokens (a signed-in owner's, bearer only) and the directory's own API under
// /scim/v2/orgs/{id}/ (a SCIM token's only: access.ts). Registered only where §31 says these paths
// are the gateway's; elsewhere they fall to the routes (or 404) as any path no endpoint takes.
// Under /scim/v2 every answer, a refusal or a fault included, is SCIM's (errors.ts), never the
// catalog's: a directory reads SCIM's error shape only.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { factorGuard } from '../auth/index.js';
import type { Audit } from '../audit.js';
import type { Config } from '../config/schema.js';
import { requireBearer, type RequireUser } from '../listener/requireUser.js';
import { isUnavailable, type Database } from '../storage/database/index.js';
import type { IdentityCache, MembershipCache } from '../storage/feed/index.js';
import { scimAccess } from './access.js';
import { madeMemberships, Refused } from './managed.js';
import { ScimError, sendScimError } from './errors.js';
import { discoveryRoutes } from './discoveryRoutes.js';
import { groupRoutes } from './groups.js';
import { connectionRoleMapping, type RoleMappingOf } from './roles.js';
import { scimTokenRoutes } from './tokens.js';
import { userRoutes } from './users.js';

export { SCIM_TOKEN_PREFIX } from './tokens.js';

export const SCIM_PREFIX = '/scim/v2/orgs/:orgId';

export interface ScimDeps {
  config: Pick<Config, 'organizations' | 'mail'>;
  db: Database;
  audit: Audit;
  clock: () => Date;
  requireUser: RequireUser;
  /** Where a deactivated account is forgotten at once (the feed tells the other instances). */
  identities: Pick<IdentityCache, 'forgetUser' | 'forgetKey'>;
  /** Where a directory's change of memberships is forgotten at once (provisioning.ts's directoryChange); made with organizations enabled. */
  memberships: Pick<MembershipCache, 'forget'> | undefined;
  /** The organization's roleMapping (CONTRACT §31 "Roles"); default: its SAML connection's. */
  roleMapping?: RoleMappingOf;
}

/** Whether §31's SCIM paths are the gateway's: with organizations.sso ("absent: the paths of this section are not the gateway's"). */
export const scimServed = (config: ScimDeps['config']) => config.organizations?.enabled === true && config.organizations.sso !== undefined;

/**
 * A fault under /scim/v2 answered in SCIM's shape: storage away 503, a body too large 413, the rest
 * 500 (logged). No other client fault of fastify's reaches here: the gateway's body parser reads
 * any body (spec §4), the listener refuses an unreadable path before routing, and Node's parser a
 * body that does not match its Content-Length.
 */
function scimFault(error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  if (error instanceof ScimError) return sendScimError(reply, error);
  // The managed accounts' one refusal thrown (the organization deleted while the request ran).
  if (error instanceof Refused) return sendScimError(reply, new ScimError(404, 'Organization not found'));
  if (isUnavailable(error)) {
    request.log.warn({ err: error }, 'scim: storage unavailable');
    return sendScimError(reply, new ScimError(503, 'Service unavailable, retry later'));
  }
  if (error.statusCode === 413) return sendScimError(reply, new ScimError(413, 'Request body too large'));
  request.log.error({ err: error }, 'scim: unexpected error');
  return sendScimError(reply, new ScimError(500, 'Internal error'));
}

/** Registers the SCIM token endpoints and /scim/v2/orgs/{id}/ when §31's paths are served; nothing otherwise. */
export async function registerScim(app: FastifyInstance, deps: ScimDeps): Promise<void> {
  if (!scimServed(deps.config)) return;
  const { db, audit, clock } = deps;
  const memberships = madeMemberships(deps.memberships);
  const bearer = requireBearer(deps.requireUser);
  const factor = factorGuard({ db, clock, mailConfigured: deps.config.mail !== undefined });
  await app.register(scimTokenRoutes, { prefix: '/api/v1/orgs', db, audit, clock, bearer, factor });
  await app.register(async (scim) => {
    scim.decorateRequest('scimCaller', null);
    scim.addHook('onRequest', scimAccess({ db, clock }));
    scim.setErrorHandler(scimFault);
    const directory = { db, audit, clock, memberships, identities: deps.identities, roleMapping: deps.roleMapping ?? connectionRoleMapping };
    await scim.register(discoveryRoutes);
    await scim.register(userRoutes, { ...directory, forgetUser: (id: number) => deps.identities.forgetUser(id) });
    await scim.register(groupRoutes, directory);
  }, { prefix: SCIM_PREFIX });
}
