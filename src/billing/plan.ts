// The owner's plan from its subscriptions (CONTRACT §23), a pure function: each subscription
// active or trialing, or past_due within the grace, gives the plans of its listed prices (any
// item: an add-on listed first, a metered item beside a base fee); the highest of them wins, none
// gives free. Prices not in billing.stripe.prices give nothing.
import { BASE_PLANS, type Config } from '../config/schema.js';
import type { StoredSubscription } from '../storage/usage/index.js';

const DAY_MS = 86_400_000;

export interface PlanInputs {
  prices: Record<string, string>;
  plans: Config['plans'];
  graceDays: number;
  now: Date;
}

/** Whether the subscription still gives its plan now. */
export function counts(sub: Pick<StoredSubscription, 'status' | 'past_due_since'>, graceDays: number, now: Date): boolean {
  if (sub.status === 'active' || sub.status === 'trialing') return true;
  if (sub.status !== 'past_due' || !sub.past_due_since) return false;
  return now.getTime() < sub.past_due_since.getTime() + graceDays * DAY_MS;
}

/**
 * How plans rank: the order of plans.limits (the one listed latest wins) above all others, then a
 * plan only a route's `plans:` names, then free < premium < pro; no plan ranks -1, below all.
 */
function rank(plans: Config['plans'], plan: string | undefined): number {
  if (plan === undefined) return -1;
  const listed = Object.keys(plans.limits).indexOf(plan);
  if (listed >= 0) return BASE_PLANS.length + 1 + listed;
  const base = BASE_PLANS.indexOf(plan as (typeof BASE_PLANS)[number]);
  return base >= 0 ? base : BASE_PLANS.length;
}

/** The plan a subscription's prices give when it counts: the highest of its listed prices' plans; undefined when none is listed. */
export function planOfPrices(prices: readonly string[], inputs: Pick<PlanInputs, 'prices' | 'plans'>): string | undefined {
  let best: string | undefined;
  for (const price of prices) {
    const plan = Object.hasOwn(inputs.prices, price) ? inputs.prices[price]! : undefined;
    // A price not listed gives undefined, which ranks -1: never above what was found.
    if (rank(inputs.plans, plan) > rank(inputs.plans, best)) best = plan;
  }
  return best;
}

/** The highest plan any subscription that counts now gives; free when none gives one. */
export function planFromSubscriptions(subs: readonly Pick<StoredSubscription, 'status' | 'past_due_since' | 'prices'>[], inputs: PlanInputs): string {
  return planOfPrices(subs.filter((sub) => counts(sub, inputs.graceDays, inputs.now)).flatMap((sub) => sub.prices), inputs) ?? 'free';
}
