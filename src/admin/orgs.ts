// /admin/v1/orgs (CONTRACT §22, operators): organizations as support sees them — searched by name,
// one with its members and usage, and its plan set by hand. Registered by routes.ts inside the
// admin plugin, behind its key check; each route carries its OpenAPI fragment (DOCS) beside it.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { planUnknownParams, sendDenial, sendError } from '../errors/index.js';
import { errors } from '../openapi.js';
import { knownPlans, usedThisMonth, usedToday } from '../pipeline/index.js';
import { UNPOOLED_PLAN } from '../orgActing.js';
import { utcDay, utcMonth } from '../time.js';
import { parseIntegerId, type Database, type Queryable } from '../storage/database/index.js';
import { organizations as orgs } from '../storage/orgs/index.js';
import type { MembershipCache } from '../storage/feed/index.js';
import type { Audit, AuditEvent } from '../audit.js';
import type { Config } from '../config/schema.js';
import { billingView, BILLING_SCHEMA, OVERRIDE_DESCRIPTION, operatorSetsPlan, overrideFlag, PLAN_BODY, planRules, type PlanRules } from '../billing/operator.js';
import { field, iso, keysetPages, queryText } from './views.js';

/** What these routes use of the admin routes' deps (routes.ts passes its own). */
export interface OrgAdminDeps {
  db: Database;
  audit: Audit;
  config: () => Pick<Config, 'plans' | 'routes'>;
  billing: Config['billing'];
  clock: () => Date;
  /** This instance's memberships (with organizations enabled): an organization's plan set here holds here at once. */
  memberships?: Pick<MembershipCache, 'forget'>;
}

/** Who changes (routes.ts's by()): passed in, so this file does not import routes.ts. */
export type ActorOf = (request: FastifyRequest) => Pick<AuditEvent, 'actor' | 'ip' | 'userAgent'>;

export const orgPages = keysetPages('o');

const INT = { type: 'integer' };
const STR = { type: 'string' };
const DATE = { type: 'string', format: 'date-time' };
const USAGE = { type: ['integer', 'null'], description: 'the pooled counter\'s; null on free (members count on their own counters) and until pooled counters are stored' };
const security = [{ adminKey: [] }];
const tags = ['admin'];
const idParam = { type: 'object', properties: { id: INT } };
const listed = { type: 'object', properties: { id: INT, name: STR, plan: STR, created_at: DATE, member_count: INT } };
const member = { type: 'object', properties: { user_id: INT, email: STR, role: { enum: orgs.ORG_ROLES }, joined_at: DATE } };
const detail = {
  type: 'object',
  properties: { id: INT, name: STR, plan: STR, created_at: DATE, members: { type: 'array', items: member }, daily_usage: USAGE, monthly_usage: USAGE },
};

export const DOCS = {
  list: {
    tags, security, summary: 'A page of organizations, newest first: query matches the name (substring, any case) or exact id',
    querystring: { type: 'object', properties: { query: STR, plan: STR, limit: { type: 'integer', minimum: 1, maximum: 200, default: 50 }, cursor: STR } },
    response: {
      200: { type: 'object', properties: { orgs: { type: 'array', items: listed }, next_cursor: { type: ['string', 'null'] } } },
      ...errors('adminListInvalid', 'adminUnauthorized', 'adminNotFound'),
    },
  },
  read: {
    tags, security, params: idParam, summary: 'An organization with its members, the usage of its pooled counter, and its billing',
    response: { 200: { ...detail, properties: { ...detail.properties, billing: BILLING_SCHEMA } }, ...errors('adminUnauthorized', 'adminNotFound') },
  },
  setPlan: {
    tags, security, params: idParam, body: PLAN_BODY, description: OVERRIDE_DESCRIPTION,
    summary: 'Set an organization\'s plan (a configured one); every instance applies it within one second',
    response: {
      200: { ...detail, properties: { ...detail.properties, billing: BILLING_SCHEMA } }, ...errors('planUnknown', 'badRequest', 'adminUnauthorized', 'adminNotFound', 'planManagedByBilling'),
    },
  },
};

/** Registers the organizations' admin routes on the admin plugin (its key check already hooked). */
export function adminOrgRoutes(app: FastifyInstance, deps: OrgAdminDeps, by: ActorOf): void {
  app.get('/v1/orgs', { schema: DOCS.list, config: { role: 'viewer' } }, (request, reply) => findOrgs(deps, request, reply));
  app.get('/v1/orgs/:id', { schema: DOCS.read, config: { role: 'viewer' } }, (request, reply) => getOrg(deps, request, reply));
  app.put('/v1/orgs/:id/plan', { schema: DOCS.setPlan, config: { role: 'admin' } }, (request, reply) => setOrgPlan(deps, by, request, reply));
}

