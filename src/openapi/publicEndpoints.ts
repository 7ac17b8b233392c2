// The OpenAPI fragments of the public listener's own endpoints that are not given beside their
// handlers (health, keys, the catalog, auth/ and user/), found by method and path as each route is
// registered (../openapi.ts). Issue 48 moves each beside its handler; until then they are here.
import { bearer, bearerOnly, createdKey, credentials, errorOf, errors, identity, limits, message, ownKey, passkey, session, type EndpointSchema } from './shapes.js';

/** Each endpoint's schema, by method and path (with its prefix). */
export const PUBLIC_ENDPOINTS: Record<string, EndpointSchema> = {
  'GET /healthz': { tags: ['health'], summary: 'The process runs', response: { 200: { type: 'object', properties: { status: { const: 'ok' } } } } },
  'GET /readyz': {
    tags: ['health'], summary: 'Postgres answers and the instance is not draining; Redis is reported in checks, never a 503',
    response: {
      200: { type: 'object', properties: { status: { const: 'ok' }, checks: { type: 'object', properties: { postgres: { const: 'ok' }, redis: { enum: ['ok', 'down', 'readonly', 'off'] } } } } },
      503: { ...errorOf(['storageUnavailable']), description: 'not ready (status unavailable: Postgres down; draining): error, status and checks' },
    },
  },
  'GET /api/v1/errors': {
    tags: ['errors'], summary: 'The error catalog: code, name, status, messages by language, fields; only with errors.codes or errors.language other than fr',
    response: {
      200: {
        type: 'array',
        items: {
          type: 'object',
          properties: {
            code: { type: 'string' }, name: { type: 'string' }, status: { type: 'integer' }, messages: { type: 'object', additionalProperties: { type: 'string' } },
            fields: { type: 'array', items: { type: 'string' } },
          },
        },
      },
    },
  },
  'GET /.well-known/jwks.json': { tags: ['keys'], summary: 'The access-token public key(s); empty for HS256', response: { 200: { type: 'object', properties: { keys: { type: 'array' } } } } },
  'GET /.well-known/gateway-assertion-keys.json': {
    tags: ['keys'], summary: 'The x-gateway-assertion public keys, and only them', response: { 200: { type: 'object', properties: { keys: { type: 'array' } } } },
  },
  'GET /api/v1/user/passkeys': {
    tags: ['second factor'], summary: 'The user\'s passkeys (never a key or counter); only with auth.passkeys', security: bearer,
    response: { 200: { type: 'object', properties: { passkeys: { type: 'array', items: passkey } } }, ...errors('tokenInvalid', 'rateLimited') },
  },
  'DELETE /api/v1/user/passkeys/:id': {
    tags: ['second factor'], summary: 'Remove one of the user\'s passkeys; every other session ends', security: bearerOnly,
    params: { type: 'object', required: ['id'], properties: { id: { type: 'string', pattern: '^[1-9][0-9]*$' } } },
    response: { 200: message, ...errors('passkeyNotFound', 'recentAuthRequired', 'emailUnverified', 'tokenInvalid', 'rateLimited') },
  },
  'GET /api/v1/user/identities': {
    tags: ['identity providers'], summary: 'The providers linked to the account; only with auth.oidc', security: bearer,
    response: { 200: { type: 'object', properties: { identities: { type: 'array', items: identity } } }, ...errors('tokenInvalid', 'rateLimited') },
  },
  'DELETE /api/v1/user/identities/:provider': {
    tags: ['identity providers'], summary: 'Unlink a provider, unless it is the last way to sign in', security: bearerOnly,
    params: { type: 'object', required: ['provider'], properties: { provider: { type: 'string', description: 'the provider\'s name in auth.oidc.providers' } } },
    response: { 200: message, ...errors('providerNotLinked', 'lastSignInMethod', 'recentAuthRequired', 'emailUnverified', 'tokenInvalid', 'rateLimited') },
  },
  'GET /api/v1/user/sessions': {
    tags: ['accounts'], summary: 'The active sessions (one per login), most recently used first', security: bearer,
    response: { 200: { type: 'object', properties: { sessions: { type: 'array', items: session } } }, ...errors('tokenInvalid', 'rateLimited') },
  },
  'DELETE /api/v1/user/sessions/:id': {
    tags: ['accounts'], summary: 'End one of the user\'s sessions', security: bearer, params: { type: 'object', required: ['id'], properties: { id: { type: 'string', pattern: '^[1-9][0-9]*$' } } },
    response: { 200: message, ...errors('sessionNotFound', 'tokenInvalid', 'rateLimited') },
  },
  'DELETE /api/v1/user/me': {
    tags: ['accounts'],
    summary: 'Delete the account and everything of it; the email is free again. The last owner of an organization is refused (409, with orgs: [{id, name}]) until they hand it over or delete it',
    security: bearer, body: credentials(['password']),
    response: { 200: message, ...errors('invalidCredentials', 'lastOwner', 'tokenInvalid', 'rateLimited', 'storageUnavailable', 'paymentUnavailable') },
  },
  'GET /api/v1/user/me': {
    tags: ['user'], summary: 'The signed-in user, with the plan\'s limits and what is left today', security: bearer,
    response: {
      200: {
        type: 'object',
        properties: {
          user_id: { type: 'integer' }, email: { type: 'string' }, plan: { type: 'string' }, daily_usage: { type: 'integer' }, last_usage_date: { type: ['string', 'null'] }, limits,
          daily_remaining: { type: ['integer', 'null'] }, monthly_usage: { type: 'integer' }, monthly_remaining: { type: ['integer', 'null'] },
          monthly_overage: { type: 'integer', description: 'With metered overage only: the uses past the included allowance' }, email_verified_at: { type: ['string', 'null'], format: 'date-time' },
          locale: { type: 'string', description: 'The language of the user\'s mails; absent until chosen' },
          orgs: {
            type: 'array', items: { type: 'object', properties: { id: { type: 'integer' }, name: { type: 'string' }, plan: { type: 'string' }, role: { enum: ['owner', 'admin', 'member'] } } },
            description: 'With organizations.enabled only: the user\'s organizations and role in each',
          },
        },
      },
      ...errors('tokenInvalid', 'userNotFound'),
    },
  },
  'PATCH /api/v1/user/me': {
    tags: ['user'], summary: 'Choose the language of the user\'s mails (a language the gateway has texts for; en-GB reads as en; null forgets it)', security: bearer,
    body: { type: 'object', properties: { locale: { type: ['string', 'null'], examples: ['en'] } }, description: 'JSON; a missing or non-JSON body reads as {}' },
    response: {
      200: { type: 'object', required: ['message', 'locale'], properties: { message: { type: 'string' }, locale: { type: ['string', 'null'] } } },
      ...errors('localeUnsupported', 'tokenInvalid', 'userNotFound'),
    },
  },
  'POST /api/v1/user/api-keys': {
    tags: ['user'], summary: 'A new named API key (apiKeys.plans), with optional scopes and expiry; the key is shown only here', security: bearerOnly,
    body: {
      type: 'object', required: ['name'],
      properties: {
        name: { type: 'string', minLength: 1, maxLength: 64 }, scopes: { type: ['array', 'null'], items: { type: 'string' }, minItems: 1 },
        expires_at: { type: ['string', 'null'], format: 'date-time' },
      },
    },
    response: { 201: createdKey, ...errors('badRequest', 'scopeUnknown', 'apiKeyLimitReached', 'apiKeyNotAccepted', 'tokenInvalid', 'planInsufficient') },
  },
  'GET /api/v1/user/api-keys': {
    tags: ['user'], summary: 'The user\'s keys that are not revoked (never a key or its hash); the section 4 key is named default', security: bearerOnly,
    response: { 200: { type: 'object', properties: { api_keys: { type: 'array', items: ownKey } } }, ...errors('apiKeyNotAccepted', 'tokenInvalid') },
  },
  'DELETE /api/v1/user/api-keys/:id': {
    tags: ['user'], summary: 'Revoke one of the user\'s keys', security: bearerOnly, params: { type: 'object', required: ['id'], properties: { id: { type: 'string', pattern: '^[1-9][0-9]*$' } } },
    response: { 200: message, ...errors('apiKeyNotFound', 'apiKeyNotAccepted', 'tokenInvalid') },
  },
  'POST /api/v1/user/api-token': {
    tags: ['user'], summary: 'A new personal API key (pro); the earlier one is revoked; shown once', security: bearer,
    response: { 201: { type: 'object', properties: { api_token: { type: 'string' }, created_at: { type: 'string', format: 'date-time' } } }, ...errors('tokenInvalid', 'planInsufficient') },
  },
  'DELETE /api/v1/user/api-token': {
    tags: ['user'], summary: 'Revoke every API key of the user (pro); idempotent', security: bearer, response: { 200: message, ...errors('tokenInvalid', 'planInsufficient') },
  },
  'POST /api/v1/user/webhook': {
    tags: ['user'], summary: 'Register the alert webhook (pro), replacing any earlier one', security: bearer, body: { type: 'object', properties: { url: { type: 'string', format: 'uri' } } },
    response: {
      201: { type: 'object', properties: { url: { type: 'string' }, secret: { type: 'string', description: 'whsec_<base64>' } } },
      ...errors('webhookUrlInvalid', 'webhookUrlForbidden', 'tokenInvalid', 'planInsufficient'),
    },
  },
  'DELETE /api/v1/user/webhook': { tags: ['user'], summary: 'Remove the alert webhook (pro); idempotent', security: bearer, response: { 200: message, ...errors('tokenInvalid', 'planInsufficient') } },
};
