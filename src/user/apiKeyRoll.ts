// POST /api/v1/user/api-keys/{id}/roll (CONTRACT §21): a key replaced by a new one with the same
// name, scopes and expiry, the old one left working for a grace (none by default) so that its
// programs can be moved over. A bearer sign-in only, as every api-keys endpoint.
import type { FastifyInstance } from 'fastify';
import { clientOf, rollNamedKey } from '../auth/index.js';
import { parseDuration, ZERO_DURATION } from '../config/schema/values.js';
import { sendError } from '../errors/index.js';
import { currentUser } from '../listener/requireUser.js';
import { bearerOnly, createdKey, errors, type EndpointSchema } from '../openapi.js';
import { keyIdOf, type ApiTokenDeps } from './apiToken.js';

const MAX_GRACE_MS = 7 * 86_400_000;

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

/** The grace of a roll body in ms (absent or null: none), or undefined when it is not a duration of 0s to 7d. */
export function graceOf(body: unknown): number | undefined {
  const grace = ((body ?? {}) as Record<string, unknown>).grace;
  if (grace === undefined || grace === null) return 0;
  if (typeof grace !== 'string') return undefined;
  const ms = ZERO_DURATION.test(grace) ? 0 : parseDuration(grace);
  return ms !== undefined && ms <= MAX_GRACE_MS ? ms : undefined;
}

export async function apiKeyRollRoutes(app: FastifyInstance, deps: ApiTokenDeps): Promise<void> {
  const guarded = { schema: ROLL, preHandler: deps.requireUser(undefined, { bearerOnly: true }) };
  app.post<{ Params: { id: string } }>('/api-keys/:id/roll', guarded, async (request, reply) => {
    const graceMs = graceOf(request.body);
    if (graceMs === undefined) return sendError(reply, 'badRequest');
    const id = keyIdOf(request.params);
    const userId = currentUser(request).id;
    const rolled = id === undefined ? undefined : await rollNamedKey(deps, userId, id, graceMs, deps.clock(), { actor: 'user', ...clientOf(request) });
    if (!rolled) return sendError(reply, 'apiKeyNotFound');
    request.log.info({ userId, keyId: id, newKeyId: rolled.id, graceMs }, 'API key rolled');
    const { id: newId, name, key, start, scopes, created_at, expires_at } = rolled;
    return reply.code(201).send({ id: newId, name, key, start, scopes, created_at, expires_at });
  });
}
