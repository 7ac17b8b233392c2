// A local fake of the few Stripe endpoints the gateway calls (CONTRACT §23): Checkout Sessions,
// Customer Portal sessions, subscriptions and meter events, answering whole objects shaped as
// Stripe's API describes them (stripeObjects.ts, checked against the `stripe` package's types).
// The tests share it (test/helpers/stripeFake.ts) and `npm run demo` runs it: opening a session's
// URL pays it, as a customer would on Stripe's page, and the fake then sends the gateway Stripe's
// signed `checkout.session.completed`. Tests set a subscription's current state, make the next calls
// fail or wait, and read what the gateway sent. Events are signed with the `stripe` package's own
// test helper, as Stripe signs them.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Stripe from 'stripe';
import {
  checkoutSessionObject, eventEnvelope, fakeId, meterEventObject, metadataOf, portalSessionObject, subscriptionObject, wholeEvent, type FakeCheckout, type FakeEvent,
  type FakeSubscription,
} from './stripeObjects.js';

export type { FakeSubscription } from './stripeObjects.js';

export interface StripeCall {
  method: string;
  path: string;
  /** The form body as Stripe's client encodes it (`line_items[0][price]`, `metadata[owner_id]`). */
  form: Record<string, string>;
  authorization: string | undefined;
}

/** A meter event as the fake holds it (Stripe's billing.meter_event object). */
export type FakeMeterEvent = Stripe.Billing.MeterEvent;

export interface StripeFake {
  url: string;
  calls: StripeCall[];
  /** Meter events accepted, one per identifier (a repeated identifier is refused, as Stripe does). */
  meterEvents: FakeMeterEvent[];
  /** The sum of the accepted events' values for a customer (or all). */
  meterSum(customer?: string): number;
  /** While `fail`, POST /v1/billing/meter_events answers 500. */
  meterMode(mode: 'ok' | 'fail'): void;
  /**
   * The next `n` meter event requests are taken (a new identifier recorded) and their connection
   * cut without an answer: Stripe has the event, the gateway never hears. Two cover one attempt,
   * since the stripe library resends once on a closed connection.
   */
  meterDrops(n: number): void;
  /**
   * While set, each meter event accepted (a new identifier, recorded) waits for `hook` before its
   * answer goes out: a test puts itself between Stripe taking an event and the gateway hearing so.
   */
  beforeMeterAnswer(hook: ((event: FakeMeterEvent) => Promise<void>) | undefined): void;
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
  /** Where paying a session sends its signed event: the gateway's webhook endpoint and its secret. */
  deliverTo(webhookUrl: string, secret: string): void;
  /**
   * Pays a session the gateway created (what opening its URL does): an active subscription of its
   * price for its customer (a new one unless the session named one), the session complete, and
   * `checkout.session.completed` sent to the webhook; the webhook's status.
   */
  pay(sessionId: string): Promise<{ subscription: string; webhookStatus: number }>;
  close(): Promise<void>;
}

function stripeError(res: http.ServerResponse, status: number, type: string, message: string, code?: string) {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { type, message, ...(code ? { code } : {}) } }));
}

/** Stripe's test signature of `body` with `secret`, at `timestamp` (seconds; now by default). */
const sign = (body: string, secret: string, timestamp?: number) => Stripe.webhooks.generateTestHeaderString({ payload: body, secret, timestamp });

/** An event as Stripe sends it: the JSON body and its Stripe-Signature header made with `secret`. */
export function signedEvent(
  secret: string, type: string, object: object, options: { id?: string; livemode?: boolean; timestamp?: number } = {},
): { id: string; body: string; signature: string } {
  const id = options.id ?? fakeId('evt');
  const body = JSON.stringify(eventEnvelope(id, type, object, options));
  return { id, body, signature: sign(body, secret, options.timestamp) };
}

/** A whole event (type and object checked together against Stripe's types), signed. */
export function signedWholeEvent(secret: string, event: FakeEvent): { id: string; body: string; signature: string } {
  const id = fakeId('evt');
  const body = JSON.stringify(wholeEvent(id, event));
  return { id, body, signature: sign(body, secret) };
}

/** What the fake holds and how it answers; startStripeFake puts it behind a listener. */
class FakeStripe {
  readonly subscriptions = new Map<string, FakeSubscription>();
  readonly checkouts = new Map<string, FakeCheckout>();
  readonly meterEvents: FakeMeterEvent[] = [];
  readonly calls: StripeCall[] = [];
  meterMode: 'ok' | 'fail' = 'ok';
  drops = 0;
  beforeMeterAnswer: ((event: FakeMeterEvent) => Promise<void>) | undefined;
  failures = 0;
  delayMs = 0;
  webhook: { url: string; secret: string } | undefined;
  url = '';

