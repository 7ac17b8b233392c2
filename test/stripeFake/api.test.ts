// The Stripe double's HTTP answers one by one, as raw requests meet them (src/stripeFake/fake.ts):
// the keys it takes and how it refuses the others, each endpoint's answer and its 404s, the knobs
// the billing tests turn (failNext, meterMode, meterLoseFirstAttempts), the calls it records, the trigger
// endpoint's refusals, paying a session and the state a data directory hands back. Through the
// official client and with a receiver: fake.test.ts; its objects against Stripe's types: shapes.test.ts.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startStripeFake, type FakeState, type StripeFake } from '../../src/stripeFake/index.js';

const KEY = 'sk_test_api';

interface Answer { status: number; type: string | null; body: unknown }

async function call(fake: StripeFake, path: string, options: { method?: string; authorization?: string | null; form?: Record<string, string>; body?: string } = {}): Promise<Answer> {
  const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' };
  const authorization = options.authorization === undefined ? `Bearer ${KEY}` : options.authorization;
  if (authorization !== null) headers.authorization = authorization;
  const body = options.body ?? (options.form ? new URLSearchParams(options.form).toString() : undefined);
  const res = await fetch(`${fake.url}${path}`, { method: options.method ?? (body === undefined ? 'GET' : 'POST'), headers, body });
  const text = await res.text();
  return { status: res.status, type: res.headers.get('content-type'), body: text ? JSON.parse(text) : null };
}

const stripeError = (status: number, type: string, message: string, code?: string): Answer =>
  ({ status, type: 'application/json', body: { error: { type, message, ...(code ? { code } : {}) } } });
const noKey = stripeError(401, 'invalid_request_error', 'You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth.');

