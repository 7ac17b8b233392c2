// An organization's API keys (CONTRACT §22): section 21's key API under /api/v1/orgs/{id}/api-keys,
// for owners and admins. A key's `role` (member by default) is never above its creator's; it acts
// for the organization with min(key role, creator's current role), its scopes as §21's, upstreams
// told x-user-id = its creator. apiKeys.plans is checked against the organization's plan and
// apiKeys.maxPerOwner counts per organization, under the organization's row lock (change.ts).
import type { FastifyInstance } from 'fastify';
import type { Audit } from '../audit.js';
import type { Config } from '../config/schema.js';
import { sha256Hex } from '../credentials/digest.js';
import { newApiKey } from '../credentials/shapes.js';
import { sendError, successBody } from '../errors/index.js';
import { bearerOnly, errors, message } from '../openapi.js';
import type { IdentityCache } from '../storage/identityCache.js';
import { ORG_ROLES, type OrgRole } from '../storage/organizations.js';
import { createOrgKeyWithin, orgKeys, revokeOrgKey } from '../storage/orgApiKeys.js';
import { keyIdOf, keyRequest } from '../user/apiToken.js';
import { orgChange, orgRead, refuse, requireRole, type OrgChangeDeps, type OrgWriters } from './change.js';
import { actorOf, answer, DATE, field, ids, INT, MANAGERS, object, pathId, ROLE, STR, TAGS } from './common.js';
import type { OrgRoutesDeps } from './orgs.js';

export type OrgKeyDeps = Pick<OrgRoutesDeps, 'bearer'> & OrgChangeDeps & {
  apiKeys: Config['apiKeys'];
  identities: Pick<IdentityCache, 'forgetKey'>;
};

const tags = TAGS;
const KEY = object({
  id: INT, name: STR, start: STR, role: ROLE, created_by: INT, scopes: { type: ['array', 'null'], items: STR }, created_at: DATE, expires_at: { type: ['string', 'null'], format: 'date-time' },
  last_used_at: { type: ['string', 'null'], format: 'date-time' },
});
export const DOCS = {
  create: {
    tags, summary: 'Create an organization key (owner, admin): section 21\'s body and a role, member by default, never above the creator\'s', security: bearerOnly,
    params: ids('id'),
    body: object({ name: STR, scopes: { type: ['array', 'null'], items: STR }, expires_at: { type: ['string', 'null'], format: 'date-time' }, role: ROLE }, ['name']),
    response: {
      201: object({ ...KEY.properties, key: STR }),
      ...errors('badRequest', 'scopeUnknown', 'orgNotFound', 'roleInsufficient', 'planInsufficient', 'apiKeyLimitReached', 'apiKeyNotAccepted', 'tokenInvalid'),
    },
  },
  list: {
    tags, summary: 'The organization\'s keys (owner, admin)', security: bearerOnly, params: ids('id'),
    response: { 200: object({ api_keys: { type: 'array', items: KEY } }), ...errors('orgNotFound', 'roleInsufficient', 'apiKeyNotAccepted', 'tokenInvalid') },
  },
  revoke: {
    tags, summary: 'Revoke an organization key (owner, admin)', security: bearerOnly, params: ids('id', 'key_id'),
    response: { 200: message, ...errors('orgNotFound', 'roleInsufficient', 'apiKeyNotFound', 'apiKeyNotAccepted', 'tokenInvalid') },
  },
};

/** Strongest first: a role's rank is its index. */
const rank = (role: OrgRole) => ORG_ROLES.indexOf(role);
/** The roles at least as strong as `role`: who may give it. */
const atLeast = (role: OrgRole) => ORG_ROLES.filter((r) => rank(r) <= rank(role));

/** The key's role from the body (member by default); refused above the creator's own. */
function keyRole(body: unknown, creator: OrgRole): OrgRole {
  const asked = field(body, 'role');
  if (asked === undefined || asked === null) return 'member';
  const role = ORG_ROLES.find((r) => r === asked) ?? refuse('badRequest');
  if (rank(role) < rank(creator)) refuse('roleInsufficient', { required_roles: atLeast(role), current_role: creator });
  return role;
}

export async function orgKeyRoutes(app: FastifyInstance, deps: OrgKeyDeps): Promise<void> {
  const audit: Pick<Audit, 'record'> = deps.audit;
  app.post('/:id/api-keys', { schema: DOCS.create, preHandler: deps.bearer }, async function createOrgKey(request, reply) {
    const id = pathId(request, 'id');
    if (id === undefined) return sendError(reply, 'orgNotFound');
    const now = deps.clock();
    const known = new Set(request.context.live.settings.routes.flatMap((route) => route.scopes ?? []));
    const { key, start } = newApiKey(deps.apiKeys.prefix, true);
    const outcome = await orgChange(deps, actorOf(request), id, async (w: OrgWriters) => {
      const mine = requireRole(w.role, MANAGERS);
      const plans = deps.apiKeys.plans;
      if (plans !== 'all' && !plans.includes(w.org.plan)) refuse('planInsufficient', { required: [...plans], current_plan: w.org.plan, upgrade_url: request.context.live.settings.plans.upgradeUrl });
      const wanted = keyRequest(request.body, now, known);
      if ('error' in wanted) refuse(wanted.error);
      const role = keyRole(request.body, mine);
      const created = await createOrgKeyWithin(w.tx, w.org.id, w.user.id, { hash: sha256Hex(key), start, ...wanted.ok, role }, deps.apiKeys.maxPerOwner, now)
        ?? refuse('apiKeyLimitReached');
      const data = { id: created.id, org_id: w.org.id, name: created.name, role, scopes: created.scopes };
      await audit.record({ type: 'api_key.created', actor: 'user', userId: w.user.id, ...actorOf(request).client, data }, w.tx);
      return { ...created, key };
    });
    return answer(reply, outcome, 201);
  });

  app.get('/:id/api-keys', { schema: DOCS.list, preHandler: deps.bearer }, async function listOrgKeys(request, reply) {
    const id = pathId(request, 'id');
    const actor = actorOf(request);
    return answer(reply, await orgRead(deps.db, actor.userId, id, MANAGERS, async () => ({ api_keys: await orgKeys(deps.db, id!) })));
  });

  app.delete('/:id/api-keys/:key_id', { schema: DOCS.revoke, preHandler: deps.bearer }, async function revokeOrgKeyRoute(request, reply) {
    const id = pathId(request, 'id');
    if (id === undefined) return sendError(reply, 'orgNotFound');
    const keyId = keyIdOf({ id: (request.params as Record<string, unknown>).key_id });
    const outcome = await orgChange(deps, actorOf(request), id, async (w) => {
      requireRole(w.role, MANAGERS);
      const hash = (keyId === undefined ? undefined : await revokeOrgKey(w.tx, w.org.id, keyId)) ?? refuse('apiKeyNotFound');
      await audit.record({ type: 'api_key.revoked', actor: 'user', userId: w.user.id, ...actorOf(request).client, data: { id: keyId, org_id: w.org.id } }, w.tx);
      return hash;
    });
    if ('refused' in outcome) return answer(reply, outcome);
    deps.identities.forgetKey(outcome.ok);
    return successBody(reply, 'apiKeyRevoked');
  });
}
