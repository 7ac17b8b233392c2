// `gateway stripe-fake trigger <event>` (CONTRACT §29): first the change the event reports, made
// to the fake's own objects, then the events a real account sends for that change, in Stripe's
// order. The gateway ignores an event's payload and reads the subscription back (§23), so an event
// without its change would change nothing: a failed payment makes the subscription past_due before
// anything is sent, and the gateway's GET then finds it so.
import type Stripe from 'stripe';
import type { FakeHolder } from './holder.js';
import { invoiceObject } from './invoices.js';
import { checkoutSessionObject, fakeId, now, subscriptionObject, type FakeCheckout, type FakeEvent, type FakeSubscription } from './objects.js';
import type { Delivery } from './webhook.js';

/** The path of the trigger endpoint: not Stripe's (Stripe's are under /v1/). */
export const TRIGGER_PATH = '/fake/trigger';

/** A trigger that cannot be carried out (unknown event, a missing option): its message says why. */
export class TriggerError extends Error {}

/** The events `trigger` takes, in the order Stripe sends those of one change (a change's events are sent in this order). */
export const TRIGGERS = [
  'checkout.session.completed', 'customer.subscription.created', 'customer.subscription.updated', 'customer.subscription.deleted', 'invoice.payment_failed', 'invoice.paid',
] as const;
export type TriggerEvent = (typeof TRIGGERS)[number];

const STATUSES: readonly Stripe.Subscription.Status[] = ['active', 'trialing', 'past_due', 'unpaid', 'canceled', 'incomplete', 'incomplete_expired', 'paused'];
/** The statuses a failed payment leaves (Stripe's subscription settings choose): past_due by default. */
const UNPAID: ReadonlySet<string> = new Set(['past_due', 'unpaid']);

export interface TriggerArgs {
  event: string;
  customer?: string;
  price?: string;
  status?: string;
  /** The subscription to change (default: the customer's latest one not canceled). */
  subscription?: string;
  /** checkout.session.completed: the session to pay (the gateway's; its URL ends with its id). */
  session?: string;
}

export interface TriggerResult {
  customer: string;
  subscription: Stripe.Subscription;
  events: Delivery[];
}

const inOrder = (events: FakeEvent[]) => events.map((event, i) => ({ event, i }))
  .sort((a, b) => TRIGGERS.indexOf(a.event.type) - TRIGGERS.indexOf(b.event.type) || a.i - b.i).map(({ event }) => event);

const updated = (sub: FakeSubscription): FakeEvent => ({ type: 'customer.subscription.updated', object: subscriptionObject(sub) });
const invoice = (sub: FakeSubscription, outcome: 'paid' | 'failed'): FakeEvent => (
  outcome === 'paid' ? { type: 'invoice.paid', object: invoiceObject(sub, 'paid') } : { type: 'invoice.payment_failed', object: invoiceObject(sub, 'failed') });

/** What a paid checkout sends: the completed session, the subscription it made, its first invoice paid. */
export function eventsOfPayment(session: FakeCheckout, sub: FakeSubscription): FakeEvent[] {
  return inOrder([
    { type: 'checkout.session.completed', object: checkoutSessionObject(session) },
    { type: 'customer.subscription.created', object: subscriptionObject(sub) },
    invoice(sub, 'paid'),
  ]);
}

function statusOf(args: TriggerArgs, fallback?: Stripe.Subscription.Status): Stripe.Subscription.Status | undefined {
  if (args.status === undefined) return fallback;
  if (!(STATUSES as readonly string[]).includes(args.status)) throw new TriggerError(`--status ${args.status}: expected one of ${STATUSES.join(', ')}`);
  return args.status as Stripe.Subscription.Status;
}

function priceOf(args: TriggerArgs): string {
  if (!args.price) throw new TriggerError(`${args.event} needs --price (a price id of billing.stripe.prices, such as price_premium_monthly)`);
  return args.price;
}

