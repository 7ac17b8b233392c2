// GET /api/v1/user/api-keys/{id}/usage (CONTRACT §21): what one of the user's keys did over the
// last 30 UTC days, as the instances counted it off the request path (storage/apiKeyUsage.ts,
// flushed every second). Keys revoked or rolled keep their history: it shows who still calls
// with an old key. A bearer sign-in only, as every api-keys endpoint.
import type { FastifyInstance } from 'fastify';
import { sendError } from '../errors/index.js';
import { currentUser } from '../listener/requireUser.js';
import { bearerOnly, errors, type EndpointSchema } from '../openapi.js';
import { keyUsageDays } from '../storage/apiKeys.js';
import { DAY_MS, utcDay } from '../time.js';
import { keyIdOf, type ApiTokenDeps } from './apiToken.js';

const DAYS = 30;

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

/** The 30 UTC days that end with `now`'s, oldest first. */
function lastDays(now: Date): string[] {
  const today = Math.floor(now.getTime() / DAY_MS);
  return Array.from({ length: DAYS }, (_, i) => utcDay(new Date((today - DAYS + 1 + i) * DAY_MS)));
}

export async function apiKeyUsageRoutes(app: FastifyInstance, deps: ApiTokenDeps): Promise<void> {
  const guarded = { schema: USAGE, preHandler: deps.requireUser(undefined, { bearerOnly: true }) };
  app.get<{ Params: { id: string } }>('/api-keys/:id/usage', guarded, async (request, reply) => {
    const id = keyIdOf(request.params);
    const days = lastDays(deps.clock());
    const counted = id === undefined ? undefined : await keyUsageDays(deps.db, currentUser(request).id, id, days[0]!, days[DAYS - 1]!);
    if (!counted) return sendError(reply, 'apiKeyNotFound');
    const byDay = new Map(counted.map((c) => [c.day, c]));
    return { days: days.map((date) => ({ date, requests: byDay.get(date)?.requests ?? 0, denied: byDay.get(date)?.denied ?? 0 })) };
  });
}
