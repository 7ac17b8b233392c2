// What operators see of billing and may do against it (CONTRACT §29), for the admin API, the
// console and the CLI alike: an owner's billing as support reads it, and the rule of an operator's
// plan change on an owner whose plan billing manages (an active, trialing, or past_due-within-grace
// subscription): 409 plan_managed_by_billing unless it is an override, which then holds while
// billing keeps computing the plan it computed when the override was made (billing.ts settlePlan
// ends it when billing computes another). The one door admin/ and cli/ have into billing/.
import { lockAccount } from '../account/change.js';
import type { Config } from '../config/schema.js';
import { isLiveKey, type BillingConfig } from '../config/schema/billing.js';
import {
  customerOf, endOverride, listedSubscriptionsOf, overrideOf, saveOverride, subscriptionsOf, type Owner, type StoredSubscription,
} from '../storage/usage/index.js';
import type { Queryable } from '../storage/database/index.js';
import { lockOrganization } from '../storage/orgs/index.js';
import { counts, planFromSubscriptions, planOfPrices } from './plan.js';

const DAY_MS = 86_400_000;
/** The plan of an owner no one chose a plan for (a new user, a new organization). */
const DEFAULT_PLAN = 'free';

/** What billing's rules read: its configuration (none: billing manages no plan), the plans' order, and now. */
export interface PlanRules {
  stripe: BillingConfig['stripe'] | undefined;
  plans: Config['plans'];
  now: Date;
}

export const planRules = (config: { plans: Config['plans']; billing?: BillingConfig | undefined }, now: Date): PlanRules =>
  ({ stripe: config.billing?.stripe, plans: config.plans, now });

/** What billing computes for the owner: the plan, and whether it manages it (a subscription counts now). */
export interface Computed { plan: string; managed: boolean }

export function computedPlan(subs: readonly StoredSubscription[], rules: PlanRules): Computed {
  if (!rules.stripe) return { plan: DEFAULT_PLAN, managed: false };
  const { prices, pastDueGraceDays: graceDays } = rules.stripe;
  return {
    plan: planFromSubscriptions(subs, { prices, graceDays, plans: rules.plans, now: rules.now }),
    managed: subs.some((s) => counts(s, graceDays, rules.now)),
  };
}

/**
 * The owner's row locked (billing locks it the same way before it sets a plan); false when the
 * owner is gone. The one check that it exists: held until the commit, the row is there for the write.
 */
async function lockOwner(tx: Queryable, owner: Owner, now: Date): Promise<boolean> {
  const row = owner.type === 'org' ? await lockOrganization(tx, owner.id) : await lockAccount(tx, { clock: () => now }, { userId: owner.id, mode: 'update' });
  return row !== undefined;
}

export type OperatorPlanCheck = { outcome: 'gone' } | { outcome: 'managed'; billingPlan: string } | { outcome: 'allowed'; override: boolean };

/**
 * Decides an operator's change of the owner's plan to `plan`, in the change's transaction, the
 * owner's row locked first: refused ('managed') when billing manages the plan, computes another
 * and the operator did not say override; an override is stored (it holds from now); setting the
 * plan billing computes, or any plan billing does not manage, ends an override standing.
 */
export async function checkOperatorPlan(tx: Queryable, owner: Owner, plan: string, override: boolean, rules: PlanRules): Promise<OperatorPlanCheck> {
  if (!(await lockOwner(tx, owner, rules.now))) return { outcome: 'gone' };
  const computed = computedPlan(await subscriptionsOf(tx, owner), rules);
  if (!computed.managed || computed.plan === plan) {
    await endOverride(tx, owner);
    return { outcome: 'allowed', override: false };
  }
  if (!override) return { outcome: 'managed', billingPlan: computed.plan };
  await saveOverride(tx, owner, computed.plan, rules.now);
  return { outcome: 'allowed', override: true };
}

export type PlanChange<T> = { outcome: 'gone' } | { outcome: 'managed'; billingPlan: string } | { outcome: 'set'; result: T };

/**
 * An operator's plan change (admin API, console, CLI), in the caller's transaction: checked as
 * checkOperatorPlan says, then written by `write` with what its audit row's data adds
 * (`override: true` when it held against billing: the hooks say so too, hooks/fromAudit.ts). The
 * owner's row is locked by then: `write` finds it.
 */
export async function operatorSetsPlan<T>(
  tx: Queryable, owner: Owner, request: { plan: string; override: boolean }, rules: PlanRules,
  write: (audit: { override?: true }) => Promise<T>,
): Promise<PlanChange<T>> {
  const check = await checkOperatorPlan(tx, owner, request.plan, request.override, rules);
  if (check.outcome !== 'allowed') return check;
  return { outcome: 'set', result: await write(check.override ? { override: true } : {}) };
}

/** The body's `override`: absent is false; anything but a boolean is undefined (a 400). */
export const overrideFlag = (value: unknown): boolean | undefined => (value === undefined ? false : typeof value === 'boolean' ? value : undefined);

