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

export interface StripeFake {
  url: string;
  calls: StripeCall[];
  setSubscription(sub: FakeSubscription): void;
  /** The next `n` calls answer 500 (Stripe's api_error). */
  failNext(n: number): void;
  /** Each GET of a subscription waits this long first (to overlap two instances' handling). */
  delaySubscriptions(ms: number): void;
  close(): Promise<void>;
}

const id = (prefix: string) => `${prefix}_${randomBytes(8).toString('hex')}`;
const now = () => Math.floor(Date.now() / 1000);

function subscriptionObject(sub: FakeSubscription) {
  const periodEnd = now() + 30 * 86_400;
  return {
    id: sub.id, object: 'subscription', customer: sub.customer, status: sub.status, livemode: false, metadata: {},
    cancel_at_period_end: false, created: now() - 60, start_date: now() - 60,
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
  const subscriptions = new Map<string, FakeSubscription>();
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
      const sub = /^\/v1\/subscriptions\/([^/]+)$/.exec(path);
      if (req.method === 'GET' && sub) {
        if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
        const found = subscriptions.get(decodeURIComponent(sub[1]!));
        return found ? json(200, subscriptionObject(found)) : stripeError(res, 404, 'invalid_request_error', `No such subscription: '${sub[1]}'`);
      }
      return stripeError(res, 404, 'invalid_request_error', `Unrecognized request URL (${req.method}: ${path})`);
    })());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls,
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
