// The few calls the gateway makes to Stripe, through the official `stripe` package (which also
// verifies webhook signatures): checkout and portal sessions, and a subscription's current state.
// apiBase lets tests and the demo point it at a local fake. No automatic retry: a failure is
// answered (503 to a client, 500 to Stripe's webhook, which Stripe retries), not hidden.
import Stripe from 'stripe';
import { STRIPE_API_VERSION, type BillingConfig } from '../config/schema/billing.js';
import type { Owner, SubscriptionState } from '../storage/usage/index.js';

// Under the storage's 5 s statement bound: an event's transaction waits on Stripe while holding its
// claim, and the same event on another instance waits on that claim; it must not give up first.
const TIMEOUT_MS = 4_000;
/** Stripe's tolerance for a signature's timestamp, past and future (the library's default, said out loud: CONTRACT §23, §33). */
export const SIGNATURE_TOLERANCE_S = 300;

/**
 * The `t=` of a Stripe-Signature header as the library reads it (the last one, parseInt); NaN
 * without a readable one, which the library refuses by itself.
 */
function signatureTimestamp(header: string): number {
  let timestamp = NaN;
  for (const item of header.split(',')) if (item.startsWith('t=')) timestamp = parseInt(item.slice(2), 10);
  return timestamp;
}

/** A meter event as Stripe's API takes it (POST /v1/billing/meter_events). */
export interface MeterEventParams {
  event_name: string;
  identifier: string;
  timestamp: number;
  payload: { stripe_customer_id: string; value: string };
}

/** How an attempt to report a meter event ended, in the outbox's words (webhooks/sender.ts AttemptResult). */
export interface MeterAttempt {
  outcome: 'success' | 'server_error' | 'network_error' | 'rejected';
  error?: string;
}

/** A call to Stripe that failed (network, timeout, an error answer): the caller answers it, never as a 2xx. */
export class StripeUnavailable extends Error {
  constructor(cause: unknown) {
    super(`Stripe call failed: ${(cause as Error)?.message ?? String(cause)}`, { cause });
    this.name = 'StripeUnavailable';
  }
}

/** A webhook event, as much of it as the gateway reads (verified before it is parsed). */
export interface StripeEvent {
  id: string;
  type: string;
  livemode: boolean;
  object: { id?: unknown; customer?: unknown; subscription?: unknown };
}

/** The owner as Stripe sees it: `user:42` in client_reference_id and metadata. */
export const ownerReference = (owner: Owner) => `${owner.type}:${owner.id}`;

export const idOf = (value: unknown): string | null => {
  if (typeof value === 'string') return value;
  const id = (value as { id?: unknown } | null)?.id;
  return typeof id === 'string' ? id : null;
};

export class StripeGateway {
  private readonly client: Stripe;
  /** sk_live_/rk_live_: only live events count; test keys, only test events. */
  readonly livemode: boolean;

  constructor(private readonly config: BillingConfig['stripe']) {
    const base = new URL(config.apiBase);
    const protocol = base.protocol === 'http:' ? 'http' : 'https';
    this.client = new Stripe(config.secretKey, {
      host: base.hostname, port: base.port || (protocol === 'http' ? 80 : 443), protocol,
      apiVersion: STRIPE_API_VERSION, maxNetworkRetries: 0, timeout: TIMEOUT_MS, telemetry: false,
    });
    this.livemode = /^(?:sk|rk)_live_/.test(config.secretKey);
  }

