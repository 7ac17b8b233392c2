// GET /api/v1/orgs/{id}/usage (CONTRACT §30, owner and admin): the organization's pooled counter
// per UTC day and month, and its keys per day, in the body of the user's usage (user/usage.ts). An
// organization on `free` pools nothing (§22: its members' uses count on their own counters), so
// its days and months stay at 0 while its keys' requests still show.
import type { FastifyInstance } from 'fastify';
import { bearerOnly, errors, type EndpointSchema } from '../openapi.js';
import { USAGE_BODY, usageBody } from '../user/usage.js';
import { orgRead } from './change.js';
import { actorOf, answer, ids, MANAGERS, pathId, TAGS } from './common.js';
import type { OrgRoutesDeps } from './orgs.js';

const USAGE: EndpointSchema = {
  tags: TAGS, security: bearerOnly, params: ids('id'),
  summary: 'The organization\'s pooled uses and refusals per UTC day (last 30), uses per month (last 12), and each of its keys per day (owner, admin)',
  response: { 200: USAGE_BODY, ...errors('orgNotFound', 'roleInsufficient', 'apiKeyNotAccepted', 'tokenInvalid') },
};

export async function orgUsageRoutes(app: FastifyInstance, deps: Pick<OrgRoutesDeps, 'db' | 'clock' | 'bearer'>): Promise<void> {
  app.get('/:id/usage', { schema: USAGE, preHandler: deps.bearer }, async function orgUsage(request, reply) {
    const id = pathId(request, 'id');
    const read = () => usageBody(deps.db, { ownerType: 'org', id: id! }, deps.clock());
    return answer(reply, await orgRead(deps.db, actorOf(request).userId, id, MANAGERS, read));
  });
}
