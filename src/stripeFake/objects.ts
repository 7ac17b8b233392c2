// The objects the Stripe double (fake.ts) answers and sends, whole, as Stripe's API describes them
// at STRIPE_API_VERSION (pinned once, in config/schema/billing.ts): each is checked at compile time
// against the `stripe` package's types (`satisfies Stripe.Subscription` …: every field Stripe always
// sends, with its type, and none it never sends), and test/stripeFake/shapes.test.ts walks what the
// fake sends at run time against the same types, field by field. Stripe generates those types from
// its published OpenAPI description (node_modules/stripe/OPENAPI_VERSION). Values are what a
// test-mode account with one recurring price shows; what the gateway reads (ids, customer, status,
// items' prices and periods, urls) comes from the fake's state. `livemode` is false everywhere: the
// double never passes for a live account.
import { randomBytes } from 'node:crypto';
import type Stripe from 'stripe';
import { STRIPE_API_VERSION } from '../config/schema/billing.js';

export type SubscriptionStatus = Stripe.Subscription.Status;

/** A subscription as the fake holds it: what a test or the demo sets. */
export interface FakeSubscription {
  id: string;
  customer: string;
  status: SubscriptionStatus;
  prices: string[];
  metadata?: Record<string, string>;
  cancelAtPeriodEnd?: boolean;
  /** When its current period started (seconds); a minute before it is read, when absent. */
  periodStart?: number;
}

/** A Checkout Session as the fake holds it, from the form the gateway posted. */
export interface FakeCheckout {
  id: string;
  form: Record<string, string>;
  /** Set once paid: the subscription it made, and its customer. */
  subscription: string | null;
  customer: string | null;
  url: string;
}

export const fakeId = (prefix: string) => `${prefix}_${randomBytes(8).toString('hex')}`;
/** Now, in Stripe's unit (seconds since the epoch). */
export const now = () => Math.floor(Date.now() / 1000);
/** The fake's billing period: 30 days. */
export const PERIOD_S = 30 * 86_400;

/** The form's `metadata[key]` fields, as Stripe stores them. */
export function metadataOf(form: Record<string, string>, prefix = 'metadata'): Record<string, string> {
  const open = `${prefix}[`;
  return Object.fromEntries(Object.entries(form).filter(([k]) => k.startsWith(open) && k.endsWith(']')).map(([k, v]) => [k.slice(open.length, -1), v]));
}

function price(id: string, created: number): Stripe.Price {
  return {
    id, object: 'price', active: true, billing_scheme: 'per_unit', created, currency: 'eur', custom_unit_amount: null, livemode: false, lookup_key: null,
    metadata: {}, nickname: null, product: `prod_${id}`, recurring: { interval: 'month', interval_count: 1, meter: null, trial_period_days: null, usage_type: 'licensed' },
    tax_behavior: 'unspecified', tiers_mode: null, transform_quantity: null, type: 'recurring', unit_amount: 900, unit_amount_decimal: null,
  } satisfies Stripe.Price;
}

function plan(id: string, created: number): Stripe.Plan {
  return {
    id, object: 'plan', active: true, amount: 900, amount_decimal: null, billing_scheme: 'per_unit', created, currency: 'eur', interval: 'month', interval_count: 1,
    livemode: false, metadata: {}, meter: null, nickname: null, product: `prod_${id}`, tiers_mode: null, transform_usage: null, trial_period_days: null, usage_type: 'licensed',
  } satisfies Stripe.Plan;
}

function item(sub: FakeSubscription, priceId: string, created: number): Stripe.SubscriptionItem {
  return {
    id: fakeId('si'), object: 'subscription_item', billing_thresholds: null, created, current_period_end: created + PERIOD_S, current_period_start: created,
    current_trial: null, discounts: [], metadata: {}, plan: plan(priceId, created), price: price(priceId, created), quantity: 1, subscription: sub.id, tax_rates: [],
  } satisfies Stripe.SubscriptionItem;
}

/** GET /v1/subscriptions/{id}: the subscription now, one item per price (its period started at periodStart, or a minute ago). */
export function subscriptionObject(sub: FakeSubscription): Stripe.Subscription {
  const created = sub.periodStart ?? now() - 60;
  const ended = sub.status === 'canceled' || sub.status === 'incomplete_expired';
  return {
    id: sub.id, object: 'subscription', application: null, application_fee_percent: null, automatic_tax: { disabled_reason: null, enabled: false, liability: null },
    billing_cycle_anchor: created, billing_cycle_anchor_config: null, billing_mode: { flexible: null, type: 'classic' }, billing_schedules: [], billing_thresholds: null,
    cancel_at: sub.cancelAtPeriodEnd ? created + PERIOD_S : null, cancel_at_period_end: sub.cancelAtPeriodEnd === true, canceled_at: ended ? now() : null,
    cancellation_details: { comment: null, feedback: null, feedback_option: null, reason: ended ? 'cancellation_requested' : null },
    collection_method: 'charge_automatically', created, currency: 'eur', customer: sub.customer, customer_account: null, days_until_due: null,
    default_payment_method: null, default_source: null, description: null, discounts: [], ended_at: ended ? now() : null,
    invoice_settings: { account_tax_ids: null, custom_fields: null, description: null, footer: null, issuer: { type: 'self' } },
    items: { object: 'list', data: sub.prices.map((p) => item(sub, p, created)), has_more: false, url: `/v1/subscription_items?subscription=${sub.id}` },
    latest_invoice: null, livemode: false, managed_payments: null, metadata: sub.metadata ?? {}, next_pending_invoice_item_invoice: null, on_behalf_of: null,
    pause_collection: null, payment_settings: { payment_method_options: null, payment_method_types: null, save_default_payment_method: 'off' },
    pending_invoice_item_interval: null, pending_setup_intent: null, pending_update: null, schedule: null, start_date: created, status: sub.status, test_clock: null,
    transfer_data: null, trial_end: null, trial_settings: { end_behavior: { billing_cycle_anchor: null, missing_payment_method: 'create_invoice' } }, trial_start: null,
  } satisfies Stripe.Subscription;
}