  /**
   * The event if the signature holds for one of the secrets (a rolling of the endpoint's secret
   * signs with both), within the tolerance; undefined otherwise.
   */
  verify(raw: Buffer, signature: string | undefined, now = Date.now()): StripeEvent | undefined {
    if (!signature) return undefined;
    // The library refuses a timestamp older than the tolerance, not one ahead of it: an event signed
    // an hour in the future was accepted (issue 68). The timestamp it checks is the header's last
    // `t=` (its parseHeader), the one the signature covers; NaN compares false and is the library's to refuse.
    if (signatureTimestamp(signature) - Math.floor(now / 1000) > SIGNATURE_TOLERANCE_S) return undefined;
    for (const secret of this.config.webhookSecrets) {
      try {
        const event = this.client.webhooks.constructEvent(raw, signature, secret, SIGNATURE_TOLERANCE_S, undefined, now);
        return { id: event.id, type: event.type, livemode: event.livemode, object: event.data.object as StripeEvent['object'] };
      } catch {
        // the next secret
      }
    }
    return undefined;
  }

  /** `back`: where Stripe sends the customer after paying or going back (the portal's billing page); else successUrl and cancelUrl. */
  async checkoutSession(owner: Owner, price: string, customer: string | undefined, back?: string): Promise<{ id: string; url: string }> {
    const reference = ownerReference(owner);
    const metadata = { owner_type: owner.type, owner_id: String(owner.id) };
    const session = await this.call(() => this.client.checkout.sessions.create({
      mode: 'subscription',
      line_items: [{ price, quantity: 1 }],
      client_reference_id: reference,
      metadata,
      subscription_data: { metadata },
      ...(customer ? { customer } : {}),
      success_url: back ?? this.config.successUrl,
      cancel_url: back ?? this.config.cancelUrl,
    }));
    if (!session.url) throw new StripeUnavailable(new Error('checkout session without url'));
    return { id: session.id, url: session.url };
  }

  /** `back`: where the Customer Portal's return link goes (the portal's billing page); else cancelUrl. */
  async portalSession(customer: string, back?: string): Promise<string> {
    const session = await this.call(() => this.client.billingPortal.sessions.create({ customer, return_url: back ?? this.config.cancelUrl }));
    return session.url;
  }

  /** The subscription as Stripe holds it now. */
  async subscription(id: string): Promise<SubscriptionState> {
    const sub = await this.call(() => this.client.subscriptions.retrieve(id));
    const prices = sub.items.data.map((item) => item.price.id);
    const listed = prices.filter((p) => Object.hasOwn(this.config.prices, p));
    const ends = sub.items.data.map((item) => item.current_period_end).filter((t): t is number => typeof t === 'number');
    return {
      id: sub.id, customer: idOf(sub.customer) ?? '', status: sub.status, prices,
      price: listed[0] ?? prices[0] ?? null,
      currentPeriodEnd: ends.length ? new Date(Math.max(...ends) * 1000) : null,
      cancelAtPeriodEnd: sub.cancel_at_period_end === true,
    };
  }

  /** Sets the subscription to end at its period's end (an account deleted: CONTRACT §23). */
  async cancelAtPeriodEnd(id: string): Promise<void> {
    await this.call(() => this.client.subscriptions.update(id, { cancel_at_period_end: true }));
  }

  /**
   * Reports a meter event, as an outbox attempt: delivered, retried (Stripe unreachable or failing,
   * 429) or rejected. An identifier Stripe already holds is delivered: the event was sent before
   * (an attempt whose answer was lost), and Stripe keeps the first.
   */
  async meterEvent(params: MeterEventParams): Promise<MeterAttempt> {
    try {
      await this.client.billing.meterEvents.create(params);
      return { outcome: 'success' };
    } catch (err) {
      const e = err as { statusCode?: number; code?: string; message?: string };
      const error = `Stripe: ${e.message ?? String(err)}`.slice(0, 500);
      if (e.statusCode === undefined) return { outcome: 'network_error', error };
      if (e.statusCode >= 500 || e.statusCode === 429) return { outcome: 'server_error', error };
      if (e.code === 'resource_already_exists' || /already exists/i.test(e.message ?? '')) return { outcome: 'success' };
      return { outcome: 'rejected', error };
    }
  }

  private async call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw new StripeUnavailable(err);
    }
  }
}


