// The gateway's Stripe client (src/billing/stripe.ts) against the Stripe double on loopback, call by
// call: what each call sends Stripe (the double records the form), what it reads back, how each
// failure is named, and which webhook signatures it takes. No database: the end-to-end billing
// tests drive the same client through the routes.
import Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STRIPE_API_VERSION } from '../../src/config/schema/billing.js';
import { SIGNATURE_TOLERANCE_S, StripeGateway, StripeUnavailable, idOf, ownerReference } from '../../src/billing/stripe.js';
import type { BillingConfig } from '../../src/config/schema/billing.js';
import { startStripeFake, type StripeFake } from '../../src/stripeFake/index.js';
import { startEchoUpstream, type Hit } from '../helpers/echoUpstream.js';

const SECRETS = ['whsec_Z2F0ZXdheS1vbGQtc2VjcmV0LWZvci10ZXN0cw', 'whsec_Z2F0ZXdheS1uZXctc2VjcmV0LWZvci10ZXN0cw'];

let fake: StripeFake;
const config = (overrides: Partial<BillingConfig['stripe']> = {}): BillingConfig['stripe'] => ({
  secretKey: 'sk_test_gateway', webhookSecrets: SECRETS, apiBase: fake.url, dashboardUrl: 'https://dashboard.stripe.com',
  prices: { price_pro: 'pro', price_team: 'team' }, successUrl: 'https://app.example/paid', cancelUrl: 'https://app.example/back', pastDueGraceDays: 7,
  ...overrides,
});
const lastCall = () => fake.calls[fake.calls.length - 1]!;

/** A Stripe that answers every request with `status` and `body` (the answers the double never gives); its hits keep each request. */
async function scripted<T>(status: number, body: unknown, fn: (url: string, hits: Hit[]) => Promise<T>): Promise<T> {
  const stripe = await startEchoUpstream();
  stripe.handle = (_req, res) => {
    res.writeHead(status, { 'content-type': 'application/json', 'request-id': `req_${stripe.hits.length}` }).end(JSON.stringify(body));
    return true;
  };
  try {
    return await fn(stripe.url, stripe.hits);
  } finally {
    await stripe.close();
  }
}
const stripeError = (message: string, code?: string) => ({ error: { type: 'invalid_request_error', message, ...(code ? { code } : {}) } });

beforeAll(async () => { fake = await startStripeFake(); });
afterAll(async () => { await fake.close(); });