/** POST /v1/checkout/sessions, and the session a checkout.session.completed event carries once paid. */
export function checkoutSessionObject(session: FakeCheckout): Stripe.Checkout.Session {
  const { form } = session;
  const paid = session.subscription !== null;
  const created = now();
  return {
    id: session.id, object: 'checkout.session', adaptive_pricing: null, after_expiration: null, allow_promotion_codes: null, allowed_payment_method_types: null,
    amount_subtotal: 900, amount_total: 900, automatic_tax: { enabled: false, liability: null, provider: null, status: null }, billing_address_collection: null,
    cancel_url: form.cancel_url ?? null, client_reference_id: form.client_reference_id ?? null, client_secret: null, collected_information: null, consent: null,
    consent_collection: null, created, currency: 'eur', currency_conversion: null, custom_fields: [],
    custom_text: { after_submit: null, shipping_address: null, submit: null, terms_of_service_acceptance: null },
    customer: session.customer ?? form.customer ?? null, customer_account: null, customer_creation: form.customer ? null : 'always', customer_details: null,
    customer_email: null, discounts: [], expires_at: created + 86_400, integration_identifier: null, invoice: null, invoice_creation: null, livemode: false,
    locale: null, managed_payments: null, metadata: metadataOf(form), mode: 'subscription', origin_context: null, payment_intent: null, payment_link: null,
    payment_method_collection: 'always', payment_method_configuration_details: null, payment_method_options: null, payment_method_types: ['card'],
    payment_status: paid ? 'paid' : 'unpaid', permissions: null, recovered_from: null, saved_payment_method_options: null, setup_intent: null,
    shipping_address_collection: null, shipping_cost: null, shipping_options: [], status: paid ? 'complete' : 'open', submit_type: null,
    subscription: session.subscription, success_url: form.success_url ?? null, total_details: { amount_discount: 0, amount_shipping: 0, amount_tax: 0 },
    ui_mode: 'hosted_page', url: paid ? null : session.url, wallet_options: null,
  } satisfies Stripe.Checkout.Session;
}

/** POST /v1/billing_portal/sessions. */
export function portalSessionObject(id: string, form: Record<string, string>, url: string): Stripe.BillingPortal.Session {
  return {
    id, object: 'billing_portal.session', configuration: 'bpc_fake', created: now(), customer: form.customer ?? '', customer_account: null, flow: null,
    livemode: false, locale: null, on_behalf_of: null, return_url: form.return_url ?? null, url,
  } satisfies Stripe.BillingPortal.Session;
}

/** POST /v1/billing/meter_events, from the form the gateway posted (`payload[key]` fields). */
export function meterEventObject(form: Record<string, string>, identifier: string): Stripe.Billing.MeterEvent {
  return {
    object: 'billing.meter_event', created: now(), event_name: form.event_name ?? '', identifier, livemode: false, payload: metadataOf(form, 'payload'),
    timestamp: Number(form.timestamp ?? now()),
  } satisfies Stripe.Billing.MeterEvent;
}

/** The events the gateway is sent, whole: the object is the one the fake would answer for it. */
export type FakeEvent =
  | { type: 'checkout.session.completed'; object: Stripe.Checkout.Session }
  | { type: 'customer.subscription.created' | 'customer.subscription.updated' | 'customer.subscription.deleted'; object: Stripe.Subscription }
  | { type: 'invoice.paid' | 'invoice.payment_failed'; object: Stripe.Invoice };

/** What every event carries around its object, as Stripe sends it to a webhook endpoint (test mode). */
export function eventBase(id: string): Omit<Stripe.EventBase, 'data' | 'type'> {
  return {
    id, object: 'event', api_version: STRIPE_API_VERSION, created: now(), livemode: false, pending_webhooks: 1, request: { id: null, idempotency_key: null },
  } satisfies Omit<Stripe.EventBase, 'data' | 'type'>;
}

/** A whole event, as Stripe would send it: its type and object checked together. */
export function wholeEvent(id: string, event: FakeEvent): Stripe.Event {
  const base = eventBase(id);
  switch (event.type) {
    case 'checkout.session.completed': return { ...base, type: event.type, data: { object: event.object } } satisfies Stripe.CheckoutSessionCompletedEvent;
    case 'invoice.paid': return { ...base, type: event.type, data: { object: event.object } } satisfies Stripe.InvoicePaidEvent;
    case 'invoice.payment_failed': return { ...base, type: event.type, data: { object: event.object } } satisfies Stripe.InvoicePaymentFailedEvent;
    default: return { ...base, type: event.type, data: { object: event.object } } satisfies Stripe.Event;
  }
}
