// The user's API keys: POST and DELETE /api/v1/user/api-token (CONTRACT §4: the `default` key, the
// spec's guard, a key accepted) and /api/v1/user/api-keys (§21: named keys, a bearer sign-in only).
// Who may create keys is apiKeys.plans (the spec's rule, pro, by default). The rules and actions
// are the keys room's (keys/index.ts): this file translates HTTP to them.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { clientOf } from '../auth/index.js';
import type { Config } from '../config/schema.js';
import { sendDenial, sendError, successBody } from '../errors/index.js';
import { currentUser, requireBearer, type RequireUser } from '../listener/requireUser.js';
import {
  type ApiKeyDeps, createApiKey, createdKey, keyIdOf, keyRequestFields, keyPlanDenial, ownKey, ownKeys, requestNamedKey, revokeApiKeys, revokeNamedKey,
} from '../keys/index.js';
import { bearer, bearerOnly as bearerSecurity, errors, message, type EndpointSchema } from '../openapi.js';

export interface ApiTokenDeps extends ApiKeyDeps {
  requireUser: RequireUser;
  apiKeys: Config['apiKeys'];
  clock: () => Date;
}

/** Each route's OpenAPI fragment (documentation only: src/openapi.ts), by handler. */
const DOCS = {
  createToken: {
    tags: ['user'], summary: 'A new personal API key (pro); the earlier one is revoked; shown once', security: bearer,
    response: { 201: { type: 'object', properties: { api_token: { type: 'string' }, created_at: { type: 'string', format: 'date-time' } } }, ...errors('tokenInvalid', 'planInsufficient') },
  },
  revokeTokens: {
    tags: ['user'], summary: 'Revoke every API key of the user (pro); idempotent', security: bearer, response: { 200: message, ...errors('tokenInvalid', 'planInsufficient') },
  },
  createKey: {
    tags: ['user'], summary: 'A new named API key (apiKeys.plans), with optional scopes and expiry; the key is shown only here', security: bearerSecurity,
    body: { type: 'object', required: ['name'], properties: keyRequestFields },
    response: { 201: createdKey, ...errors('badRequest', 'scopeUnknown', 'apiKeyLimitReached', 'apiKeyNotAccepted', 'tokenInvalid', 'planInsufficient') },
  },
  listKeys: {
    tags: ['user'], summary: 'The user\'s keys that are not revoked (never a key or its hash); the section 4 key is named default', security: bearerSecurity,
    response: { 200: { type: 'object', properties: { api_keys: { type: 'array', items: ownKey } } }, ...errors('apiKeyNotAccepted', 'tokenInvalid') },
  },
  revokeKey: {
    tags: ['user'], summary: 'Revoke one of the user\'s keys', security: bearerSecurity, params: { type: 'object', required: ['id'], properties: { id: { type: 'string', pattern: '^[1-9][0-9]*$' } } },
    response: { 200: message, ...errors('apiKeyNotFound', 'apiKeyNotAccepted', 'tokenInvalid') },
  },
} satisfies Record<string, EndpointSchema>;

export async function apiTokenRoutes(app: FastifyInstance, deps: ApiTokenDeps): Promise<void> {
  /** Whether the user's plan may hold keys; answers the plan denial when not. */
  const planAllows = (request: FastifyRequest, reply: FastifyReply): boolean => {
    const denial = keyPlanDenial(deps.apiKeys.plans, currentUser(request).plan, request.context.live.settings.plans.upgradeUrl);
    if (!denial) return true;
    sendDenial(reply, denial);
    return false;
  };
  const signedIn = { preHandler: deps.requireUser() };
  const bearerOnly = { preHandler: requireBearer(deps.requireUser) };

  app.post('/api-token', { ...signedIn, schema: DOCS.createToken }, async (request, reply) => {
    if (!planAllows(request, reply)) return reply;
    const userId = currentUser(request).id;
    const { key, createdAt } = await createApiKey(deps, userId, { actor: 'user', ...clientOf(request) });
    request.log.info({ userId }, 'API key created');
    return reply.code(201).send({ api_token: key, created_at: createdAt.toISOString() });
  });

  app.delete('/api-token', { ...signedIn, schema: DOCS.revokeTokens }, async (request, reply) => {
    if (!planAllows(request, reply)) return reply;
    const userId = currentUser(request).id;
    const revoked = await revokeApiKeys(deps, userId, { actor: 'user', ...clientOf(request) });
    request.log.info({ userId, revoked }, 'API keys revoked');
    return successBody(reply, 'apiKeyRevoked');
  });

  app.post('/api-keys', { ...bearerOnly, schema: DOCS.createKey }, async (request, reply) => {
    if (!planAllows(request, reply)) return reply;
    const knownScopes = new Set(request.context.live.settings.routes.flatMap((route) => route.scopes ?? []));
    const userId = currentUser(request).id;
    const outcome = await requestNamedKey(deps, userId, request.body, { now: deps.clock(), knownScopes }, { actor: 'user', ...clientOf(request) });
    if ('denied' in outcome) return sendDenial(reply, outcome.denied);
    request.log.info({ userId, keyId: outcome.ok.id }, 'API key created');
    const { id, name, key, start, scopes, created_at, expires_at } = outcome.ok;
    return reply.code(201).send({ id, name, key, start, scopes, created_at, expires_at });
  });

  app.get('/api-keys', { ...bearerOnly, schema: DOCS.listKeys }, async (request) => ({ api_keys: await ownKeys(deps.db, currentUser(request).id) }));

  app.delete<{ Params: { id: string } }>('/api-keys/:id', { ...bearerOnly, schema: DOCS.revokeKey }, async (request, reply) => {
    const id = keyIdOf(request.params);
    const userId = currentUser(request).id;
    if (id === undefined || !(await revokeNamedKey(deps, userId, id, { actor: 'user', ...clientOf(request) }))) return sendError(reply, 'apiKeyNotFound');
    request.log.info({ userId, keyId: id }, 'API key revoked');
    return successBody(reply, 'apiKeyRevoked');
  });
}