describe('the Stripe client\'s calls', () => {
  it('a checkout session: the price, the owner in client_reference_id and both metadata, the configured URLs, no customer unless it has one', async () => {
    const stripe = new StripeGateway(config());
    const session = await stripe.checkoutSession({ type: 'user', id: 42 }, 'price_pro', undefined);
    expect(session.id).toMatch(/^cs_test_/);
    expect(session.url).toBe(`${fake.url}/c/pay/${session.id}`);
    const sent = lastCall();
    expect([sent.method, sent.path, sent.authorization]).toEqual(['POST', '/v1/checkout/sessions', 'Bearer sk_test_gateway']);
    expect(sent.form).toEqual({
      mode: 'subscription', 'line_items[0][price]': 'price_pro', 'line_items[0][quantity]': '1', client_reference_id: 'user:42',
      'metadata[owner_type]': 'user', 'metadata[owner_id]': '42', 'subscription_data[metadata][owner_type]': 'user', 'subscription_data[metadata][owner_id]': '42',
      success_url: 'https://app.example/paid', cancel_url: 'https://app.example/back',
    });
    await stripe.checkoutSession({ type: 'org', id: 7 }, 'price_team', 'cus_known', 'https://portal.example/billing');
    expect(lastCall().form).toMatchObject({
      customer: 'cus_known', client_reference_id: 'org:7', 'metadata[owner_type]': 'org', success_url: 'https://portal.example/billing', cancel_url: 'https://portal.example/billing',
    });
  });

  it('a portal session for the customer, back to the cancel URL or where the caller says', async () => {
    const stripe = new StripeGateway(config());
    expect(await stripe.portalSession('cus_1')).toMatch(/^https:\/\/billing\.stripe\.com\/p\/session\/bps_/);
    expect(lastCall().form).toEqual({ customer: 'cus_1', return_url: 'https://app.example/back' });
    await stripe.portalSession('cus_1', 'https://portal.example/billing');
    expect(lastCall().form).toEqual({ customer: 'cus_1', return_url: 'https://portal.example/billing' });
  });

  it('a subscription read back: its prices, the first one configured as its price, the latest period end, the cancel flag', async () => {
    const stripe = new StripeGateway(config());
    fake.setSubscription({ id: 'sub_read', customer: 'cus_r', status: 'past_due', prices: ['price_other', 'price_team'], periodStart: 1_700_000_000 });
    expect(await stripe.subscription('sub_read')).toEqual({
      id: 'sub_read', customer: 'cus_r', status: 'past_due', prices: ['price_other', 'price_team'], price: 'price_team',
      currentPeriodEnd: new Date((1_700_000_000 + 30 * 86_400) * 1000), cancelAtPeriodEnd: false,
    });
    fake.setSubscription({ id: 'sub_unlisted', customer: 'cus_r', status: 'active', prices: ['price_other'], periodStart: 1_700_000_000 });
    expect(await stripe.subscription('sub_unlisted')).toMatchObject({ price: 'price_other' });
    fake.setSubscription({ id: 'sub_empty', customer: 'cus_r', status: 'active', prices: [] });
    expect(await stripe.subscription('sub_empty')).toMatchObject({ prices: [], price: null, currentPeriodEnd: null });
    await stripe.cancelAtPeriodEnd('sub_read');
    expect(lastCall()).toMatchObject({ method: 'POST', path: '/v1/subscriptions/sub_read', form: { cancel_at_period_end: 'true' } });
    expect(await stripe.subscription('sub_read')).toMatchObject({ cancelAtPeriodEnd: true });
  });

  it('a failed call is StripeUnavailable, with Stripe\'s message: an error answer, a missing object, Stripe unreachable', async () => {
    const stripe = new StripeGateway(config());
    fake.failNext(1);
    const failed = await stripe.portalSession('cus_1').catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(StripeUnavailable);
    expect(failed).toMatchObject({ name: 'StripeUnavailable', message: 'Stripe call failed: the fake was told to fail' });
    expect((failed as Error).cause).toBeInstanceOf(Stripe.errors.StripeAPIError);
    await expect(stripe.subscription('sub_none')).rejects.toThrow(/^Stripe call failed: No such subscription: 'sub_none'$/);
    await expect(new StripeGateway(config({ apiBase: 'http://127.0.0.1:9' })).checkoutSession({ type: 'user', id: 1 }, 'price_pro', undefined))
      .rejects.toBeInstanceOf(StripeUnavailable);
    expect(new StripeUnavailable('plain').message).toBe('Stripe call failed: plain');
    expect(new StripeUnavailable(undefined).message).toBe('Stripe call failed: undefined');
  });

  it('answers the double never gives: a checkout session without a URL fails; items ending apart end with the last; no customer reads as ""', async () => {
    await scripted(200, { id: 'cs_test_nourl', object: 'checkout.session', url: null }, async (apiBase) => {
      await expect(new StripeGateway(config({ apiBase })).checkoutSession({ type: 'user', id: 1 }, 'price_pro', undefined))
        .rejects.toThrow(new StripeUnavailable(new Error('checkout session without url')));
    });
    const item = (price: string, end?: number) => ({ price: { id: price }, ...(end === undefined ? {} : { current_period_end: end }) });
    const sub = { id: 'sub_apart', object: 'subscription', customer: null, status: 'active', items: { data: [item('price_pro', 2_000), item('price_team', 3_000), item('price_team')] } };
    await scripted(200, sub, async (apiBase) => {
      expect(await new StripeGateway(config({ apiBase })).subscription('sub_apart')).toEqual({
        id: 'sub_apart', customer: '', status: 'active', prices: ['price_pro', 'price_team', 'price_team'], price: 'price_pro',
        currentPeriodEnd: new Date(3_000_000), cancelAtPeriodEnd: false,
      });
    });
  });

  it('speaks the pinned API version and sends no telemetry of its earlier calls', async () => {
    await scripted(200, { id: 'bps_1', object: 'billing_portal.session', url: 'https://billing.stripe.com/p/session/bps_1' }, async (apiBase, hits) => {
      const stripe = new StripeGateway(config({ apiBase }));
      await stripe.portalSession('cus_1');
      await stripe.portalSession('cus_1');
      expect(hits.map(({ headers: h }) => [h['stripe-version'], h['x-stripe-client-telemetry']])).toEqual([[STRIPE_API_VERSION, undefined], [STRIPE_API_VERSION, undefined]]);
    });
  });

  it('https to a port that speaks plain HTTP fails (the URL\'s scheme is the one used); http:// without a port goes to 80', async () => {
    const tls = await new StripeGateway(config({ apiBase: fake.url.replace('http:', 'https:') })).meterEvent({
      event_name: 'api_requests', identifier: 'over-tls', timestamp: 1_700_000_000, payload: { stripe_customer_id: 'cus_m', value: '1' },
    });
    expect(tls.outcome).toBe('network_error');
    expect(fake.meterEvents.map((e) => e.identifier)).not.toContain('over-tls');
    // An address of the loopback network of this test's own, port 80 (the tests run as root).
    const onEighty = await startStripeFake({ host: '127.0.0.77', port: 80 });
    try {
      onEighty.setSubscription({ id: 'sub_80', customer: 'cus_80', status: 'active', prices: ['price_pro'] });
      expect(await new StripeGateway(config({ apiBase: 'http://127.0.0.77' })).subscription('sub_80')).toMatchObject({ id: 'sub_80', customer: 'cus_80' });
    } finally {
      await onEighty.close();
    }
  });
});

