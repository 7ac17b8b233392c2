// What the Stripe double holds and how it answers (CONTRACT §23, §29): the few endpoints of
// Stripe's API the gateway calls (Checkout Sessions, Billing Portal sessions, Customers,
// Subscriptions, Billing meter events), answering whole objects shaped as Stripe's API describes
// them (objects.ts, invoices.ts); a checkout page with Pay and Cancel (checkoutPage.ts); and the
// trigger endpoint under /fake/, a path Stripe does not have (triggers.ts). server.ts puts it behind
// a listener. It takes test keys only: a live key gets the 401 Stripe answers a bad key, so a
// gateway configured with one can never mistake the double for Stripe.
import type http from 'node:http';
import type Stripe from 'stripe';
import { checkoutPage } from './checkoutPage.js';
import type { FakeHolder } from './holder.js';
import { customerObject, type FakeCustomer } from './invoices.js';
import {
  checkoutSessionObject, fakeId, meterEventObject, metadataOf, now, portalSessionObject, subscriptionObject, type FakeCheckout, type FakeEvent, type FakeSubscription,
} from './objects.js';
import { deliver, type Delivery, type Webhook } from './webhook.js';
import { eventsOfPayment, trigger, TRIGGER_PATH, TriggerError, type TriggerArgs } from './triggers.js';

export interface StripeCall {
  method: string;
  path: string;
  /** The form body as Stripe's client encodes it (`line_items[0][price]`, `metadata[owner_id]`). */
  form: Record<string, string>;
  authorization: string | undefined;
}

/** A meter event as the fake holds it (Stripe's billing.meter_event object). */
export type FakeMeterEvent = Stripe.Billing.MeterEvent;

/** What the fake keeps in its data directory (dataDir.ts), and loads again at start. */
export interface FakeState {
  customers: FakeCustomer[];
  subscriptions: FakeSubscription[];
  checkouts: FakeCheckout[];
  meterEvents: FakeMeterEvent[];
}

const TEST_KEY = /^(?:sk|rk)_test_[A-Za-z0-9_]+$/;

function stripeError(res: http.ServerResponse, status: number, type: string, message: string, code?: string) {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { type, message, ...(code ? { code } : {}) } }));
}

/** The key of `Authorization: Bearer …`, as Stripe's client sends it, or of Basic (`curl -u sk_test_…:`, as Stripe's docs show). */
function keyOf(authorization: string | undefined): string | undefined {
  const bearer = /^Bearer (\S+)$/.exec(authorization ?? '')?.[1];
  if (bearer) return bearer;
  const basic = /^Basic (\S+)$/.exec(authorization ?? '')?.[1];
  return basic === undefined ? undefined : Buffer.from(basic, 'base64').toString().split(':')[0] || undefined;
}
/** A key as Stripe's error masks it: its kind, then stars, then its last four characters. */
const masked = (key: string) => `${/^[a-z]{2}_(?:live|test)_/.exec(key)?.[0] ?? ''}${'*'.repeat(Math.max(0, key.length - 12))}${key.slice(-4)}`;

export class FakeStripe implements FakeHolder {
  readonly subscriptions = new Map<string, FakeSubscription>();
  readonly checkouts = new Map<string, FakeCheckout>();
  readonly customers = new Map<string, FakeCustomer>();
  readonly meterEvents: FakeMeterEvent[] = [];
  readonly calls: StripeCall[] = [];
  /** Every event sent (or, without a webhook, made), in order. */
  readonly sent: Delivery[] = [];
  meterMode: 'ok' | 'fail' = 'ok';
  /** The customer whose every meter event loses its first attempt's answers (none: null). */
  answersLostFor: string | null = null;
  private readonly answersCut = new Map<string, number>();
  beforeMeterAnswer: ((event: FakeMeterEvent) => Promise<void>) | undefined;
  failures = 0;
  delayMs = 0;
  webhook: Webhook | undefined;
  url = '';

  /** Called after each change of the state (the data directory keeps it). */
  constructor(private readonly changed: () => void = () => {}) {}

