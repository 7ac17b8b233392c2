// The OpenAPI fragments of the public listener's own endpoints that are not given beside their
// handlers (health, keys, the catalog, auth/ and user/), found by method and path as each route is
// registered (../openapi.ts). Issue 48 moves each beside its handler; until then they are here.
import { errorOf, type EndpointSchema } from './shapes.js';

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
};
