// The Stripe double behind a listener: `gateway stripe-fake`, `npm run demo` and the billing tests
// all run this one. It listens on 127.0.0.1 unless told otherwise (never HOST, which the image sets
// for the gateway), on an ephemeral port unless given one. Tests set a subscription's state, make
// the next calls fail or wait, and read what the gateway sent.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { FakeStripe, type FakeMeterEvent, type FakeState, type StripeCall } from './fake.js';
import type { FakeSubscription } from './objects.js';
import { trigger, type TriggerArgs, type TriggerResult } from './triggers.js';
import type { Delivery, Webhook } from './webhook.js';

export interface StripeFakeOptions {
  /** Default 127.0.0.1. */
  host?: string;
  /** Default 0: any free port. */
  port?: number;
  /** Where events go (`--forward-to`), signed with its secret; deliverTo() sets it later. */
  webhook?: Webhook;
  /** The objects a previous run kept, and what keeps them after each change (the data directory). */
  state?: FakeState;
  onChange?: (state: FakeState) => void;
}

export interface StripeFake {
  url: string;
  calls: StripeCall[];
  /** The events sent (or made, without a webhook), in order. */
  sent: Delivery[];
  /** Meter events accepted, one per identifier (a repeated identifier is refused, as Stripe does). */
  meterEvents: FakeMeterEvent[];
  /** The sum of the accepted events' values for a customer (or all). */
  meterSum(customer?: string): number;
  /** While `fail`, POST /v1/billing/meter_events answers 500. */
  meterMode(mode: 'ok' | 'fail'): void;
  /**
   * Each meter event of `customer` (null: none) is taken (a new identifier recorded) and its first
   * two requests' connections cut without an answer: Stripe has the event, the gateway never hears.
   * Two cover one attempt, since a closed connection may bring one resend; counted per identifier,
   * so that events sent side by side each lose their first attempt.
   */
  meterLoseFirstAttempts(customer: string | null): void;
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
  /** Where events go: the gateway's webhook endpoint and its secret. */
  deliverTo(webhookUrl: string, secret: string): void;
  /**
   * Pays a session the gateway created (the page's Pay button): an active subscription of its price
   * for its customer (a new one unless the session named one), the session complete, and the events
   * of a paid checkout sent; the status the gateway answered checkout.session.completed.
   */
  pay(sessionId: string): Promise<{ subscription: string; customer: string; webhookStatus: number }>;
  /** What `gateway stripe-fake trigger` does (triggers.ts). */
  trigger(args: TriggerArgs): Promise<TriggerResult>;
  close(): Promise<void>;
}

/** The address a URL names the listener by: a wildcard host is reached at localhost. */
function urlHost(host: string): string {
  if (host === '0.0.0.0' || host === '::') return 'localhost';
  return host.includes(':') ? `[${host}]` : host;
}

export async function startStripeFake(options: StripeFakeOptions = {}): Promise<StripeFake> {
  const fake: FakeStripe = new FakeStripe(() => options.onChange?.(fake.state()));
  if (options.state) fake.load(options.state);
  fake.webhook = options.webhook;
  const host = options.host ?? '127.0.0.1';
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => { body += chunk.toString(); });
    req.on('end', () => void fake.handle(req, res, body).catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { type: 'api_error', message: String(err) } }));
    }));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => { server.off('error', reject); resolve(); });
  });
  const port = (server.address() as AddressInfo).port;
  fake.url = `http://${urlHost(host)}:${port}`;
  const close = () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); });
  return {
    down: close,
    up: () => new Promise((resolve) => { server.listen(port, host, () => resolve()); }),
    url: fake.url,
    calls: fake.calls,
    sent: fake.sent,
    meterEvents: fake.meterEvents,
    meterSum: (customer) => fake.meterEvents.filter((e) => !customer || e.payload.stripe_customer_id === customer).reduce((sum, e) => sum + Number(e.payload.value), 0),
    meterMode: (mode) => { fake.meterMode = mode; },
    meterLoseFirstAttempts: (customer) => { fake.answersLostFor = customer; },
    beforeMeterAnswer: (hook) => { fake.beforeMeterAnswer = hook; },
    cancelAtPeriodEnd: (subId) => fake.subscriptions.get(subId)?.cancelAtPeriodEnd === true,
    setSubscription: (sub) => { fake.subscriptions.set(sub.id, { ...sub }); },
    failNext: (n) => { fake.failures = n; },
    delaySubscriptions: (ms) => { fake.delayMs = ms; },
    deliverTo: (webhookUrl, secret) => { fake.webhook = { url: webhookUrl, secret }; },
    pay: async (sessionId) => {
      const { subscription, customer, webhookStatus } = await fake.pay(sessionId);
      return { subscription, customer, webhookStatus };
    },
    trigger: (args) => trigger(fake, args),
    close,
  };
}
