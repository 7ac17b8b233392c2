// Break-glass for SAML enforcement (CONTRACT §31): when the organization's IdP fails, an operator
// turns `enforce` off so that its people may sign in the other ways again (and on again, which
// ends the sessions of the domains' accounts as the owner's change does). Audited
// sso.enforce_changed, the operator as actor. Without organizations.sso the path is not the gateway's.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { sendError } from '../errors/index.js';
import { errors } from '../openapi.js';
import { parseIntegerId } from '../storage/database/index.js';
import { samlConnections as saml, verifiedDomainsOf } from '../storage/orgs/index.js';
import { revokeForDomains } from '../storage/accounts/index.js';
import type { ActorOf, OrgAdminDeps } from './orgs.js';

const STR = { type: 'string' };
const DOCS = {
  enforce: {
    tags: ['organizations'], summary: 'Break-glass: turn the organization\'s SAML enforcement off (or on) (admin); with organizations.sso',
    params: { type: 'object', required: ['id'], properties: { id: STR } },
    body: { type: 'object', required: ['enforce'], properties: { enforce: { type: 'boolean' } } },
    response: {
      200: { type: 'object', properties: { org_id: { type: 'integer' }, connection_id: STR, enforce: { type: 'boolean' }, revoked_sessions: { type: 'integer' } } },
      ...errors('badRequest', 'adminNotFound', 'ssoConnectionNotFound', 'roleInsufficient'),
    },
  },
};

type Deps = OrgAdminDeps & { ssoConfigured: () => boolean };

export function adminSamlRoutes(app: FastifyInstance, deps: Deps, by: ActorOf): void {
  app.put('/v1/orgs/:id/sso/saml', { schema: DOCS.enforce, config: { role: 'admin' } }, (request, reply) => setEnforce(deps, by, request, reply));
}

async function setEnforce(deps: Deps, by: ActorOf, request: FastifyRequest, reply: FastifyReply) {
  const id = parseIntegerId((request.params as { id: string }).id);
  if (!deps.ssoConfigured() || id === undefined) return sendError(reply, 'adminNotFound');
  const body = request.body as Record<string, unknown> | null;
  const enforce = body?.enforce;
  if (typeof enforce !== 'boolean' || Object.keys(body!).some((key) => key !== 'enforce')) return sendError(reply, 'badRequest');
  const outcome = await deps.db.transaction(async (tx) => {
    const before = await saml.connectionOfOrg(tx, id);
    if (!before) return undefined;
    const after = (await saml.setEnforce(tx, id, enforce, deps.clock()))!;
    if (before.settings.enforce === enforce) return { after, revoked: 0 };
    // An operator is no user of the domain: on again, every session of its accounts ends but those begun through the connection.
    const revoked = enforce ? await revokeForDomains(tx, await verifiedDomainsOf(tx, id), 'sso_enforce', undefined, after.id) : 0;
    await deps.audit.record({
      type: 'sso.enforce_changed', ...by(request), userId: null, data: { org_id: id, connection_id: after.id, enforce, revoked_sessions: revoked, by: 'operator' },
    }, tx);
    return { after, revoked };
  });
  if (!outcome) return sendError(reply, 'ssoConnectionNotFound');
  request.log.warn({ orgId: id, enforce }, 'admin: organization SAML enforcement set');
  return { org_id: id, connection_id: outcome.after.id, enforce: outcome.after.settings.enforce, revoked_sessions: outcome.revoked };
}
