// POST /api/v1/user/api-keys/{id}/roll (CONTRACT §21): a key replaced by a new one with the same
// name, scopes and expiry, the old one left working for a grace (none by default) so that its
// programs can be moved over. A bearer sign-in only, as every api-keys endpoint.
import type { FastifyInstance } from 'fastify';
import { clientOf } from '../auth/index.js';
import { sendDenial } from '../errors/index.js';
import { createdKey, keyIdOf, requestRoll } from '../keys/index.js';
import { currentUser } from '../listener/requireUser.js';
import { bearerOnly, errors, type EndpointSchema } from '../openapi.js';
import type { ApiTokenDeps } from './apiToken.js';

const ROLL: EndpointSchema = {
  tags: ['user'], summary: 'Replace a key with a new one (same name, scopes and expiry); the old key works on for the grace, then stops', security: bearerOnly,
  params: { type: 'object', required: ['id'], properties: { id: { type: 'string', pattern: '^[1-9][0-9]*$' } } },
  body: {
    type: 'object', description: 'JSON; a missing or non-JSON body reads as {}',
    properties: {
      grace: { type: 'string', default: '0s', examples: ['0s', '24h'], description: 'how long the old key keeps working: 0s to 7d (units ms, s, m, h, d)' },
    },
  },
  response: { 201: createdKey, ...errors('badRequest', 'apiKeyNotFound', 'apiKeyNotAccepted', 'tokenInvalid') },
};

export async function apiKeyRollRoutes(app: FastifyInstance, deps: ApiTokenDeps): Promise<void> {
  const guarded = { schema: ROLL, preHandler: deps.requireUser(undefined, { bearerOnly: true }) };
  app.post<{ Params: { id: string } }>('/api-keys/:id/roll', guarded, async (request, reply) => {
    const id = keyIdOf(request.params);
    const userId = currentUser(request).id;
    const outcome = await requestRoll(deps, userId, id, request.body, deps.clock(), { actor: 'user', ...clientOf(request) });
    if ('denied' in outcome) return sendDenial(reply, outcome.denied);
    const { id: newId, name, key, start, scopes, created_at, expires_at, graceMs } = outcome.ok;
    request.log.info({ userId, keyId: id, newKeyId: newId, graceMs }, 'API key rolled');
    return reply.code(201).send({ id: newId, name, key, start, scopes, created_at, expires_at });
  });
}