describe('meter events as outbox attempts', () => {
  const event = (identifier: string) => ({ event_name: 'api_requests', identifier, timestamp: 1_700_000_000, payload: { stripe_customer_id: 'cus_m', value: '3' } });

  it('taken: success, and the same identifier again is success too (Stripe keeps the first)', async () => {
    const stripe = new StripeGateway(config());
    expect(await stripe.meterEvent(event('m-1'))).toEqual({ outcome: 'success' });
    expect(fake.meterEvents.filter((e) => e.identifier === 'm-1')).toHaveLength(1);
    expect(await stripe.meterEvent(event('m-1'))).toEqual({ outcome: 'success' });
  });

  it('Stripe failing: server_error; unreachable: network_error; a key refused: rejected; each with Stripe\'s message', async () => {
    fake.meterMode('fail');
    try {
      expect(await new StripeGateway(config()).meterEvent(event('m-2'))).toEqual({ outcome: 'server_error', error: 'Stripe: the fake was told to fail' });
    } finally {
      fake.meterMode('ok');
    }
    const unreachable = await new StripeGateway(config({ apiBase: 'http://127.0.0.1:9' })).meterEvent(event('m-3'));
    expect(unreachable.outcome).toBe('network_error');
    expect(unreachable.error).toMatch(/^Stripe: /);
    expect(await new StripeGateway(config({ secretKey: 'sk_live_not_for_a_double' })).meterEvent(event('m-4')))
      .toEqual({ outcome: 'rejected', error: 'Stripe: Invalid API Key provided: sk_live_************uble' });
  });

  it('a 429 is retried; a repeat named by its code alone or its message alone is delivered; a refusal\'s message is cut at 500 characters', async () => {
    const attempt = (status: number, body: unknown) => scripted(status, body, (apiBase) => new StripeGateway(config({ apiBase })).meterEvent(event('m-5')));
    expect(await attempt(429, { error: { type: 'rate_limit_error', message: 'Too many requests' } })).toEqual({ outcome: 'server_error', error: 'Stripe: Too many requests' });
    expect(await attempt(400, stripeError('Duplicate.', 'resource_already_exists'))).toEqual({ outcome: 'success' });
    expect(await attempt(400, stripeError('An event with identifier \'m-5\' already exists.'))).toEqual({ outcome: 'success' });
    const long = 'x'.repeat(600);
    expect(await attempt(400, stripeError(long, 'parameter_invalid_empty'))).toEqual({ outcome: 'rejected', error: `Stripe: ${long}`.slice(0, 500) });
  });
});

