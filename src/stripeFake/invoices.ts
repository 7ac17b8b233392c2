// Customers and invoices, whole, as Stripe's API describes them (objects.ts says how they are
// checked): a customer is what POST /v1/customers makes and a paid checkout creates; an invoice
// is what `invoice.paid` and `invoice.payment_failed` carry for a subscription's period. The
// gateway reads neither (it reads the subscription back, CONTRACT §23); they are sent as a real
// account sends them, so that a receiver built against the double works against Stripe.
import type Stripe from 'stripe';
import { fakeId, now, PERIOD_S, subscriptionObject, type FakeSubscription } from './objects.js';

/** A customer as the fake holds it. */
export interface FakeCustomer {
  id: string;
  created: number;
  email: string | null;
  name: string | null;
  metadata: Record<string, string>;
}

/** GET /v1/customers/{id}, POST /v1/customers. */
export function customerObject(customer: FakeCustomer): Stripe.Customer {
  return {
    id: customer.id, object: 'customer', address: null, balance: 0, created: customer.created, currency: 'eur', default_source: null, delinquent: false,
    description: null, discount: null, email: customer.email, invoice_prefix: customer.id.slice(4, 12).toUpperCase(),
    invoice_settings: { custom_fields: null, default_payment_method: null, footer: null, rendering_options: null }, livemode: false,
    metadata: customer.metadata, name: customer.name, next_invoice_sequence: 1, phone: null, preferred_locales: [], shipping: null, tax_exempt: 'none', test_clock: null,
  } satisfies Stripe.Customer;
}

/**
 * The invoice of the subscription's current period: `paid` after a successful charge, `open` with
 * a next attempt after a failed one (Stripe's Smart Retries try again, then the subscription's
 * settings decide: past_due, then canceled).
 */
export function invoiceObject(sub: FakeSubscription, outcome: 'paid' | 'failed'): Stripe.Invoice {
  const created = now();
  const start = subscriptionObject(sub).items.data[0]?.current_period_start ?? created;
  const paid = outcome === 'paid';
  const id = fakeId('in');
  const amount = 900 * sub.prices.length;
  return {
    id, object: 'invoice', account_country: 'FR', account_name: 'Stripe double (gateway stripe-fake)', account_tax_ids: null,
    amount_due: amount, amount_overpaid: 0, amount_paid: paid ? amount : 0, amount_remaining: paid ? 0 : amount, amount_shipping: 0, application: null,
    attempt_count: 1, attempted: true, auto_advance: !paid, automatic_tax: { disabled_reason: null, enabled: false, liability: null, provider: null, status: null },
    automatically_finalizes_at: null, billing_reason: 'subscription_cycle', collection_method: 'charge_automatically', created, currency: 'eur', custom_fields: null,
    customer: sub.customer, customer_account: null, customer_address: null, customer_email: null, customer_name: null, customer_phone: null, customer_shipping: null,
    customer_tax_exempt: 'none', default_payment_method: null, default_source: null, default_tax_rates: [], description: null, discounts: [], due_date: null,
    effective_at: created, ending_balance: 0, footer: null, from_invoice: null, hosted_invoice_url: null, invoice_pdf: null, issuer: { type: 'self' },
    last_finalization_error: null, latest_revision: null, lines: { object: 'list', data: [], has_more: false, url: `/v1/invoices/${id}/lines` }, livemode: false, metadata: {},
    next_payment_attempt: paid ? null : created + 3 * 86_400, number: null, on_behalf_of: null,
    parent: { quote_details: null, subscription_details: { metadata: sub.metadata ?? {}, subscription: sub.id }, type: 'subscription_details' },
    payment_settings: { default_mandate: null, payment_method_options: null, payment_method_types: null }, period_end: start + PERIOD_S, period_start: start,
    post_payment_credit_notes_amount: 0, pre_payment_credit_notes_amount: 0, receipt_number: null, rendering: null, shipping_cost: null, shipping_details: null,
    starting_balance: 0, statement_descriptor: null, status: paid ? 'paid' : 'open',
    status_transitions: { finalized_at: created, marked_uncollectible_at: null, paid_at: paid ? created : null, voided_at: null },
    subtotal: amount, subtotal_excluding_tax: amount, test_clock: null, total: amount, total_discount_amounts: [], total_excluding_tax: amount,
    total_pretax_credit_amounts: [], total_taxes: [], webhooks_delivered_at: null,
  } satisfies Stripe.Invoice;
}
