// GET /admin/v1/orgs/{id}/api-keys (CONTRACT §29): an organization's keys as support sees them,
// under the organization and marked as its own, since the creator's page lists personal keys
// only (§33). Never the key or its hash.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { sendError } from '../errors/index.js';
import { orgKey, orgKeys } from '../keys/index.js';
import { errors } from '../openapi.js';
import { parseIntegerId, type Queryable } from '../storage/database/index.js';
import { findOrganization } from '../storage/orgs/index.js';
import { datesAsIso } from './views.js';

export const DOCS = {
  list: {
    tags: ['admin'], security: [{ adminKey: [] }], params: { type: 'object', properties: { id: { type: 'integer' } } },
    summary: 'An organization\'s API keys that are not revoked, newest first (never the key itself)',
    response: {
      200: { type: 'object', properties: { org_id: { type: 'integer' }, api_keys: { type: 'array', items: orgKey } } },
      ...errors('adminUnauthorized', 'adminNotFound'),
    },
  },
};

export function adminOrgKeyRoutes(app: FastifyInstance, deps: { db: Queryable }): void {
  app.get('/v1/orgs/:id/api-keys', { schema: DOCS.list, config: { role: 'viewer' } }, (request, reply) => listOrgKeys(deps, request, reply));
}

async function listOrgKeys({ db }: { db: Queryable }, request: FastifyRequest, reply: FastifyReply) {
  const id = parseIntegerId((request.params as { id: string }).id);
  if (id === undefined || !(await findOrganization(db, id))) return sendError(reply, 'adminNotFound');
  return { org_id: id, api_keys: (await orgKeys(db, id)).map((k) => datesAsIso(k)) };
}