describe('the Stripe double, request by request', () => {
  let fake: StripeFake;
  beforeAll(async () => { fake = await startStripeFake(); });
  afterAll(async () => { await fake?.close(); });
  afterEach(() => {
    fake.failNext(0);
    fake.meterMode('ok');
    fake.meterLoseFirstAttempts(null);
  });

  it('takes a test key as Bearer or as Basic\'s user; refuses none, a malformed header and any other key, masked', async () => {
    const basic = (user: string) => `Basic ${Buffer.from(user).toString('base64')}`;
    for (const authorization of [`Bearer ${KEY}`, 'Bearer rk_test_restricted', basic(`${KEY}:`)]) {
      expect((await call(fake, '/v1/customers', { authorization, form: {} })).status, authorization).toBe(200);
    }
    for (const authorization of [null, '', `Bearer ${KEY} extra`, `xBearer ${KEY}`, basic(':secret'), `Basic ${KEY} extra`, `xBasic ${Buffer.from(`${KEY}:`).toString('base64')}`]) {
      expect(await call(fake, '/v1/customers', { authorization, form: {} }), String(authorization)).toEqual(noKey);
    }
    const refused = (masked: string) => stripeError(401, 'invalid_request_error', `Invalid API Key provided: ${masked}`);
    expect(await call(fake, '/v1/customers', { authorization: 'Bearer sk_live_51AbCdEfGhIjKlMn1234', form: {} })).toEqual(refused('sk_live_****************1234'));
    expect(await call(fake, '/v1/customers', { authorization: 'Bearer xsk_test_abcdefgh9876', form: {} })).toEqual(refused('*********9876'));
    expect(await call(fake, '/v1/customers', { authorization: 'Bearer sk_test_abc-def', form: {} })).toEqual(refused('sk_test_***-def'));
    expect(await call(fake, '/v1/customers', { authorization: 'Bearer pk_test_abc', form: {} })).toEqual(refused('pk_test__abc'));
  });

  it('records every API call, refused or not, with its method, path, form and authorization', async () => {
    const before = fake.calls.length;
    await call(fake, '/v1/customers?expand[]=x', { form: { email: 'ada@example.com' } });
    await call(fake, '/v1/customers/cus_none', { authorization: null });
    expect(fake.calls.slice(before)).toEqual([
      { method: 'POST', path: '/v1/customers', form: { email: 'ada@example.com' }, authorization: `Bearer ${KEY}` },
      { method: 'GET', path: '/v1/customers/cus_none', form: {}, authorization: undefined },
    ]);
  });

  it('customers: made with their email, name and metadata, read back by id; a missing one is resource_missing', async () => {
    const made = await call(fake, '/v1/customers', { form: { email: 'ada@example.com', name: 'Ada', 'metadata[user_id]': '7', metadata: 'x' } });
    expect(made).toMatchObject({ status: 200, type: 'application/json', body: { object: 'customer', email: 'ada@example.com', name: 'Ada', metadata: { user_id: '7' } } });
    const id = (made.body as { id: string }).id;
    expect(id).toMatch(/^cus_[0-9a-f]{16}$/);
    expect(await call(fake, `/v1/customers/${id}`)).toEqual({ ...made, body: made.body });
    expect(await call(fake, '/v1/customers', { form: {} })).toMatchObject({ body: { email: null, name: null, metadata: {} } });
    expect(await call(fake, '/v1/customers/cus_none')).toEqual(stripeError(404, 'invalid_request_error', 'No such customer: \'cus_none\'', 'resource_missing'));
    expect(await call(fake, `/v1/customers/${id}`, { form: { name: 'x' } })).toEqual(stripeError(404, 'invalid_request_error', `Unrecognized request URL (POST: /v1/customers/${id})`));
    expect(await call(fake, `/v1/customers/${id}/sources`)).toEqual(stripeError(404, 'invalid_request_error', `Unrecognized request URL (GET: /v1/customers/${id}/sources)`));
    expect(await call(fake, `/api/v1/customers/${id}`)).toEqual(stripeError(404, 'invalid_request_error', `Unrecognized request URL (GET: /api/v1/customers/${id})`));
  });

  it('checkout and portal sessions: a session paid on the double\'s page, a portal session at Stripe\'s own address', async () => {
    const checkout = await call(fake, '/v1/checkout/sessions', { form: { mode: 'subscription', 'line_items[0][price]': 'price_pro' } });
    const session = checkout.body as { id: string; url: string };
    expect(session.id).toMatch(/^cs_test_[0-9a-f]{16}$/);
    expect(session.url).toBe(`${fake.url}/c/pay/${session.id}`);
    const portal = await call(fake, '/v1/billing_portal/sessions', { form: { customer: 'cus_1', return_url: 'https://app.example.com/back' } });
    const id = (portal.body as { id: string }).id;
    expect(id).toMatch(/^bps_[0-9a-f]{16}$/);
    expect(portal).toMatchObject({ status: 200, type: 'application/json', body: { customer: 'cus_1', return_url: 'https://app.example.com/back', url: `https://billing.stripe.com/p/session/${id}` } });
    expect(await call(fake, '/v1/checkout/sessions')).toEqual(stripeError(404, 'invalid_request_error', 'Unrecognized request URL (GET: /v1/checkout/sessions)'));
    expect(await call(fake, '/v1/billing_portal/sessions')).toEqual(stripeError(404, 'invalid_request_error', 'Unrecognized request URL (GET: /v1/billing_portal/sessions)'));
  });

  it('subscriptions: read by id, cancel_at_period_end set and unset by a POST; a missing one is resource_missing', async () => {
    const { subscription } = await fake.trigger({ event: 'customer.subscription.created', customer: 'cus_sub', price: 'price_pro' });
    const id = subscription.id;
    expect(await call(fake, `/v1/subscriptions/${id}`)).toMatchObject({ status: 200, type: 'application/json', body: { id, customer: 'cus_sub', cancel_at_period_end: false } });
    expect(await call(fake, `/v1/subscriptions/${id}`, { form: { cancel_at_period_end: 'true' } })).toMatchObject({ body: { cancel_at_period_end: true } });
    expect(fake.cancelAtPeriodEnd(id)).toBe(true);
    expect(await call(fake, `/v1/subscriptions/${id}`, { form: { metadata: 'x' } })).toMatchObject({ body: { cancel_at_period_end: true } });
    expect(await call(fake, `/v1/subscriptions/${id}`, { form: { cancel_at_period_end: 'false' } })).toMatchObject({ body: { cancel_at_period_end: false } });
    expect(fake.cancelAtPeriodEnd(id)).toBe(false);
    expect(await call(fake, '/v1/subscriptions/sub_none')).toEqual(stripeError(404, 'invalid_request_error', 'No such subscription: \'sub_none\'', 'resource_missing'));
    expect(await call(fake, `/v1/subscriptions/${id}/items`)).toEqual(stripeError(404, 'invalid_request_error', `Unrecognized request URL (GET: /v1/subscriptions/${id}/items)`));
    expect(await call(fake, '/v1/prices')).toEqual(stripeError(404, 'invalid_request_error', 'Unrecognized request URL (GET: /v1/prices)'));
    expect(await call(fake, '/v1/prices', { form: { cancel_at_period_end: 'true' } })).toEqual(stripeError(404, 'invalid_request_error', 'Unrecognized request URL (POST: /v1/prices)'));
    expect(await call(fake, `/api/v1/subscriptions/${id}`)).toEqual(stripeError(404, 'invalid_request_error', `Unrecognized request URL (GET: /api/v1/subscriptions/${id})`));
  });

  it('delaySubscriptions(ms): each GET of a subscription waits that long before its answer, and only those', async () => {
    const { subscription } = await fake.trigger({ event: 'customer.subscription.created', customer: 'cus_slow', price: 'price_pro' });
    fake.delaySubscriptions(2000);
    try {
      let answered = false;
      const read = call(fake, `/v1/subscriptions/${subscription.id}`).then((a) => { answered = true; return a; });
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(answered).toBe(false);
      // Sent after it, answered before it: a change of the subscription and another resource's read.
      expect(await call(fake, `/v1/subscriptions/${subscription.id}`, { form: { cancel_at_period_end: 'false' } })).toMatchObject({ status: 200, body: { id: subscription.id } });
      expect(await call(fake, '/v1/customers/cus_slow')).toMatchObject({ status: 200, body: { id: 'cus_slow' } });
      expect(answered).toBe(false);
      expect(await read).toMatchObject({ status: 200, body: { id: subscription.id } });
    } finally {
      fake.delaySubscriptions(0);
    }
  });

  it('failNext(n): the next n keyed calls answer Stripe\'s api_error, then it answers again; a call without a key is refused first', async () => {
    fake.failNext(2);
    expect(await call(fake, '/v1/customers', { authorization: null, form: {} })).toEqual(noKey);
    const failed = stripeError(500, 'api_error', 'the fake was told to fail');
    expect(await call(fake, '/v1/customers', { form: {} })).toEqual(failed);
    expect(await call(fake, '/v1/prices')).toEqual(failed);
    expect((await call(fake, '/v1/customers', { form: {} })).status).toBe(200);
  });

  it('meter events: one per identifier (a repeat refused), 500 while failing, taken and cut while dropping', async () => {
    const event = (identifier: string) => ({ event_name: 'api_requests', identifier, 'payload[stripe_customer_id]': 'cus_meter', 'payload[value]': '3', timestamp: '1700000000' });
    const before = fake.meterEvents.length;
    expect(await call(fake, '/v1/billing/meter_events', { form: event('m1') })).toEqual({
      status: 200, type: 'application/json',
      body: {
        object: 'billing.meter_event', created: expect.any(Number), event_name: 'api_requests', identifier: 'm1', livemode: false,
        payload: { stripe_customer_id: 'cus_meter', value: '3' }, timestamp: 1700000000,
      },
    });
    expect(await call(fake, '/v1/billing/meter_events', { form: event('m1') }))
      .toEqual(stripeError(400, 'invalid_request_error', 'An event with identifier \'m1\' already exists.', 'resource_already_exists'));
    fake.meterMode('fail');
    expect(await call(fake, '/v1/billing/meter_events', { form: event('m2') })).toEqual(stripeError(500, 'api_error', 'the fake was told to fail'));
    fake.meterMode('ok');
    fake.meterLoseFirstAttempts('cus_meter');
    // Counted per identifier: two events sent side by side each lose their first two requests;
    // another customer's lose none.
    for (const id of ['m3', 'm4', 'm3', 'm4']) await expect(call(fake, '/v1/billing/meter_events', { form: event(id) }), id).rejects.toThrow();
    for (const id of ['m3', 'm4']) expect((await call(fake, '/v1/billing/meter_events', { form: event(id) })).status, id).toBe(400);
    expect((await call(fake, '/v1/billing/meter_events', { form: { ...event('m5'), 'payload[stripe_customer_id]': 'cus_other' } })).status).toBe(200);
    expect(fake.meterEvents.slice(before).map((e) => e.identifier)).toEqual(['m1', 'm3', 'm4', 'm5']);
    expect(fake.meterSum('cus_meter')).toBe(9);
    const { body } = await call(fake, '/v1/billing/meter_events', { form: { event_name: 'api_requests' } });
    expect((body as { identifier: string }).identifier).toMatch(/^mev_[0-9a-f]{16}$/);
  });

  it('the trigger endpoint: a POST of JSON only; what it cannot do is 400 with the reason, a GET is an API call', async () => {
    for (const body of ['event=invoice.paid', 'null', '"invoice.paid"', '7']) {
      expect(await call(fake, '/fake/trigger', { body, authorization: null }), body)
        .toEqual({ status: 400, type: 'application/json', body: { error: 'expected a JSON body {event, customer, price, status, subscription, session}' } });
    }
    expect(await call(fake, '/fake/trigger', { body: JSON.stringify({ event: 'invoice.paid', customer: 'cus_nobody' }), authorization: null }))
      .toEqual({ status: 400, type: 'application/json', body: { error: expect.stringMatching(/customer cus_nobody has no subscription/) } });
    expect(await call(fake, '/fake/trigger', { body: JSON.stringify({ event: 'customer.subscription.created', customer: 'cus_t', price: 'price_pro' }), authorization: null }))
      .toMatchObject({ status: 200, type: 'application/json', body: { subscription: { customer: 'cus_t', status: 'active' } } });
    expect(await call(fake, '/fake/trigger', { authorization: null })).toEqual(noKey);
  });
});