/** GET /admin/v1/orgs's parameters, checked; undefined when one is malformed (a 400, as for users). */
export function orgFilter(q: Record<string, unknown>, plans: readonly string[]): orgs.OrgFilter | undefined {
  const [query, plan, limit, cursor] = [q.query, q.plan, q.limit, q.cursor].map(queryText);
  if ([query, plan, limit, cursor].includes(null)) return undefined;
  const page = orgPages.page(limit ?? undefined, cursor ?? undefined);
  if (!page || (plan !== undefined && !plans.includes(plan!))) return undefined;
  return { ...(query?.trim() ? { query: query.trim() } : {}), ...(plan !== undefined ? { plan: plan! } : {}), ...page };
}

export const listedView = (o: orgs.ListedOrganization) => ({ id: o.id, name: o.name, plan: o.plan, created_at: iso(o.created_at), member_count: o.member_count });

async function findOrgs({ db, config }: OrgAdminDeps, request: FastifyRequest, reply: FastifyReply) {
  const filter = orgFilter(request.query as Record<string, unknown>, knownPlans(config()));
  if (!filter) return sendError(reply, 'adminListInvalid');
  const { page, next } = orgPages.split(await orgs.listOrganizations(db, { ...filter, limit: filter.limit + 1 }), filter.limit);
  return { orgs: page.map(listedView), next_cursor: next };
}

/**
 * An organization as operators see it. The usage is its pooled counter's (CONTRACT §22): today's and
 * this month's uses (UTC); null on free, where there is none (members count on their own).
 */
export async function orgDetail(db: Queryable, id: number, rules: PlanRules) {
  const org = await orgs.findOrganization(db, id);
  if (!org) return undefined;
  const members = (await orgs.membersOf(db, org.id)).map((m) => ({ ...m, joined_at: iso(m.joined_at) }));
  const pooled = org.plan === UNPOOLED_PLAN ? undefined : await orgs.pooledUsage(db, org.id);
  const now = rules.now;
  return {
    id: org.id, name: org.name, plan: org.plan, created_at: iso(org.created_at), members,
    daily_usage: pooled ? usedToday(pooled, utcDay(now)) : null, monthly_usage: pooled ? usedThisMonth(pooled, utcMonth(now)) : null,
    // Its billing (CONTRACT §29), as a user's.
    billing: await billingView(db, { type: 'org', id: org.id }, org.plan, rules),
  };
}

async function getOrg({ db, config, clock, billing }: OrgAdminDeps, request: FastifyRequest, reply: FastifyReply) {
  const id = parseIntegerId((request.params as { id: string }).id);
  const org = id === undefined ? undefined : await orgDetail(db, id, planRules({ plans: config().plans, billing }, clock()));
  return org ?? sendError(reply, 'adminNotFound');
}

/**
 * The plan changes in one UPDATE with its audit row; the organizations trigger announces it on the
 * change feed, so every instance drops what it cached of the organization (within one second, as a
 * user's plan), and this one at once, as a user's plan set here.
 */
async function setOrgPlan(deps: OrgAdminDeps, by: ActorOf, request: FastifyRequest, reply: FastifyReply) {
  const id = parseIntegerId((request.params as { id: string }).id);
  if (id === undefined) return sendError(reply, 'adminNotFound');
  const plan = field(request.body, 'plan');
  const plans = knownPlans(deps.config());
  if (typeof plan !== 'string' || !plans.includes(plan)) return sendDenial(reply, { code: 'planUnknown', params: planUnknownParams(plans) });
  const override = overrideFlag(field(request.body, 'override'));
  if (override === undefined) return sendError(reply, 'badRequest');
  const rules = planRules({ plans: deps.config().plans, billing: deps.billing }, deps.clock());
  // Refused when billing manages the plan and computes another (CONTRACT §29), unless an override.
  const changed = await deps.db.transaction((tx) => operatorSetsPlan(tx, { type: 'org', id }, { plan, override }, rules, async (extra) => {
    // The organization's row is locked (operatorSetsPlan): it is there.
    const { before } = (await orgs.setOrganizationPlan(tx, id, plan))!;
    await deps.audit.record({ type: 'admin.org_plan_changed', ...by(request), userId: null, data: { org_id: id, plan, previous: before.plan, ...extra } }, tx);
  }));
  if (changed.outcome === 'managed') return sendError(reply, 'planManagedByBilling', { billing_plan: changed.billingPlan });
  if (changed.outcome === 'gone') return sendError(reply, 'adminNotFound');
  deps.memberships?.forget(id);
  request.log.info({ orgId: id, plan, override }, 'admin: organization plan set');
  return orgDetail(deps.db, id, rules);
}
