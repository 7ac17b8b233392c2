// GET /api/v1/user/api-keys/{id}/usage (CONTRACT §21): what one of the user's keys did over the
// last 30 UTC days, as the instances counted it off the request path (keys/usage.ts, flushed
// every second). Keys revoked or rolled keep their history: it shows who still calls
// with an old key. A bearer sign-in only, as every api-keys endpoint.
import type { FastifyInstance } from 'fastify';
import { sendError } from '../errors/index.js';
import { keyIdOf, keyUsage, USAGE_DAYS as DAYS } from '../keys/index.js';
import { currentUser } from '../listener/requireUser.js';
import { bearerOnly, errors, type EndpointSchema } from '../openapi.js';
import type { ApiTokenDeps } from './apiToken.js';

const USAGE: EndpointSchema = {
  tags: ['user'], security: bearerOnly,
  summary: 'A key\'s requests and denials per UTC day, the last 30 days (oldest first, today last); revoked and rolled keys too',
  params: { type: 'object', required: ['id'], properties: { id: { type: 'string', pattern: '^[1-9][0-9]*$' } } },
  response: {
    200: {
      type: 'object', required: ['days'],
      properties: {
        days: {
          type: 'array', minItems: DAYS, maxItems: DAYS,
          items: {
            type: 'object', required: ['date', 'requests', 'denied'],
            properties: {
              date: { type: 'string', format: 'date' }, requests: { type: 'integer', description: 'requests made with the key, denied ones included' },
              denied: { type: 'integer', description: 'those the gateway refused once it knew the key (docs/api-keys.md)' },
            },
          },
        },
      },
    },
    ...errors('apiKeyNotFound', 'apiKeyNotAccepted', 'tokenInvalid'),
  },
};

export async function apiKeyUsageRoutes(app: FastifyInstance, deps: ApiTokenDeps): Promise<void> {
  const guarded = { schema: USAGE, preHandler: deps.requireUser(undefined, { bearerOnly: true }) };
  app.get<{ Params: { id: string } }>('/api-keys/:id/usage', guarded, async (request, reply) => {
    const id = keyIdOf(request.params);
    const days = id === undefined ? undefined : await keyUsage(deps.db, currentUser(request).id, id, deps.clock());
    if (!days) return sendError(reply, 'apiKeyNotFound');
    return { days };
  });
}