  async pay(sessionId: string): Promise<{ subscription: string; webhookStatus: number }> {
    const session = this.checkouts.get(sessionId);
    if (!session) throw new Error(`no such checkout session: ${sessionId}`);
    if (!session.subscription) {
      const sub: FakeSubscription = {
        id: fakeId('sub'), customer: session.form.customer ?? fakeId('cus'), status: 'active', prices: [session.form['line_items[0][price]'] ?? ''],
        metadata: metadataOf(session.form, 'subscription_data[metadata]'),
      };
      this.subscriptions.set(sub.id, sub);
      Object.assign(session, { subscription: sub.id, customer: sub.customer });
    }
    if (!this.webhook) return { subscription: session.subscription!, webhookStatus: 0 };
    const event = signedWholeEvent(this.webhook.secret, { type: 'checkout.session.completed', object: checkoutSessionObject(session) });
    const res = await fetch(this.webhook.url, { method: 'POST', headers: { 'content-type': 'application/json', 'stripe-signature': event.signature }, body: event.body });
    return { subscription: session.subscription!, webhookStatus: res.status };
  }

  async handle(req: http.IncomingMessage, res: http.ServerResponse, body: string): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://fake').pathname;
    const form = Object.fromEntries(new URLSearchParams(body));
    this.calls.push({ method: req.method ?? '', path, form, authorization: req.headers.authorization });
    if (this.failures > 0) {
      this.failures--;
      return stripeError(res, 500, 'api_error', 'the fake was told to fail');
    }
    const json = (value: unknown) => { res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(value)); };
    if (req.method === 'POST' && path === '/v1/checkout/sessions') {
      const id = fakeId('cs_test');
      const session: FakeCheckout = { id, form, subscription: null, customer: null, url: `${this.url}/c/pay/${id}` };
      this.checkouts.set(id, session);
      return json(checkoutSessionObject(session));
    }
    if (req.method === 'POST' && path === '/v1/billing_portal/sessions') {
      const id = fakeId('bps');
      // Stripe's own portal address: neither the demo nor the tests open it.
      return json(portalSessionObject(id, form, `https://billing.stripe.com/p/session/${id}`));
    }
    if (req.method === 'POST' && path === '/v1/billing/meter_events') return this.meterEvent(res, form);
    const paying = /^\/c\/pay\/([^/]+)$/.exec(path);
    if (req.method === 'GET' && paying) {
      const paid = await this.pay(decodeURIComponent(paying[1]!)).catch(() => undefined);
      if (!paid) return stripeError(res, 404, 'invalid_request_error', 'No such checkout session');
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' })
        .end(`Paid (the demo's fake of Stripe): subscription ${paid.subscription} is active; the gateway's webhook answered ${paid.webhookStatus}\n`);
      return;
    }
    const sub = /^\/v1\/subscriptions\/([^/]+)$/.exec(path);
    if (sub && req.method === 'GET' && this.delayMs) await new Promise((r) => setTimeout(r, this.delayMs));
    const found = sub && this.subscriptions.get(decodeURIComponent(sub[1]!));
    if (sub && !found) return stripeError(res, 404, 'invalid_request_error', `No such subscription: '${sub[1]}'`);
    if (found && req.method === 'POST' && form.cancel_at_period_end !== undefined) found.cancelAtPeriodEnd = form.cancel_at_period_end === 'true';
    if (found) return json(subscriptionObject(found));
    return stripeError(res, 404, 'invalid_request_error', `Unrecognized request URL (${req.method}: ${path})`);
  }

  private async meterEvent(res: http.ServerResponse, form: Record<string, string>): Promise<void> {
    if (this.meterMode === 'fail') return stripeError(res, 500, 'api_error', 'the fake was told to fail');
    const identifier = form.identifier ?? fakeId('mev');
    const drop = this.drops > 0;
    if (drop) this.drops--;
    // Stripe enforces an identifier's uniqueness (over at least 24 hours): a repeat is refused.
    if (this.meterEvents.some((e) => e.identifier === identifier)) {
      if (drop) return void res.socket?.destroy();
      return stripeError(res, 400, 'invalid_request_error', `An event with identifier '${identifier}' already exists.`, 'resource_already_exists');
    }
    const event = meterEventObject(form, identifier);
    this.meterEvents.push(event);
    if (drop) return void res.socket?.destroy();
    await this.beforeMeterAnswer?.(event);
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(event));
  }
}

export async function startStripeFake(): Promise<StripeFake> {
  const fake = new FakeStripe();
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => { body += chunk.toString(); });
    req.on('end', () => void fake.handle(req, res, body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  fake.url = `http://127.0.0.1:${port}`;
  const close = () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); });
  return {
    down: close,
    up: () => new Promise((resolve) => { server.listen(port, '127.0.0.1', () => resolve()); }),
    url: fake.url,
    calls: fake.calls,
    meterEvents: fake.meterEvents,
    meterSum: (customer) => fake.meterEvents.filter((e) => !customer || e.payload.stripe_customer_id === customer).reduce((sum, e) => sum + Number(e.payload.value), 0),
    meterMode: (mode) => { fake.meterMode = mode; },
    meterDrops: (n) => { fake.drops = n; },
    beforeMeterAnswer: (hook) => { fake.beforeMeterAnswer = hook; },
    cancelAtPeriodEnd: (subId) => fake.subscriptions.get(subId)?.cancelAtPeriodEnd === true,
    setSubscription: (sub) => { fake.subscriptions.set(sub.id, { ...sub }); },
    failNext: (n) => { fake.failures = n; },
    delaySubscriptions: (ms) => { fake.delayMs = ms; },
    deliverTo: (webhookUrl, secret) => { fake.webhook = { url: webhookUrl, secret }; },
    pay: (sessionId) => fake.pay(sessionId),
    close,
  };
}