  state(): FakeState {
    return { customers: [...this.customers.values()], subscriptions: [...this.subscriptions.values()], checkouts: [...this.checkouts.values()], meterEvents: this.meterEvents };
  }

  load(state: FakeState): void {
    for (const c of state.customers) this.customers.set(c.id, c);
    for (const s of state.subscriptions) this.subscriptions.set(s.id, s);
    for (const c of state.checkouts) this.checkouts.set(c.id, c);
    this.meterEvents.push(...state.meterEvents);
  }

  /** The customer `id`, made when Stripe would have made it (a checkout without one, a trigger naming a new one). */
  customer(id: string | undefined, fields: Partial<Pick<FakeCustomer, 'email' | 'name' | 'metadata'>> = {}): FakeCustomer {
    const known = id === undefined ? undefined : this.customers.get(id);
    if (known) return known;
    const customer: FakeCustomer = { id: id ?? fakeId('cus'), created: now(), email: fields.email ?? null, name: fields.name ?? null, metadata: fields.metadata ?? {} };
    this.customers.set(customer.id, customer);
    return customer;
  }

  /** Sends `events` to the webhook, one after the other, each signed; what each delivery answered. */
  async send(events: FakeEvent[]): Promise<Delivery[]> {
    this.changed();
    const deliveries = await deliver(this.webhook, events);
    this.sent.push(...deliveries);
    return deliveries;
  }

  /**
   * Pays a session (the Pay button): an active subscription of its price for its customer (a new
   * one unless the session named one), the session complete, then the events a real account sends
   * for it. The subscription, its customer, and the status the gateway answered checkout.session.completed.
   */
  async pay(sessionId: string): Promise<{ subscription: string; customer: string; webhookStatus: number; events: Delivery[] }> {
    const session = this.checkouts.get(sessionId);
    if (!session) throw new TriggerError(`no such checkout session: ${sessionId}`);
    if (session.subscription) throw new TriggerError(`checkout session ${sessionId} is paid already`);
    const customer = this.customer(session.form.customer);
    const sub: FakeSubscription = {
      id: fakeId('sub'), customer: customer.id, status: 'active', prices: [session.form['line_items[0][price]'] ?? ''],
      metadata: metadataOf(session.form, 'subscription_data[metadata]'), periodStart: now(),
    };
    this.subscriptions.set(sub.id, sub);
    Object.assign(session, { subscription: sub.id, customer: sub.customer });
    const events = await this.send(eventsOfPayment(session, sub));
    const completed = events.find((e) => e.type === 'checkout.session.completed');
    return { subscription: sub.id, customer: customer.id, webhookStatus: completed!.status ?? 0, events };
  }

