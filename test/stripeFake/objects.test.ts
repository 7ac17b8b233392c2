// The values the double's objects carry where a receiver reads them (src/stripeFake/objects.ts,
// invoices.ts), as pure functions: a subscription's period and its end, a session before and after
// payment, an invoice paid or failed, a customer, a portal session, a meter event and the event
// around each. Their shapes against the `stripe` package's types: shapes.test.ts.
import { describe, expect, it } from 'vitest';
import { STRIPE_API_VERSION } from '../../src/config/schema/billing.js';
import { customerObject, invoiceObject } from '../../src/stripeFake/invoices.js';
import {
  checkoutSessionObject, eventBase, meterEventObject, metadataOf, PERIOD_S, portalSessionObject, subscriptionObject, wholeEvent, type FakeSubscription,
} from '../../src/stripeFake/objects.js';

const SUB: FakeSubscription = { id: 'sub_1', customer: 'cus_1', status: 'active', prices: ['price_pro', 'price_seats'], metadata: { owner_id: '4' }, periodStart: 1_700_000_000 };
const nowS = () => Math.floor(Date.now() / 1000);

describe('the double\'s subscription', () => {
  it('one item per price, its period from periodStart, running and not cancelled', () => {
    const sub = subscriptionObject(SUB);
    expect(sub).toMatchObject({
      id: 'sub_1', object: 'subscription', customer: 'cus_1', status: 'active', metadata: { owner_id: '4' }, created: 1_700_000_000, start_date: 1_700_000_000,
      billing_cycle_anchor: 1_700_000_000, cancel_at: null, cancel_at_period_end: false, canceled_at: null, ended_at: null, cancellation_details: { reason: null },
      livemode: false, currency: 'eur', items: { object: 'list', has_more: false, url: '/v1/subscription_items?subscription=sub_1' },
    });
    expect(sub.items.data.map((i) => [i.price.id, i.plan.id, i.current_period_start, i.current_period_end, i.subscription, i.quantity, i.price.unit_amount])).toEqual([
      ['price_pro', 'price_pro', 1_700_000_000, 1_700_000_000 + PERIOD_S, 'sub_1', 1, 900], ['price_seats', 'price_seats', 1_700_000_000, 1_700_000_000 + PERIOD_S, 'sub_1', 1, 900],
    ]);
    expect(PERIOD_S).toBe(30 * 86_400);
    // A test-mode account's one recurring price, as its price, its plan and its item show it; nothing discounted or taxed.
    const [first] = sub.items.data;
    expect(first!.id).toMatch(/^si_[0-9a-f]{16}$/);
    expect(first).toMatchObject({ discounts: [], tax_rates: [], quantity: 1 });
    expect(first!.price).toMatchObject({ active: true, currency: 'eur', product: 'prod_price_pro', type: 'recurring', livemode: false });
    expect(first!.plan).toMatchObject({ active: true, currency: 'eur', product: 'prod_price_pro', amount: 900, interval: 'month', livemode: false });
    expect(sub).toMatchObject({ discounts: [], automatic_tax: { enabled: false } });
  });

  it('cancelled at the period\'s end when asked; ended (cancelled or expired) with the time it ended; no period start: a minute ago', () => {
    expect(subscriptionObject({ ...SUB, cancelAtPeriodEnd: true })).toMatchObject({ cancel_at: 1_700_000_000 + PERIOD_S, cancel_at_period_end: true, canceled_at: null });
    for (const status of ['canceled', 'incomplete_expired'] as const) {
      const ended = subscriptionObject({ ...SUB, status });
      expect(ended.canceled_at, status).toBeGreaterThanOrEqual(nowS() - 60);
      expect(ended.ended_at, status).toBeGreaterThanOrEqual(nowS() - 60);
      expect(ended.cancellation_details, status).toEqual({ comment: null, feedback: null, feedback_option: null, reason: 'cancellation_requested' });
    }
    expect(subscriptionObject({ ...SUB, status: 'past_due' })).toMatchObject({ canceled_at: null, ended_at: null });
    const { metadata: _m, periodStart: _p, ...bare } = SUB;
    const fresh = subscriptionObject(bare);
    expect(nowS() - fresh.created).toBeGreaterThanOrEqual(59);
    expect(nowS() - fresh.created).toBeLessThanOrEqual(120);
    expect(fresh.metadata).toEqual({});
  });
});

describe('the double\'s checkout session', () => {
  const form = { 'line_items[0][price]': 'price_pro', success_url: 'https://app.example/ok', cancel_url: 'https://app.example/back', client_reference_id: '7', 'metadata[owner_id]': '7' };
  it('open with its URL before payment, complete without one after; a new customer unless the form named one', () => {
    const open = checkoutSessionObject({ id: 'cs_test_1', form, subscription: null, customer: null, url: 'http://fake/c/pay/cs_test_1' });
    expect(open).toMatchObject({
      id: 'cs_test_1', object: 'checkout.session', status: 'open', payment_status: 'unpaid', url: 'http://fake/c/pay/cs_test_1', subscription: null, customer: null,
      customer_creation: 'always', success_url: 'https://app.example/ok', cancel_url: 'https://app.example/back', client_reference_id: '7', metadata: { owner_id: '7' },
      mode: 'subscription', amount_total: 900, currency: 'eur', livemode: false, payment_method_types: ['card'], automatic_tax: { enabled: false },
    });
    expect(open.expires_at - open.created).toBe(86_400);
    const paid = checkoutSessionObject({ id: 'cs_test_1', form: { ...form, customer: 'cus_9' }, subscription: 'sub_9', customer: 'cus_9', url: 'http://fake/c/pay/cs_test_1' });
    expect(paid).toMatchObject({ status: 'complete', payment_status: 'paid', url: null, subscription: 'sub_9', customer: 'cus_9', customer_creation: null });
    expect(checkoutSessionObject({ id: 'cs_test_2', form: { customer: 'cus_8' }, subscription: null, customer: null, url: 'u' }))
      .toMatchObject({ customer: 'cus_8', success_url: null, cancel_url: null, client_reference_id: null, metadata: {} });
  });
});

