// An organization's API keys (CONTRACT §22): section 21's key API under /api/v1/orgs/{id}/api-keys,
// for owners and admins. A key's `role` (member by default) is never above its creator's; it acts
// for the organization with min(key role, creator's current role), its scopes as §21's, upstreams
// told x-user-id = its creator. apiKeys.plans is checked against the organization's plan and
// apiKeys.maxPerOwner counts per organization, under the organization's row lock (change.ts). The
// rules and actions are the keys room's (keys/organization.ts): this file translates HTTP to them,
// in a change of the organization by one of its managers.
import type { FastifyInstance } from 'fastify';
import type { Config } from '../config/schema.js';
import { sendError, successBody } from '../errors/index.js';
import { createdOrgKey, createOrgApiKey, keyIdOf, keyRequestFields, keyRole, orgKey, orgKeys, revokeOrgApiKey, type KeyOutcome } from '../keys/index.js';
import { bearerOnly, errors, message } from '../openapi.js';
import type { IdentityCache } from '../storage/feed/index.js';
import { orgChange, orgRead, refuse, requireRole, type OrgChangeDeps, type OrgWriters } from './change.js';
import { actorOf, answer, ids, MANAGERS, object, pathId, TAGS } from './common.js';
import type { OrgRoutesDeps } from './orgs.js';

export type OrgKeyDeps = Pick<OrgRoutesDeps, 'bearer'> & OrgChangeDeps & {
  apiKeys: Config['apiKeys'];
  identities: Pick<IdentityCache, 'forgetKey'>;
};

const tags = TAGS;
export const DOCS = {
  create: {
    tags, summary: 'Create an organization key (owner, admin): section 21\'s body and a role, member by default, never above the creator\'s', security: bearerOnly,
    params: ids('id'),
    body: object({ ...keyRequestFields, role: keyRole }, ['name']),
    response: {
      201: createdOrgKey,
      ...errors('badRequest', 'scopeUnknown', 'orgNotFound', 'roleInsufficient', 'planInsufficient', 'apiKeyLimitReached', 'apiKeyNotAccepted', 'tokenInvalid'),
    },
  },
  list: {
    tags, summary: 'The organization\'s keys (owner, admin)', security: bearerOnly, params: ids('id'),
    response: { 200: object({ api_keys: { type: 'array', items: orgKey } }), ...errors('orgNotFound', 'roleInsufficient', 'apiKeyNotAccepted', 'tokenInvalid') },
  },
  revoke: {
    tags, summary: 'Revoke an organization key (owner, admin)', security: bearerOnly, params: ids('id', 'key_id'),
    response: { 200: message, ...errors('orgNotFound', 'roleInsufficient', 'apiKeyNotFound', 'apiKeyNotAccepted', 'tokenInvalid') },
  },
};

/** A key action's result, or its refusal thrown, which rolls the change back (orgs/change.ts). */
function settled<T>(outcome: KeyOutcome<T>): T {
  return 'denied' in outcome ? refuse(outcome.denied.code, outcome.denied.extra) : outcome.ok;
}

export async function orgKeyRoutes(app: FastifyInstance, deps: OrgKeyDeps): Promise<void> {
  app.post('/:id/api-keys', { schema: DOCS.create, preHandler: deps.bearer }, async function createOrgKey(request, reply) {
    const id = pathId(request, 'id');
    if (id === undefined) return sendError(reply, 'orgNotFound');
    const { settings } = request.context.live;
    const context = {
      now: deps.clock(), knownScopes: new Set(settings.routes.flatMap((route) => route.scopes ?? [])), upgradeUrl: settings.plans.upgradeUrl, client: actorOf(request).client,
    };
    const outcome = await orgChange(deps, actorOf(request), id, async (w: OrgWriters) => {
      const memberRole = requireRole(w.role, MANAGERS);
      return settled(await createOrgApiKey(deps, { tx: w.tx, orgId: w.org.id, plan: w.org.plan, memberId: w.user.id, memberRole }, request.body, context));
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
      return settled(await revokeOrgApiKey(deps, { tx: w.tx, orgId: w.org.id, memberId: w.user.id }, keyId, actorOf(request).client));
    });
    if ('refused' in outcome) return answer(reply, outcome);
    deps.identities.forgetKey(outcome.ok);
    return successBody(reply, 'apiKeyRevoked');
  });
}