describe('paying a session on the double', () => {
  let fake: StripeFake;
  let receiver: http.Server;
  const received: string[] = [];
  beforeAll(async () => {
    receiver = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => { body += c.toString(); });
      req.on('end', () => {
        const type = (JSON.parse(body) as { type: string }).type;
        received.push(type);
        res.writeHead(type === 'checkout.session.completed' ? 202 : 200).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    fake = await startStripeFake();
  });
  afterAll(async () => {
    await fake?.close();
    await new Promise((resolve) => receiver?.close(resolve));
  });

  const session = async (form: Record<string, string>) => ((await call(fake, '/v1/checkout/sessions', { form })).body as { id: string }).id;

  it('without a webhook: the subscription is made, no event is sent, and the completed event\'s status is 0', async () => {
    const id = await session({ 'line_items[0][price]': 'price_pro', customer: 'cus_known' });
    const paid = await fake.pay(id);
    expect(paid).toEqual({ subscription: expect.stringMatching(/^sub_[0-9a-f]{16}$/), customer: 'cus_known', webhookStatus: 0 });
    expect(await call(fake, `/v1/subscriptions/${paid.subscription}`)).toMatchObject({ body: { customer: 'cus_known', status: 'active', items: { data: [{ price: { id: 'price_pro' } }] } } });
    expect(fake.sent.slice(-1)[0]).toMatchObject({ status: null, error: 'not sent (no --forward-to)' });
  });

  it('with one: the events in Stripe\'s order, the status the endpoint answered checkout.session.completed, the subscription\'s metadata from the session', async () => {
    fake.deliverTo(`http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`, 'whsec_test');
    const id = await session({ 'line_items[0][price]': 'price_team', 'subscription_data[metadata][owner_id]': '4', 'metadata[owner_id]': 'not the subscription\'s' });
    const paid = await fake.pay(id);
    expect(paid.webhookStatus).toBe(202);
    expect([...received].sort()).toEqual(['checkout.session.completed', 'customer.subscription.created', 'invoice.paid']);
    expect(await call(fake, `/v1/subscriptions/${paid.subscription}`)).toMatchObject({ body: { metadata: { owner_id: '4' }, customer: paid.customer } });
    expect(paid.customer).toMatch(/^cus_[0-9a-f]{16}$/);
    expect(await call(fake, `/v1/customers/${paid.customer}`)).toMatchObject({ status: 200, body: { id: paid.customer } });
  });

  it('a session paid twice or unknown is refused by name', async () => {
    const id = await session({ 'line_items[0][price]': 'price_pro' });
    await fake.pay(id);
    await expect(fake.pay(id)).rejects.toThrow(`checkout session ${id} is paid already`);
    await expect(fake.pay('cs_test_none')).rejects.toThrow('no such checkout session: cs_test_none');
  });
});

describe('the double started from a data directory\'s state', () => {
  it('serves the customers, subscriptions, sessions and meter events it was handed, and hands back what changed', async () => {
    const states: FakeState[] = [];
    const state: FakeState = {
      customers: [{ id: 'cus_kept', created: 1, email: 'kept@example.com', name: null, metadata: {} }],
      subscriptions: [{ id: 'sub_kept', customer: 'cus_kept', status: 'trialing', prices: ['price_pro'], metadata: {}, periodStart: 1 }],
      checkouts: [{ id: 'cs_test_kept', form: { 'line_items[0][price]': 'price_pro', customer: 'cus_kept' }, subscription: null, customer: null, url: 'http://old/c/pay/cs_test_kept' }],
      meterEvents: [{ object: 'billing.meter_event', created: 1, event_name: 'api_requests', identifier: 'kept', livemode: false, payload: { value: '5' }, timestamp: 1 }],
    };
    const fake = await startStripeFake({ state, onChange: (s) => states.push(s) });
    try {
      expect([fake.calls, fake.sent]).toEqual([[], []]);
      expect(await call(fake, '/v1/customers/cus_kept')).toMatchObject({ body: { email: 'kept@example.com' } });
      expect(await call(fake, '/v1/subscriptions/sub_kept')).toMatchObject({ body: { status: 'trialing' } });
      expect(fake.meterSum()).toBe(5);
      expect((await call(fake, '/v1/billing/meter_events', { form: { identifier: 'kept' } })).status).toBe(400);
      const paid = await fake.pay('cs_test_kept');
      expect(paid.customer).toBe('cus_kept');
      const last = states.at(-1)!;
      expect(last.customers.map((c) => c.id)).toEqual(['cus_kept']);
      expect(last.subscriptions.map((s) => s.id)).toEqual(['sub_kept', paid.subscription]);
      expect(last.checkouts).toMatchObject([{ id: 'cs_test_kept', subscription: paid.subscription, customer: 'cus_kept' }]);
      expect(last.meterEvents.map((e) => e.identifier)).toEqual(['kept']);
      expect(await call(fake, '/v1/customers/cus_kept')).toMatchObject({ body: { email: 'kept@example.com' } });
      // Each change is handed over as it is made.
      const customer = ((await call(fake, '/v1/customers', { form: {} })).body as { id: string }).id;
      expect(states.at(-1)!.customers.map((c) => c.id)).toEqual(['cus_kept', customer]);
      const checkout = ((await call(fake, '/v1/checkout/sessions', { form: {} })).body as { id: string }).id;
      expect(states.at(-1)!.checkouts.map((c) => c.id)).toEqual(['cs_test_kept', checkout]);
      const handed = states.length;
      await call(fake, '/v1/subscriptions/sub_kept', { form: { cancel_at_period_end: 'true' } });
      expect(states.length).toBe(handed + 1);
      await call(fake, '/v1/billing/meter_events', { form: { identifier: 'new' } });
      expect(states.length).toBe(handed + 2);
      expect(states.at(-1)!.meterEvents.map((e) => e.identifier)).toEqual(['kept', 'new']);
    } finally {
      await fake.close();
    }
  });
});
