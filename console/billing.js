// An owner's billing on the console's user and organization pages (CONTRACT §29): the customer and
// each subscription as Stripe last said, linked to Stripe's dashboard, where the plan comes from and
// the past_due grace; and, beside the plan's choice, before the click, what an operator's change
// does while billing manages the plan (an override, which billing's next different plan ends).
// Every value is set as text; the links are the admin API's (billing.stripe.dashboardUrl).
import { h, table } from './app.js';
import { when } from './format.js';

const SOURCES = { billing: 'billing (a subscription)', operator: 'an operator', default: 'the default (no one chose it)' };

const outLink = (text, href) => (href ? h('a', { href, target: '_blank', rel: 'noopener noreferrer' }, text) : text);

/** The Billing section: where the plan comes from, the customer, the grace, the subscriptions. */
export function billingSection(billing, prefix) {
  if (!billing) return null;
  // Dates as the rest of the console shows them (format.js): readable, the exact instant on hover.
  const source = [`Plan from: ${SOURCES[billing.plan_source] ?? billing.plan_source}`,
    billing.override_since ? [` (an override of billing's ${billing.billing_plan}, since `, when(billing.override_since), ')'] : null];
  const grace = billing.grace_ends_at
    ? h('p', { id: `${prefix}-grace`, role: 'note' }, 'Payment past due: the plan is kept until ', when(billing.grace_ends_at), ', then the subscription stops giving it.')
    : null;
  const rows = billing.subscriptions.map((s) => [outLink(s.id, s.url), s.status, s.price, s.plan, when(s.current_period_end),
    s.cancel_at_period_end ? 'yes' : 'no', when(s.past_due_since)]);
  return h('section', { 'aria-labelledby': `h-${prefix}-billing` }, h('h3', { id: `h-${prefix}-billing` }, 'Billing'),
    h('p', { id: `${prefix}-plan-source` }, ...source),
    h('p', {}, 'Stripe customer: ', billing.customer_id ? outLink(billing.customer_id, billing.customer_url) : 'none'),
    grace,
    table(['Subscription', 'Status', 'Price', 'Plan', 'Period ends', 'Cancels at period end', 'Past due since'], rows));
}

/**
 * What saving another plan does while billing manages the plan, said before the click, and the
 * choice to override it: `override()` tells the save whether to send `"override": true`.
 */
export function overrideChoice(billing, prefix) {
  const managed = billing && billing.billing_plan !== null;
  if (!managed) return { node: null, override: () => false };
  const plan = billing.billing_plan;
  const until = `(the subscription changes plan, ends, or its payment grace runs out)`;
  const text = billing.override_since
    ? `An override stands: billing computes ${plan}, and its plan applies again as soon as it computes another ${until}. Saving ${plan} ends the override.`
    : `Billing sets this plan (${plan}, from its subscription). Another plan is an override: it holds only until billing computes a plan other than ${plan} ${until}; `
      + 'billing\'s plan then applies again.';
  const box = h('input', { type: 'checkbox', id: `${prefix}-override` });
  const node = h('div', { class: 'override' }, h('p', { id: `${prefix}-override-note`, role: 'note' }, text),
    box, h('label', { for: `${prefix}-override` }, `Override billing's plan (${plan})`));
  return { node, override: () => box.checked };
}