describe('the double\'s invoice', () => {
  it('paid: the period\'s amount paid; failed: open, due, with a next attempt in three days', () => {
    const paid = invoiceObject(SUB, 'paid');
    expect(paid).toMatchObject({
      object: 'invoice', customer: 'cus_1', status: 'paid', amount_due: 1800, amount_paid: 1800, amount_remaining: 0, total: 1800, subtotal: 1800,
      auto_advance: false, next_payment_attempt: null, attempted: true, period_start: 1_700_000_000, period_end: 1_700_000_000 + PERIOD_S, livemode: false,
      parent: { type: 'subscription_details', subscription_details: { subscription: 'sub_1', metadata: { owner_id: '4' } } },
      lines: { object: 'list', data: [], has_more: false, url: `/v1/invoices/${paid.id}/lines` },
      account_country: 'FR', account_name: 'Stripe double (gateway stripe-fake)', currency: 'eur', default_tax_rates: [], discounts: [],
      automatic_tax: { disabled_reason: null, enabled: false, liability: null, provider: null, status: null },
    });
    expect(paid.id).toMatch(/^in_[0-9a-f]{16}$/);
    expect(paid.status_transitions).toMatchObject({ paid_at: paid.created, finalized_at: paid.created });
    const failed = invoiceObject({ ...SUB, prices: ['price_pro'], metadata: undefined }, 'failed');
    expect(failed).toMatchObject({
      status: 'open', amount_due: 900, amount_paid: 0, amount_remaining: 900, auto_advance: true, next_payment_attempt: failed.created + 3 * 86_400,
      status_transitions: { paid_at: null }, parent: { subscription_details: { metadata: {} } },
    });
    // A subscription without a price (the type allows it, no path of the double makes one): nothing due, its period from now.
    const none = invoiceObject({ ...SUB, prices: [] }, 'paid');
    expect(none).toMatchObject({ amount_due: 0, total: 0, period_start: none.created, period_end: none.created + PERIOD_S });
  });
});

describe('the double\'s other objects', () => {
  it('a customer, with its invoice prefix from its id', () => {
    expect(customerObject({ id: 'cus_abcdef12345', created: 5, email: 'a@example.com', name: null, metadata: { k: 'v' } })).toMatchObject({
      id: 'cus_abcdef12345', object: 'customer', created: 5, email: 'a@example.com', name: null, metadata: { k: 'v' }, invoice_prefix: 'ABCDEF12', livemode: false, delinquent: false,
      currency: 'eur', preferred_locales: [],
    });
  });

  it('a portal session with its customer and return URL; a meter event with its payload and timestamp (now when none)', () => {
    expect(portalSessionObject('bps_1', { customer: 'cus_1', return_url: 'https://app.example/billing' }, 'https://billing.stripe.com/p/session/bps_1'))
      .toMatchObject({ id: 'bps_1', object: 'billing_portal.session', configuration: 'bpc_fake', livemode: false, customer: 'cus_1', return_url: 'https://app.example/billing', url: 'https://billing.stripe.com/p/session/bps_1' });
    expect(portalSessionObject('bps_2', {}, 'u')).toMatchObject({ customer: '', return_url: null });
    expect(meterEventObject({ event_name: 'api_requests', 'payload[value]': '3', 'payload[stripe_customer_id]': 'cus_1', timestamp: '1700000000' }, 'id1'))
      .toMatchObject({ object: 'billing.meter_event', event_name: 'api_requests', identifier: 'id1', payload: { value: '3', stripe_customer_id: 'cus_1' }, timestamp: 1_700_000_000 });
    const unnamed = meterEventObject({}, 'id2');
    expect(unnamed).toMatchObject({ event_name: '', payload: {} });
    expect(Math.abs(unnamed.timestamp - nowS())).toBeLessThanOrEqual(60);
  });

  it('metadata: the form\'s bracketed fields under a prefix, and nothing else', () => {
    expect(metadataOf({ 'metadata[a]': '1', 'metadata[b]': '2', metadata: 'x', 'metadata[c': '3', 'other[a]': '4' })).toEqual({ a: '1', b: '2' });
    expect(metadataOf({ 'payload[v]': '1', 'metadata[a]': '2' }, 'payload')).toEqual({ v: '1' });
  });

  it('an event around its object: test mode, this API version, its type and object', () => {
    expect(eventBase('evt_1')).toMatchObject({ id: 'evt_1', object: 'event', api_version: STRIPE_API_VERSION, livemode: false, pending_webhooks: 1, request: { id: null, idempotency_key: null } });
    const invoice = invoiceObject(SUB, 'paid');
    for (const type of ['invoice.paid', 'invoice.payment_failed'] as const) {
      expect(wholeEvent('evt_2', { type, object: invoice }), type).toMatchObject({ id: 'evt_2', type, data: { object: { id: invoice.id } } });
    }
    const session = checkoutSessionObject({ id: 'cs_test_3', form: {}, subscription: null, customer: null, url: 'u' });
    expect(wholeEvent('evt_3', { type: 'checkout.session.completed', object: session })).toMatchObject({ type: 'checkout.session.completed', data: { object: { id: 'cs_test_3' } } });
    expect(wholeEvent('evt_4', { type: 'customer.subscription.deleted', object: subscriptionObject(SUB) })).toMatchObject({ type: 'customer.subscription.deleted', data: { object: { id: 'sub_1' } } });
  });
});