describe('webhook signatures', () => {
  const payload = JSON.stringify({ id: 'evt_1', object: 'event', type: 'customer.subscription.updated', livemode: false, data: { object: { id: 'sub_1', customer: 'cus_1' } } });
  const signed = (secret: string, timestamp: number) => Stripe.webhooks.generateTestHeaderString({ payload, secret, timestamp });
  const nowMs = 1_750_000_000_000;
  const nowS = nowMs / 1000;

  it('takes an event signed with either secret within the tolerance, past or future; reads its id, type, mode and object', () => {
    const stripe = new StripeGateway(config());
    const event = { id: 'evt_1', type: 'customer.subscription.updated', livemode: false, object: { id: 'sub_1', customer: 'cus_1' } };
    for (const secret of SECRETS) expect(stripe.verify(Buffer.from(payload), signed(secret, nowS), nowMs), secret).toEqual(event);
    expect(SIGNATURE_TOLERANCE_S).toBe(300);
    for (const offset of [-300, 300]) expect(stripe.verify(Buffer.from(payload), signed(SECRETS[0]!, nowS + offset), nowMs), String(offset)).toEqual(event);
  });

  it('refuses no header, another secret, another body, a timestamp beyond the tolerance either way, and a header without a readable t=', () => {
    const stripe = new StripeGateway(config());
    const body = Buffer.from(payload);
    expect(stripe.verify(body, undefined, nowMs)).toBeUndefined();
    expect(stripe.verify(body, '', nowMs)).toBeUndefined();
    expect(stripe.verify(body, signed('whsec_b3RoZXItc2VjcmV0LW5vdC1jb25maWd1cmVk', nowS), nowMs)).toBeUndefined();
    expect(stripe.verify(Buffer.from(`${payload} `), signed(SECRETS[0]!, nowS), nowMs)).toBeUndefined();
    for (const offset of [-301, 301, 3600]) expect(stripe.verify(body, signed(SECRETS[0]!, nowS + offset), nowMs), String(offset)).toBeUndefined();
    const v1 = signed(SECRETS[0]!, nowS).split(',').find((part) => part.startsWith('v1='))!;
    for (const header of [v1, `t=soon,${v1}`, `t,${v1}`]) expect(stripe.verify(body, header, nowMs), header).toBeUndefined();
  });

  it('reads the header\'s last t= (the one the library checks): an early t= in front changes nothing, a late one behind refuses', () => {
    const stripe = new StripeGateway(config());
    const body = Buffer.from(payload);
    const header = signed(SECRETS[0]!, nowS);
    expect(stripe.verify(body, `t=${nowS + 3600},${header}`, nowMs)).toMatchObject({ id: 'evt_1' });
    expect(stripe.verify(body, `${header},t=${nowS + 3600}`, nowMs)).toBeUndefined();
  });
});

describe('the rest of the client', () => {
  it('a live or restricted live key counts live events; a test key, test events', () => {
    const liveOf = (secretKey: string) => new StripeGateway(config({ secretKey, apiBase: 'https://api.stripe.com' })).livemode;
    expect(['sk_live_a', 'rk_live_a', 'sk_test_a', 'rk_test_a', 'xsk_live_a'].map(liveOf)).toEqual([true, true, false, false, false]);
  });

  it('an owner named as Stripe sees it, and an id read from a string or an expanded object', () => {
    expect([ownerReference({ type: 'user', id: 3 }), ownerReference({ type: 'org', id: 9 })]).toEqual(['user:3', 'org:9']);
    expect([idOf('cus_1'), idOf({ id: 'cus_2' }), idOf({ id: 5 }), idOf(null), idOf(undefined), idOf(7)]).toEqual(['cus_1', 'cus_2', null, null, null, null]);
  });
});
