// `gateway stripe-fake trigger` change by change (src/stripeFake/triggers.ts): what each event does
// to the double's subscription first, and which events follow in Stripe's order, read from the
// trigger's answer (no webhook: each event is listed, not sent). Which subscription a customer's
// trigger changes, and each refusal's message. Sent to a receiver through the official library:
// fake.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStripeFake, type StripeFake, type TriggerArgs } from '../../src/stripeFake/index.js';

describe('the Stripe double\'s triggers', () => {
  let fake: StripeFake;
  beforeAll(async () => { fake = await startStripeFake(); });
  afterAll(async () => { await fake?.close(); });

  let customers = 0;
  const newCustomer = () => `cus_t${++customers}`;
  /** The trigger's subscription (status, prices, period start) and the types of the events it sent, in order. */
  const run = async (args: TriggerArgs) => {
    const { customer, subscription, events } = await fake.trigger(args);
    const prices = subscription.items.data.map((i) => i.price.id);
    return { customer, id: subscription.id, status: subscription.status, prices, periodStart: subscription.start_date, events: events.map((e) => e.type) };
  };

  it('customer.subscription.created: active with its first invoice paid, or in the status asked without one; a new customer unless one is named', async () => {
    const customer = newCustomer();
    expect(await run({ event: 'customer.subscription.created', customer, price: 'price_pro' }))
      .toMatchObject({ customer, status: 'active', prices: ['price_pro'], events: ['customer.subscription.created', 'invoice.paid'] });
    expect(await run({ event: 'customer.subscription.created', customer, price: 'price_pro', status: 'trialing' }))
      .toMatchObject({ customer, status: 'trialing', events: ['customer.subscription.created'] });
    expect((await run({ event: 'customer.subscription.created', price: 'price_pro' })).customer).toMatch(/^cus_[0-9a-f]{16}$/);
  });

  it('customer.subscription.updated: a price and a status changed; a payment event only where the status crosses into or out of unpaid', async () => {
    const customer = newCustomer();
    await run({ event: 'customer.subscription.created', customer, price: 'price_pro' });
    const update = (status?: string, price?: string) => run({ event: 'customer.subscription.updated', customer, ...(status ? { status } : {}), ...(price ? { price } : {}) });
    expect(await update(undefined, 'price_team')).toMatchObject({ status: 'active', prices: ['price_team'], events: ['customer.subscription.updated'] });
    expect(await update('past_due')).toMatchObject({ status: 'past_due', prices: ['price_team'], events: ['customer.subscription.updated', 'invoice.payment_failed'] });
    expect(await update('unpaid')).toMatchObject({ status: 'unpaid', events: ['customer.subscription.updated'] });
    expect(await update('active')).toMatchObject({ status: 'active', events: ['customer.subscription.updated', 'invoice.paid'] });
    expect(await update('trialing')).toMatchObject({ status: 'trialing', events: ['customer.subscription.updated'] });
    expect(await update('active')).toMatchObject({ status: 'active', events: ['customer.subscription.updated'] });
  });

  it('invoice.payment_failed: past_due (or the status asked) first, then the failure; no update when the status stays', async () => {
    const customer = newCustomer();
    await run({ event: 'customer.subscription.created', customer, price: 'price_pro' });
    expect(await run({ event: 'invoice.payment_failed', customer })).toMatchObject({ status: 'past_due', events: ['customer.subscription.updated', 'invoice.payment_failed'] });
    expect(await run({ event: 'invoice.payment_failed', customer })).toMatchObject({ status: 'past_due', events: ['invoice.payment_failed'] });
    expect(await run({ event: 'invoice.payment_failed', customer, status: 'unpaid' })).toMatchObject({ status: 'unpaid', events: ['customer.subscription.updated', 'invoice.payment_failed'] });
  });

  it('invoice.paid: active again; a renewal (from active) starts a new period, a retry that succeeds (from unpaid) keeps it', async () => {
    const customer = newCustomer();
    const started = await run({ event: 'customer.subscription.created', customer, price: 'price_pro' });
    fake.setSubscription({ id: started.id, customer, status: 'past_due', prices: ['price_pro'], periodStart: 1000 });
    expect(await run({ event: 'invoice.paid', customer })).toMatchObject({ status: 'active', periodStart: 1000, events: ['customer.subscription.updated', 'invoice.paid'] });
    const renewed = await run({ event: 'invoice.paid', customer });
    expect(renewed).toMatchObject({ status: 'active', events: ['customer.subscription.updated', 'invoice.paid'] });
    expect(renewed.periodStart).toBeGreaterThan(1_000_000_000);
    fake.setSubscription({ id: started.id, customer, status: 'unpaid', prices: ['price_pro'], periodStart: 2000 });
    expect(await run({ event: 'invoice.paid', customer })).toMatchObject({ status: 'active', periodStart: 2000 });
  });

  it('a customer\'s trigger changes its latest subscription still running, else its latest; --subscription names one', async () => {
    const customer = newCustomer();
    const older = await run({ event: 'customer.subscription.created', customer, price: 'price_old' });
    const newer = await run({ event: 'customer.subscription.created', customer, price: 'price_new' });
    expect(await run({ event: 'customer.subscription.deleted', customer })).toMatchObject({ id: newer.id, status: 'canceled', events: ['customer.subscription.deleted'] });
    expect((await run({ event: 'invoice.payment_failed', customer })).id).toBe(older.id);
    // None running (incomplete_expired counts as ended): the latest.
    fake.setSubscription({ id: older.id, customer, status: 'incomplete_expired', prices: ['price_old'] });
    expect((await run({ event: 'customer.subscription.updated', customer })).id).toBe(newer.id);
    expect(await run({ event: 'customer.subscription.updated', subscription: newer.id, status: 'active' })).toMatchObject({ id: newer.id, status: 'active' });
  });

  it('checkout.session.completed: the session named, or one of its own for the price and customer given', async () => {
    const customer = newCustomer();
    const own = await run({ event: 'checkout.session.completed', customer, price: 'price_pro' });
    expect(own).toMatchObject({ customer, status: 'active', prices: ['price_pro'] });
    expect([...own.events].sort()).toEqual(['checkout.session.completed', 'customer.subscription.created', 'invoice.paid']);
    const body = new URLSearchParams({ 'line_items[0][price]': 'price_team' });
    const res = await fetch(`${fake.url}/v1/checkout/sessions`, { method: 'POST', headers: { authorization: 'Bearer sk_test_t' }, body });
    const session = (await res.json()) as { id: string };
    expect(await run({ event: 'checkout.session.completed', session: session.id })).toMatchObject({ prices: ['price_team'] });
  });

  it('refuses what it cannot do, by name', async () => {
    const refusal = (args: TriggerArgs) => fake.trigger(args).then(() => 'done', (err: Error) => err.message);
    expect(await refusal({ event: 'charge.refunded' })).toBe('unknown event "charge.refunded"; known: checkout.session.completed, customer.subscription.created, '
      + 'customer.subscription.updated, customer.subscription.deleted, invoice.payment_failed, invoice.paid');
    expect(await refusal({ event: 'invoice.paid' })).toBe('invoice.paid needs --customer (or --subscription)');
    expect(await refusal({ event: 'invoice.paid', subscription: 'sub_none' })).toBe('no subscription sub_none');
    expect(await refusal({ event: 'customer.subscription.deleted', customer: 'cus_none' }))
      .toBe('customer cus_none has no subscription: pay a checkout, or trigger customer.subscription.created --customer cus_none --price P');
    expect(await refusal({ event: 'checkout.session.completed' })).toBe('checkout.session.completed needs --price (a price id of billing.stripe.prices, such as price_premium_monthly)');
    expect(await refusal({ event: 'customer.subscription.created', customer: 'cus_x', price: 'price_pro', status: 'gone' }))
      .toBe('--status gone: expected one of active, trialing, past_due, unpaid, canceled, incomplete, incomplete_expired, paused');
  });
});
