// GET /api/v1/user/usage (CONTRACT §30): what the signed-in user's own counter did, per UTC day
// over the last 30 days and per month over the last 12, and each of the user's keys per day; the
// body the organization's usage answers too (orgs/usage.ts). From the gateway's own counts
// (storage/usage/ownerUsage.ts), oldest first, days and months with nothing counted at 0. A bearer
// sign-in only, as the key usage endpoint.
import type { FastifyInstance } from 'fastify';
import { currentUser } from '../listener/requireUser.js';
import { bearerOnly, errors, type EndpointSchema } from '../openapi.js';
import { type Counter, ownerCounts, ownerKeyDays } from '../storage/usage/index.js';
import type { Queryable } from '../storage/database/index.js';
import { DAY_MS, utcDay, utcMonth } from '../time.js';
import type { ApiTokenDeps } from './apiToken.js';

const DAYS = 30;
const MONTHS = 12;

const INT = { type: 'integer', minimum: 0 };
const DATE = { type: 'string', format: 'date' };
const series = (items: Record<string, unknown>, length: number) => ({ type: 'array', minItems: length, maxItems: length, items });
/** The usage body's schema (orgs/usage.ts answers the same). */
export const USAGE_BODY = {
  type: 'object', required: ['days', 'months', 'keys'],
  properties: {
    days: series({
      type: 'object', required: ['date', 'uses', 'denied'],
      properties: { date: DATE, uses: { ...INT, description: 'uses counted on the owner\'s quota' }, denied: { ...INT, description: 'requests its quotas refused (per minute, day or month)' } },
    }, DAYS),
    months: series({ type: 'object', required: ['month', 'uses'], properties: { month: { type: 'string', pattern: '^[0-9]{4}-[0-9]{2}$' }, uses: INT } }, MONTHS),
    keys: {
      type: 'array', description: 'the owner\'s live keys, and revoked or rolled ones used in the 30 days, oldest first',
      items: {
        type: 'object', required: ['id', 'name', 'days'],
        properties: {
          id: { type: 'integer' }, name: { type: 'string' },
          days: series({ type: 'object', required: ['date', 'requests', 'denied'], properties: { date: DATE, requests: INT, denied: INT } }, DAYS),
        },
      },
    },
  },
};

const USAGE: EndpointSchema = {
  tags: ['user'], security: bearerOnly,
  summary: 'The user\'s uses and refusals per UTC day (last 30) and uses per month (last 12), oldest first, and each key\'s requests per day',
  response: { 200: USAGE_BODY, ...errors('apiKeyNotAccepted', 'tokenInvalid') },
};

/** The 30 UTC days that end with `now`'s and the 12 months that end with its month, oldest first. */
function windows(now: Date): { days: string[]; months: string[] } {
  const today = Math.floor(now.getTime() / DAY_MS);
  const days = Array.from({ length: DAYS }, (_, i) => utcDay(new Date((today - DAYS + 1 + i) * DAY_MS)));
  const months = Array.from({ length: MONTHS }, (_, i) => {
    const first = new Date(utcMonth(now));
    first.setUTCMonth(first.getUTCMonth() - MONTHS + 1 + i);
    return utcMonth(first);
  });
  return { days, months };
}

/** The usage body of a counter (a user's own, or an organization's pooled one) as of `now`. */
export async function usageBody(db: Queryable, counter: Counter, now: Date): Promise<Record<string, unknown>> {
  const { days, months } = windows(now);
  const counts = await ownerCounts(db, counter, months[0]!);
  const keys = await ownerKeyDays(db, counter, days[0]!, days[DAYS - 1]!);
  const byMonth = new Map<string, number>();
  for (const [day, { uses }] of counts.days) {
    const month = `${day.slice(0, 7)}-01`;
    byMonth.set(month, (byMonth.get(month) ?? 0) + uses);
  }
  // A plan with a monthly window only counts no day: its row's month count is then the month's.
  if (counts.month) byMonth.set(counts.month.month, Math.max(byMonth.get(counts.month.month) ?? 0, counts.month.uses));
  return {
    days: days.map((date) => ({ date, uses: counts.days.get(date)?.uses ?? 0, denied: counts.days.get(date)?.denied ?? 0 })),
    months: months.map((month) => ({ month: month.slice(0, 7), uses: byMonth.get(month) ?? 0 })),
    keys: keys.map((key) => ({
      id: key.id, name: key.name,
      days: days.map((date) => ({ date, requests: key.days.get(date)?.requests ?? 0, denied: key.days.get(date)?.denied ?? 0 })),
    })),
  };
}

export async function usageRoutes(app: FastifyInstance, deps: ApiTokenDeps): Promise<void> {
  const guarded = { schema: USAGE, preHandler: deps.requireUser(undefined, { bearerOnly: true }) };
  app.get('/usage', guarded, async (request) => usageBody(deps.db, { ownerType: 'user', id: currentUser(request).id }, deps.clock()));
}
