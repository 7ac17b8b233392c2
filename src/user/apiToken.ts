// POST and DELETE /api/v1/user/api-token (CONTRACT §4): the user's personal API key, pro plan only.
import { successBody } from '../errors/index.js';
import type { FastifyInstance } from 'fastify';
import { type ApiKeyDeps, clientOf, createApiKey, revokeApiKeys } from '../auth/index.js';
import { currentUser, type RequireUser } from '../listener/requireUser.js';

export interface ApiTokenDeps extends ApiKeyDeps {
  requireUser: RequireUser;
}

export async function apiTokenRoutes(app: FastifyInstance, deps: ApiTokenDeps): Promise<void> {
  const proOnly = { preHandler: deps.requireUser(['pro']) };

  app.post('/api-token', proOnly, async (request, reply) => {
    const userId = currentUser(request).id;
    const { key, createdAt } = await createApiKey(deps, userId, { actor: 'user', ...clientOf(request) });
    request.log.info({ userId }, 'API key created');
    return reply.code(201).send({ api_token: key, created_at: createdAt.toISOString() });
  });

  app.delete('/api-token', proOnly, async (request, reply) => {
    const userId = currentUser(request).id;
    const revoked = await revokeApiKeys(deps, userId, { actor: 'user', ...clientOf(request) });
    request.log.info({ userId, revoked }, 'API keys revoked');
    return successBody(reply, 'apiKeyRevoked');
  });
}
