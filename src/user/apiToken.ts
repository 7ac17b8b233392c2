// The user's API keys: POST and DELETE /api/v1/user/api-token (CONTRACT §4: the `default` key, the
// spec's guard, a key accepted) and /api/v1/user/api-keys (§21: named keys, a bearer sign-in only).
// Who may create keys is apiKeys.plans (the spec's rule, pro, by default).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { type ApiKeyDeps, clientOf, createApiKey, createNamedKey, revokeApiKeys, revokeNamedKey } from '../auth/index.js';
import type { Config } from '../config/schema.js';
import { sendDenial, sendError, successBody } from '../errors/index.js';
import { textField } from '../http.js';
import { currentUser, requireBearer, type RequireUser } from '../listener/requireUser.js';
import { checkPlan, planWordsOf, worded } from '../pipeline/index.js';
import { ownKeys } from '../storage/apiKeys.js';
import { bearer, bearerOnly as bearerSecurity, createdKey, errors, message, ownKey, type EndpointSchema } from '../openapi.js';

export interface ApiTokenDeps extends ApiKeyDeps {
  requireUser: RequireUser;
  apiKeys: Config['apiKeys'];
  clock: () => Date;
}

const MAX_NAME = 64;
const MAX_EXPIRY_MS = 365 * 24 * 3600 * 1000;

type Parsed<T> = { ok: T } | { error: 'badRequest' | 'scopeUnknown' };

/** The body of POST /api-keys as a key request, or why not. */
export function keyRequest(body: unknown, now: Date, known: ReadonlySet<string>): Parsed<{ name: string; scopes: string[] | null; expiresAt: Date | null }> {
  const fields = (body ?? {}) as Record<string, unknown>;
  const name = fields.name;
  // Printable: no control or format characters (a name is shown in lists and consoles).
  if (typeof name !== 'string' || [...name].length < 1 || [...name].length > MAX_NAME || /[\p{Cc}\p{Cf}]/u.test(name)) return { error: 'badRequest' };
  let scopes: string[] | null = null;
  if (fields.scopes !== undefined && fields.scopes !== null) {
    if (!Array.isArray(fields.scopes) || fields.scopes.length === 0 || !fields.scopes.every((s) => typeof s === 'string')) return { error: 'badRequest' };
    if (!fields.scopes.every((s: string) => s === '*' || known.has(s))) return { error: 'scopeUnknown' };
    scopes = [...new Set(fields.scopes as string[])];
  }
  let expiresAt: Date | null = null;
  if (fields.expires_at !== undefined && fields.expires_at !== null) {
    const at = typeof fields.expires_at === 'string' ? new Date(fields.expires_at) : new Date(NaN);
    if (Number.isNaN(at.getTime()) || at <= now || at.getTime() > now.getTime() + MAX_EXPIRY_MS) return { error: 'badRequest' };
    expiresAt = at;
  }
  return { ok: { name, scopes, expiresAt } };
}

/** A key's id as a path gives it; undefined when it cannot be one (then no key is found). */
export function keyIdOf(params: unknown): number | undefined {
  const text = textField(params, 'id');
  return /^[1-9]\d{0,15}$/.test(text) ? Number(text) : undefined;
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
    body: {
      type: 'object', required: ['name'],
      properties: {
        name: { type: 'string', minLength: 1, maxLength: 64 }, scopes: { type: ['array', 'null'], items: { type: 'string' }, minItems: 1 },
        expires_at: { type: ['string', 'null'], format: 'date-time' },
      },
    },
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
  const allowed = deps.apiKeys.plans;
  /** Whether the user's plan may hold keys; answers the plan denial when not. */
  const planAllows = (request: FastifyRequest, reply: FastifyReply): boolean => {
    if (allowed === 'all') return true;
    const denial = checkPlan(currentUser(request).plan, allowed);
    if (!denial) return true;
    sendDenial(reply, worded(denial, planWordsOf(request.context.live.settings.plans)));
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
    const now = deps.clock();
    // The scopes the routes declare now (a reload may add some).
    const known = new Set(request.context.live.settings.routes.flatMap((route) => route.scopes ?? []));
    const wanted = keyRequest(request.body, now, known);
    if ('error' in wanted) return sendError(reply, wanted.error);
    const userId = currentUser(request).id;
    const created = await createNamedKey(deps, userId, wanted.ok, { max: deps.apiKeys.maxPerOwner, now }, { actor: 'user', ...clientOf(request) });
    if (!created) return sendError(reply, 'apiKeyLimitReached');
    request.log.info({ userId, keyId: created.id }, 'API key created');
    const { id, name, key, start, scopes, created_at, expires_at } = created;
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
