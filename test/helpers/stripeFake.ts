// A local fake of the few Stripe endpoints the gateway calls (CONTRACT §23): Checkout Sessions,
// Customer Portal sessions and subscriptions, with objects shaped as Stripe's API reference shows
// them (only the fields the gateway reads, and their neighbours). Tests set a subscription's
// current state, make the next calls fail or wait, and read what the gateway sent. Webhook events
// are signed with the `stripe` package's own test helper, as Stripe signs them.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Stripe from 'stripe';

export interface FakeSubscription {
  id: string;
  customer: string;
  status: 'active' | 'trialing' | 'past_due' | 'canceled' | 'unpaid' | 'incomplete' | 'incomplete_expired' | 'paused';
  prices: string[];
}

export interface StripeCall {
  method: string;
  path: string;
  /** The form body as Stripe's client encodes it (`line_items[0][price]`, `metadata[owner_id]`). */
  form: Record<string, string>;
  authorization: string | undefined;
}

/** A meter event as the fake holds it (Stripe's billing.meter_event object). */
export interface FakeMeterEvent {
  object: 'billing.meter_event';
  created: number;
  event_name: string;
  identifier: string;
  livemode: false;
  payload: Record<string, string>;
  timestamp: number;
}

export interface StripeFake {
  url: string;
  calls: StripeCall[];
  /** Meter events accepted, one per identifier (a repeated identifier is refused, as Stripe does). */
  meterEvents: FakeMeterEvent[];
  /** The sum of the accepted events' values for a customer (or all). */
  meterSum(customer?: string): number;
  /**
   * While `fail`, POST /v1/billing/meter_events answers 500. */
  meterMode(mode: 'ok' | 'fail'): void;
  /**
   * The next `n` meter event requests are taken (a new identifier recorded) and their connection
   * cut without an answer: Stripe has the event, the gateway never hears. Two cover one attempt,
   * since the stripe library resends once on a closed connection.
   */
  meterDrops(n: number): void;
  /** Stops listening (connections refused: Stripe unreachable) until `up()` listens again on the same port. */
  down(): Promise<void>;
  up(): Promise<void>;
  /** Subscriptions updated with cancel_at_period_end (POST /v1/subscriptions/{id}). */
  cancelAtPeriodEnd(id: string): boolean;
  setSubscription(sub: FakeSubscription): void;
  /** The next `n` calls answer 500 (Stripe's api_error). */
  failNext(n: number): void;
  /** Each GET of a subscription waits this long first (to overlap two instances' handling). */
  delaySubscriptions(ms: number): void;
  close(): Promise<void>;
}

const id = (prefix: string) => `${prefix}_${randomBytes(8).toString('hex')}`;
const now = () => Math.floor(Date.now() / 1000);

function subscriptionObject(sub: FakeSubscription & { cancelAtPeriodEnd?: boolean }) {
  const periodEnd = now() + 30 * 86_400;
  return {
    id: sub.id, object: 'subscription', customer: sub.customer, status: sub.status, livemode: false, metadata: {},
    cancel_at_period_end: sub.cancelAtPeriodEnd === true, created: now() - 60, start_date: now() - 60,
    items: {
      object: 'list', has_more: false, url: `/v1/subscription_items?subscription=${sub.id}`,
      data: sub.prices.map((price) => ({
        id: id('si'), object: 'subscription_item', subscription: sub.id, quantity: 1, current_period_start: now() - 60, current_period_end: periodEnd,
        price: { id: price, object: 'price', active: true, currency: 'eur', recurring: { interval: 'month', interval_count: 1 }, type: 'recurring' },
      })),
    },
  };
}

function stripeError(res: http.ServerResponse, status: number, type: string, message: string) {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { type, message } }));
}

