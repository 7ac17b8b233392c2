// Before an owner goes (CONTRACT §23: "Deleting an account with an active subscription cancels it
// at period end first"): each of its subscriptions Stripe still bills, or retries billing, is set
// to end with the period already paid. Shared by every way an owner goes: the user's own deletion,
// an organization's, and an operator's erasure (admin API, console, `gateway users delete`).
import { subscriptionsOf, type Owner } from '../storage/usage/index.js';
import type { Queryable } from '../storage/database/index.js';
import type { StripeGateway } from './stripe.js';

/** Subscriptions Stripe still bills (or retries billing): the ones a deletion must stop. */
const RUNNING = new Set(['active', 'trialing', 'past_due']);

/**
 * Sets the owner's running subscriptions to cancel at period end, through Stripe; how many. Throws
 * StripeUnavailable when Stripe could not be told: the caller keeps the owner (a retry sets again
 * the ones already set, which changes nothing).
 */
export async function cancelRunningSubscriptions(db: Queryable, stripe: Pick<StripeGateway, 'cancelAtPeriodEnd'>, owner: Owner): Promise<number> {
  const running = (await subscriptionsOf(db, owner)).filter((s) => RUNNING.has(s.status));
  for (const sub of running) await stripe.cancelAtPeriodEnd(sub.stripe_subscription_id);
  return running.length;
}
