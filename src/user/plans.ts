// GET /api/v1/plans (CONTRACT §30), no guard, beside the user's endpoints (it reads the plans as /me does): every plan the configuration knows (`plans.limits`,
// the base plans and those routes name: knownPlans), each with its limits and the Stripe prices
// that buy it (billing.stripe.prices, in the file's order; none without billing). What a pricing
// page, the portal's among them, shows before anyone signs in. Limits are read from the request's
// live snapshot: a reload changes them at once; prices are the start-up configuration's, as
// billing's are.
import type { FastifyInstance } from 'fastify';
import { knownPlans, planLimitsOf } from '../pipeline/index.js';
import type { EndpointSchema } from '../openapi.js';

const LIMIT = { type: ['integer', 'null'], minimum: 0 };
const PLANS: EndpointSchema = {
  tags: ['billing'], summary: 'Every plan the configuration knows, its limits (null: none) and the Stripe price ids that buy it; no credential needed',
  response: {
    200: {
      type: 'object', required: ['plans'],
      properties: {
        plans: {
          type: 'array',
          items: {
            type: 'object', required: ['name', 'limits', 'prices'],
            properties: {
              name: { type: 'string' },
              limits: {
                type: 'object', required: ['daily', 'monthly', 'perMinute'],
                properties: { daily: LIMIT, monthly: { ...LIMIT, description: 'with overage: meter, the included allowance' }, perMinute: LIMIT },
              },
              prices: { type: 'array', items: { type: 'string' } },
            },
          },
        },
      },
    },
  },
};

export async function plansRoute(app: FastifyInstance, deps: { prices: Readonly<Record<string, string>> }): Promise<void> {
  app.get('/api/v1/plans', { schema: PLANS }, async (request) => {
    const { settings } = request.context.live;
    return {
      plans: knownPlans(settings).map((name) => {
        const { daily, monthly, perMinute } = planLimitsOf(settings.plans, name);
        return { name, limits: { daily, monthly, perMinute }, prices: Object.keys(deps.prices).filter((price) => deps.prices[price] === name) };
      }),
    };
  });
}