/** The subscription a trigger changes: --subscription, or the customer's latest one still running (else its latest). */
function subscriptionOf(fake: FakeHolder, args: TriggerArgs): FakeSubscription {
  if (args.subscription) {
    const sub = fake.subscriptions.get(args.subscription);
    if (!sub) throw new TriggerError(`no subscription ${args.subscription}`);
    return sub;
  }
  if (!args.customer) throw new TriggerError(`${args.event} needs --customer (or --subscription)`);
  const subs = [...fake.subscriptions.values()].filter((s) => s.customer === args.customer);
  const sub = subs.filter((s) => s.status !== 'canceled' && s.status !== 'incomplete_expired').at(-1) ?? subs.at(-1);
  if (!sub) throw new TriggerError(`customer ${args.customer} has no subscription: pay a checkout, or trigger customer.subscription.created --customer ${args.customer} --price P`);
  return sub;
}

/** The change `args.event` reports, made to the fake's objects; the events it sends for it, in Stripe's order. */
function change(fake: FakeHolder, args: TriggerArgs & { event: Exclude<TriggerEvent, 'checkout.session.completed'> }): { sub: FakeSubscription; events: FakeEvent[] } {
  if (args.event === 'customer.subscription.created') {
    const status = statusOf(args, 'active')!;
    const sub: FakeSubscription = { id: fakeId('sub'), customer: fake.customer(args.customer).id, status, prices: [priceOf(args)], metadata: {}, periodStart: now() };
    fake.subscriptions.set(sub.id, sub);
    return { sub, events: [{ type: args.event, object: subscriptionObject(sub) }, ...(status === 'active' ? [invoice(sub, 'paid')] : [])] };
  }
  const sub = subscriptionOf(fake, args);
  const before = sub.status;
  switch (args.event) {
    case 'customer.subscription.updated': {
      if (args.price) sub.prices = [args.price];
      sub.status = statusOf(args, sub.status)!;
      const payment = UNPAID.has(sub.status) && !UNPAID.has(before) ? [invoice(sub, 'failed')] : UNPAID.has(before) && sub.status === 'active' ? [invoice(sub, 'paid')] : [];
      return { sub, events: [updated(sub), ...payment] };
    }
    case 'customer.subscription.deleted':
      sub.status = 'canceled';
      return { sub, events: [{ type: args.event, object: subscriptionObject(sub) }] };
    case 'invoice.payment_failed':
      sub.status = statusOf(args, 'past_due')!;
      return { sub, events: [...(sub.status !== before ? [updated(sub)] : []), invoice(sub, 'failed')] };
    case 'invoice.paid':
      // A retry that succeeds ends past_due; otherwise the invoice is a renewal: a new period.
      if (!UNPAID.has(before)) sub.periodStart = now();
      sub.status = 'active';
      return { sub, events: [updated(sub), invoice(sub, 'paid')] };
  }
}

export async function trigger(fake: FakeHolder, args: TriggerArgs): Promise<TriggerResult> {
  if (!(TRIGGERS as readonly string[]).includes(args.event)) throw new TriggerError(`unknown event ${JSON.stringify(args.event)}; known: ${TRIGGERS.join(', ')}`);
  if (args.event === 'checkout.session.completed') {
    const session = args.session ?? ownSession(fake, args);
    const paid = await fake.pay(session);
    return { customer: paid.customer, subscription: subscriptionObject(fake.subscriptions.get(paid.subscription)!), events: paid.events };
  }
  const { sub, events } = change(fake, args as TriggerArgs & { event: Exclude<TriggerEvent, 'checkout.session.completed'> });
  return { customer: sub.customer, subscription: subscriptionObject(sub), events: await fake.send(inOrder(events)) };
}

/** A session of the fake's own, as `stripe trigger` makes: the gateway made none, so it links nobody with it. */
function ownSession(fake: FakeHolder, args: TriggerArgs): string {
  const id = fakeId('cs_test');
  const form = { 'line_items[0][price]': priceOf(args), ...(args.customer ? { customer: args.customer } : {}) };
  fake.checkouts.set(id, { id, form, subscription: null, customer: null, url: `${fake.url}/c/pay/${id}` });
  return id;
}