export async function startStripeFake(): Promise<StripeFake> {
  const subscriptions = new Map<string, FakeSubscription & { cancelAtPeriodEnd?: boolean }>();
  const meterEvents: FakeMeterEvent[] = [];
  let meterMode: 'ok' | 'fail' = 'ok';
  let drops = 0;
  const calls: StripeCall[] = [];
  let failures = 0;
  let delayMs = 0;
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => { body += chunk.toString(); });
    req.on('end', () => void (async () => {
      const path = new URL(req.url ?? '/', 'http://fake').pathname;
      calls.push({ method: req.method ?? '', path, form: Object.fromEntries(new URLSearchParams(body)), authorization: req.headers.authorization });
      if (failures > 0) {
        failures--;
        return stripeError(res, 500, 'api_error', 'the fake was told to fail');
      }
      const json = (status: number, value: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
      const form = calls.at(-1)!.form;
      if (req.method === 'POST' && path === '/v1/checkout/sessions') {
        const session = id('cs_test');
        return json(200, {
          id: session, object: 'checkout.session', mode: form.mode, livemode: false, status: 'open', customer: form.customer ?? null,
          client_reference_id: form.client_reference_id ?? null, success_url: form.success_url, cancel_url: form.cancel_url,
          url: `https://checkout.stripe.com/c/pay/${session}`, subscription: null,
        });
      }
      if (req.method === 'POST' && path === '/v1/billing_portal/sessions') {
        const session = id('bps');
        return json(200, {
          id: session, object: 'billing_portal.session', customer: form.customer, return_url: form.return_url, livemode: false,
          url: `https://billing.stripe.com/p/session/${session}`,
        });
      }
      if (req.method === 'POST' && path === '/v1/billing/meter_events') {
        if (meterMode === 'fail') return stripeError(res, 500, 'api_error', 'the fake was told to fail');
        const identifier = form.identifier ?? id('mev');
        // Stripe enforces an identifier's uniqueness (over at least 24 hours): a repeat is refused.
        const drop = drops > 0;
        if (drop) drops--;
        if (meterEvents.some((e) => e.identifier === identifier)) {
          if (drop) return req.socket.destroy();
          return res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({
            error: { type: 'invalid_request_error', code: 'resource_already_exists', message: `An event with identifier '${identifier}' already exists.` },
          }));
        }
        const payload = Object.fromEntries(Object.entries(form).filter(([k]) => k.startsWith('payload[')).map(([k, v]) => [k.slice(8, -1), v]));
        const event: FakeMeterEvent = {
          object: 'billing.meter_event', created: now(), event_name: form.event_name ?? '', identifier, livemode: false, payload, timestamp: Number(form.timestamp ?? now()),
        };
        meterEvents.push(event);
        if (drop) return req.socket.destroy();
        return json(200, event);
      }
      const sub = /^\/v1\/subscriptions\/([^/]+)$/.exec(path);
      if (req.method === 'POST' && sub) {
        const found = subscriptions.get(decodeURIComponent(sub[1]!));
        if (!found) return stripeError(res, 404, 'invalid_request_error', `No such subscription: '${sub[1]}'`);
        if (form.cancel_at_period_end !== undefined) found.cancelAtPeriodEnd = form.cancel_at_period_end === 'true';
        return json(200, subscriptionObject(found));
      }
      if (req.method === 'GET' && sub) {
        if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
        const found = subscriptions.get(decodeURIComponent(sub[1]!));
        return found ? json(200, subscriptionObject(found)) : stripeError(res, 404, 'invalid_request_error', `No such subscription: '${sub[1]}'`);
      }
      return stripeError(res, 404, 'invalid_request_error', `Unrecognized request URL (${req.method}: ${path})`);
    })());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    down: () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
    up: () => new Promise((resolve) => { server.listen(port, '127.0.0.1', () => resolve()); }),
    url: `http://127.0.0.1:${port}`,
    calls,
    meterEvents,
    meterSum: (customer) => meterEvents.filter((e) => !customer || e.payload.stripe_customer_id === customer).reduce((sum, e) => sum + Number(e.payload.value), 0),
    meterMode: (mode) => { meterMode = mode; },
    meterDrops: (n) => { drops = n; },
    cancelAtPeriodEnd: (subId) => subscriptions.get(subId)?.cancelAtPeriodEnd === true,
    setSubscription: (sub) => { subscriptions.set(sub.id, { ...sub }); },
    failNext: (n) => { failures = n; },
    delaySubscriptions: (ms) => { delayMs = ms; },
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

/** A Stripe event as Stripe sends it: the JSON body and its Stripe-Signature header made with `secret`. */
export function signedEvent(
  secret: string, type: string, object: Record<string, unknown>, options: { id?: string; livemode?: boolean; timestamp?: number } = {},
): { id: string; body: string; signature: string } {
  const eventId = options.id ?? id('evt');
  const body = JSON.stringify({
    id: eventId, object: 'event', api_version: '2025-10-29', created: now(), type, livemode: options.livemode ?? false, data: { object }, pending_webhooks: 1,
  });
  const signature = Stripe.webhooks.generateTestHeaderString({ payload: body, secret, timestamp: options.timestamp });
  return { id: eventId, body, signature };
}
