// An operator verifies an organization's domain (CONTRACT §31): for a company whose DNS the
// owners cannot change in time, on the operator's own checks. Audited (org.domain_verified, data.by
// "operator", the operator as actor) and listed with verified_by "operator"; never re-checked by
// DNS. The claim must exist (an owner made it), and another organization's verification wins as
// it does for DNS: 409 domain_taken. Without organizations.sso the path is not the gateway's.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { normalizeDomain, txtNameOf } from '../domains/index.js';
import { sendError } from '../errors/index.js';
import { errors } from '../openapi.js';
import { parseIntegerId } from '../storage/database/index.js';
import { orgDomains as domains } from '../storage/orgs/index.js';
import type { ActorOf, OrgAdminDeps } from './orgs.js';

const STR = { type: 'string' };
const DOCS = {
  verify: {
    tags: ['organizations'], summary: 'Verify an organization\'s claimed domain (admin); with organizations.sso',
    params: { type: 'object', required: ['id', 'domain'], properties: { id: STR, domain: STR } },
    response: {
      200: { type: 'object', properties: { org_id: { type: 'integer' }, domain: STR, status: STR, verified_by: STR, verified_at: { type: 'string', format: 'date-time' }, txt_name: STR } },
      ...errors('adminNotFound', 'domainTaken', 'roleInsufficient'),
    },
  },
};

export function adminDomainRoutes(app: FastifyInstance, deps: OrgAdminDeps & { ssoConfigured: () => boolean }, by: ActorOf): void {
  app.post('/v1/orgs/:id/domains/:domain/verify', { schema: DOCS.verify, config: { role: 'admin' } }, (request, reply) => verifyDomain(deps, by, request, reply));
}

async function verifyDomain(deps: OrgAdminDeps & { ssoConfigured: () => boolean }, by: ActorOf, request: FastifyRequest, reply: FastifyReply) {
  const params = request.params as { id: string; domain: string };
  const id = parseIntegerId(params.id);
  const domain = normalizeDomain(params.domain);
  if (!deps.ssoConfigured() || id === undefined || domain === undefined) return sendError(reply, 'adminNotFound');
  try {
    const row = await deps.db.transaction(async (tx) => {
      const claim = await domains.findDomain(tx, id, domain);
      if (!claim || claim.status === 'verified') return claim;
      const verified = await domains.markVerified(tx, id, domain, 'operator', deps.clock());
      if (verified) await deps.audit.record({ type: 'org.domain_verified', ...by(request), userId: null, data: { org_id: id, domain, by: 'operator' } }, tx);
      return verified;
    });
    if (!row) return sendError(reply, 'adminNotFound');
    request.log.info({ orgId: id, domain }, 'admin: organization domain verified');
    return { org_id: id, domain: row.domain, status: row.status, verified_by: row.verified_by, verified_at: row.verified_at, txt_name: txtNameOf(row.domain) };
  } catch (err) {
    if (domains.isDomainTaken(err)) return sendError(reply, 'domainTaken');
    throw err;
  }
}