/** Stripe's dashboard page of a customer or subscription: test-mode keys see the /test/ pages. */
function dashboardLink(stripe: BillingConfig['stripe'] | undefined, kind: 'customers' | 'subscriptions', id: string): string | null {
  if (!stripe) return null;
  // The config's default is Stripe's own dashboard (config/schema/billing.ts).
  const base = stripe.dashboardUrl.replace(/\/+$/, '');
  const test = isLiveKey(stripe.secretKey) ? '' : '/test';
  return `${base}${test}/${kind}/${encodeURIComponent(id)}`;
}

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);

/**
 * An owner's billing as support reads it (GET /admin/v1/users/{id}, /orgs/{id}): the customer,
 * each subscription as last fetched from Stripe with the plan it gives, where the plan comes from
 * (billing, an operator, or the default), the plan billing computes while it manages it, the
 * override standing, and when the first running grace ends.
 */
export async function billingView(q: Queryable, owner: Owner, currentPlan: string, rules: PlanRules) {
  const [customer, subs, held] = await Promise.all([customerOf(q, owner), listedSubscriptionsOf(q, owner), overrideOf(q, owner)]);
  const computed = computedPlan(subs, rules);
  const graceDays = rules.stripe?.pastDueGraceDays ?? 0;
  // past_due_since is set while the subscription is past_due, and only then (storage/usage/billing.ts).
  const graces = subs.filter((s) => s.past_due_since && counts(s, graceDays, rules.now))
    .map((s) => s.past_due_since!.getTime() + graceDays * DAY_MS);
  const source = computed.managed ? (held ? 'operator' : 'billing') : currentPlan === DEFAULT_PLAN ? 'default' : 'operator';
  return {
    customer_id: customer ?? null,
    customer_url: customer === undefined ? null : dashboardLink(rules.stripe, 'customers', customer),
    subscriptions: subs.map((s) => ({
      id: s.stripe_subscription_id, status: s.status, price: s.price,
      plan: (rules.stripe && planOfPrices(s.prices, { prices: rules.stripe.prices, plans: rules.plans })) ?? null,
      current_period_end: iso(s.current_period_end), cancel_at_period_end: s.cancel_at_period_end, past_due_since: iso(s.past_due_since),
      url: dashboardLink(rules.stripe, 'subscriptions', s.stripe_subscription_id),
    })),
    plan_source: source as 'billing' | 'operator' | 'default',
    billing_plan: computed.managed ? computed.plan : null,
    override_since: computed.managed && held ? held.created_at.toISOString() : null,
    grace_ends_at: graces.length ? new Date(Math.min(...graces)).toISOString() : null,
  };
}

const DATE_OR_NULL = { type: ['string', 'null'], format: 'date-time' };
const STRING_OR_NULL = { type: ['string', 'null'] };

/** billingView's shape, for the OpenAPI fragments of the admin API's user and organization. */
export const BILLING_SCHEMA = {
  type: 'object',
  description: 'The owner\'s billing (CONTRACT §29); customer_url and subscriptions[].url link Stripe\'s dashboard (billing.stripe.dashboardUrl; test keys: its /test/ pages)',
  properties: {
    customer_id: STRING_OR_NULL, customer_url: STRING_OR_NULL,
    subscriptions: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          id: { type: 'string' }, status: { type: 'string' }, price: STRING_OR_NULL, plan: { ...STRING_OR_NULL, description: 'the plan its listed prices give; null: none listed' },
          current_period_end: DATE_OR_NULL, cancel_at_period_end: { type: 'boolean' }, past_due_since: DATE_OR_NULL, url: STRING_OR_NULL,
        },
      },
    },
    plan_source: {
      enum: ['billing', 'operator', 'default'],
      description: 'billing: a subscription gives the plan; operator: an operator set it (an override, while billing manages it); default: free, no one chose it',
    },
    billing_plan: { ...STRING_OR_NULL, description: 'the plan billing computes while it manages the plan; null otherwise' },
    override_since: { ...DATE_OR_NULL, description: 'when the override standing against billing_plan was made; it ends when billing computes another plan' },
    grace_ends_at: { ...DATE_OR_NULL, description: 'when the first past_due grace running ends (billing.stripe.pastDueGraceDays)' },
  },
};

/** PUT /admin/v1/users/{id}/plan's and /orgs/{id}/plan's body. */
export const PLAN_BODY = {
  type: 'object', required: ['plan'],
  properties: { plan: { type: 'string' }, override: { type: 'boolean', default: false, description: 'set it even though billing manages the plan (see the description)' } },
};
export const OVERRIDE_DESCRIPTION = 'While a subscription (active, trialing, or past_due within its grace) gives the owner its plan, another plan is refused '
  + '(409 plan_managed_by_billing, with billing_plan) unless `override` is true. An override holds while billing keeps computing the plan it computed '
  + 'when it was made (renewals, invoices and payment retries change nothing) and ends when billing computes another plan, or when the plan billing '
  + 'computes is set. Audited with data.override: true.';
