// GET /admin/v1/overview (CONTRACT §24): the console's overview page, across users and plans, for
// the last 30 UTC days (today included): API-key requests and denials and counted uses per plan per
// day, the top users and organizations, and the plan mix. Read from the tables that already count
// (storage/operators/overview.ts); registered by adminRoutes (routes.ts), behind the admin key.
import type { FastifyInstance } from 'fastify';
import type { Config } from '../config/schema.js';
import { knownPlans } from '../pipeline/index.js';
import type { Database } from '../storage/database/index.js';
import { keyTrafficPerPlanDay, planMix, topOrgs, topUsers, usesPerPlanDay, type PlanDay } from '../storage/operators/index.js';
import { utcDay } from '../time.js';
import { errors, type EndpointSchema } from '../openapi.js';

const DAYS = 30;
const TOP = 10;

export interface OverviewDeps {
  db: Database;
  config: () => Pick<Config, 'plans' | 'routes'>;
  clock: () => Date;
}

/** The route's OpenAPI fragment (documentation only: src/openapi.ts). */
const OVERVIEW = {
  doc: {
    tags: ['admin'], summary: 'The last 30 UTC days across users and plans: API-key requests and denials and counted uses per plan per day, top users and organizations, plan mix (docs/console.md)',
    security: [{ adminKey: [] }],
    response: {
      200: {
        type: 'object',
        properties: {
          days: { type: 'array', items: { type: 'string', format: 'date' } }, plans: { type: 'array', items: { type: 'object' } }, top_users: { type: 'array', items: { type: 'object' } },
          top_orgs: { type: 'array', items: { type: 'object' } }, plan_mix: { type: 'object' },
        },
      },
      ...errors('adminUnauthorized', 'adminNotFound'),
    },
  },
} satisfies Record<string, EndpointSchema>;

export function overviewRoutes(app: FastifyInstance, deps: OverviewDeps): void {
  app.get('/v1/overview', { schema: OVERVIEW.doc, config: { role: 'viewer' } }, async () => overview(deps));
}

/** A plan's series, one number per day of `days` (0 where nothing was counted). */
function series(rows: PlanDay[], plan: string, days: string[]): number[] {
  const byDay = new Map(rows.filter((r) => r.plan === plan).map((r) => [r.day, r.n]));
  return days.map((d) => byDay.get(d) ?? 0);
}

async function overview({ db, config, clock }: OverviewDeps) {
  const now = clock();
  // Oldest first, as a chart reads: the 29 days before today, then today.
  const days = Array.from({ length: DAYS }, (_, i) => utcDay(new Date(now.getTime() - (DAYS - 1 - i) * 86_400_000)));
  const from = days[0]!;
  const [uses, traffic, users, orgs, userMix, orgMix] = await Promise.all([
    usesPerPlanDay(db, from), keyTrafficPerPlanDay(db, from), topUsers(db, from, TOP), topOrgs(db, from, TOP), planMix(db, 'users'), planMix(db, 'organizations'),
  ]);
  const requests = traffic.map((r) => ({ day: r.day, plan: r.plan, n: r.requests }));
  const denials = traffic.map((r) => ({ day: r.day, plan: r.plan, n: r.denied }));
  // The configuration's plans, then any other one still held (a plan since removed from gateway.yaml).
  const held = [...uses, ...traffic, ...userMix, ...orgMix].map((r) => r.plan);
  const plans = [...new Set([...knownPlans(config()), ...held])];
  return {
    days,
    plans: plans.map((plan) => ({ plan, requests: series(requests, plan, days), denials: series(denials, plan, days), uses: series(uses, plan, days) })),
    top_users: users,
    top_orgs: orgs,
    plan_mix: { users: userMix, orgs: orgMix },
  };
}