  async handle(req: http.IncomingMessage, res: http.ServerResponse, body: string): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://fake').pathname;
    const form = Object.fromEntries(new URLSearchParams(body));
    if (path === TRIGGER_PATH && req.method === 'POST') return this.triggered(res, body);
    if (path.startsWith('/c/')) return checkoutPage(this, req, res, path);
    this.calls.push({ method: req.method ?? '', path, form, authorization: req.headers.authorization });
    const key = keyOf(req.headers.authorization);
    if (key === undefined) return stripeError(res, 401, 'invalid_request_error', 'You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth.');
    // A live key is refused as Stripe refuses a bad one: the double holds no live account.
    if (!TEST_KEY.test(key)) return stripeError(res, 401, 'invalid_request_error', `Invalid API Key provided: ${masked(key)}`);
    if (this.failures > 0) {
      this.failures--;
      return stripeError(res, 500, 'api_error', 'the fake was told to fail');
    }
    return this.api(req, res, path, form);
  }

  private async api(req: http.IncomingMessage, res: http.ServerResponse, path: string, form: Record<string, string>): Promise<void> {
    const json = (value: unknown) => { res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(value)); };
    const post = req.method === 'POST';
    if (post && path === '/v1/checkout/sessions') {
      const id = fakeId('cs_test');
      const session: FakeCheckout = { id, form, subscription: null, customer: null, url: `${this.url}/c/pay/${id}` };
      this.checkouts.set(id, session);
      this.changed();
      return json(checkoutSessionObject(session));
    }
    if (post && path === '/v1/billing_portal/sessions') {
      const id = fakeId('bps');
      // Stripe's own portal address: the double has no portal of its own (trigger changes subscriptions).
      return json(portalSessionObject(id, form, `https://billing.stripe.com/p/session/${id}`));
    }
    if (post && path === '/v1/billing/meter_events') return this.meterEvent(res, form);
    if (post && path === '/v1/customers') {
      const customer = this.customer(undefined, { email: form.email ?? null, name: form.name ?? null, metadata: metadataOf(form) });
      this.changed();
      return json(customerObject(customer));
    }
    const customer = /^\/v1\/customers\/([^/]+)$/.exec(path);
    if (customer && req.method === 'GET') {
      const found = this.customers.get(decodeURIComponent(customer[1]!));
      return found ? json(customerObject(found)) : stripeError(res, 404, 'invalid_request_error', `No such customer: '${customer[1]}'`, 'resource_missing');
    }
    const sub = /^\/v1\/subscriptions\/([^/]+)$/.exec(path);
    if (sub && req.method === 'GET' && this.delayMs) await new Promise((r) => setTimeout(r, this.delayMs));
    const found = sub && this.subscriptions.get(decodeURIComponent(sub[1]!));
    if (sub && !found) return stripeError(res, 404, 'invalid_request_error', `No such subscription: '${sub[1]}'`, 'resource_missing');
    if (found && post && form.cancel_at_period_end !== undefined) {
      found.cancelAtPeriodEnd = form.cancel_at_period_end === 'true';
      this.changed();
    }
    if (found) return json(subscriptionObject(found));
    return stripeError(res, 404, 'invalid_request_error', `Unrecognized request URL (${req.method}: ${path})`);
  }

  /** POST /fake/trigger {event, customer, price, status, subscription, session}: triggers.ts's change, then its events. */
  private async triggered(res: http.ServerResponse, body: string): Promise<void> {
    const answer = (status: number, value: unknown) => { res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value)); };
    let args: unknown;
    try {
      args = JSON.parse(body);
    } catch {
      args = undefined;
    }
    if (args === null || typeof args !== 'object') return answer(400, { error: 'expected a JSON body {event, customer, price, status, subscription, session}' });
    try {
      const result = await trigger(this, args as TriggerArgs);
      return answer(200, result);
    } catch (err) {
      // Any other error is the double's own fault: server.ts answers it 500.
      if (err instanceof TriggerError) return answer(400, { error: err.message });
      throw err;
    }
  }

  private async meterEvent(res: http.ServerResponse, form: Record<string, string>): Promise<void> {
    if (this.meterMode === 'fail') return stripeError(res, 500, 'api_error', 'the fake was told to fail');
    const identifier = form.identifier ?? fakeId('mev');
    const drop = this.cutsAnswer(form, identifier);
    // Stripe enforces an identifier's uniqueness (over at least 24 hours): a repeat is refused.
    if (this.meterEvents.some((e) => e.identifier === identifier)) {
      if (drop) return void res.socket!.destroy();
      return stripeError(res, 400, 'invalid_request_error', `An event with identifier '${identifier}' already exists.`, 'resource_already_exists');
    }
    const event = meterEventObject(form, identifier);
    this.meterEvents.push(event);
    this.changed();
    if (drop) return void res.socket!.destroy();
    await this.beforeMeterAnswer?.(event);
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(event));
  }

  /**
   * Whether this request's answer is lost: the first two requests of each identifier of the
   * customer named, an attempt and the resend a closed connection may bring, counted per
   * identifier so that events sent side by side each lose theirs.
   */
  private cutsAnswer(form: Record<string, string>, identifier: string): boolean {
    if (form['payload[stripe_customer_id]'] !== this.answersLostFor) return false; // a customer is never null
    const cut = this.answersCut.get(identifier) ?? 0;
    if (cut >= 2) return false;
    this.answersCut.set(identifier, cut + 1);
    return true;
  }
}
