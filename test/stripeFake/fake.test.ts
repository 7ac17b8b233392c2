// The Stripe double as a Stripe client and a webhook endpoint meet it (CONTRACT §29): test keys
// only (a live key is refused as Stripe refuses a bad key, so the official library raises its
// authentication error), never livemode: true, a checkout page with Pay and Cancel, and triggers
// that change the objects before the events are sent, in Stripe's order, signed so that the
// official library's constructEvent takes them.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDataDir, startStripeFake, type StripeFake } from '../../src/stripeFake/index.js';

const SECRET = 'whsec_dGhlLWRvdWJsZXMtb3duLXRlc3Qtc2VjcmV0';

/** A webhook endpoint that verifies each event with the stripe library and reads the subscription back, as the gateway does. */
async function startReceiver(apiBase: () => string) {
  const received: Array<{ type: string; livemode: boolean; status: string | undefined; object: Record<string, unknown> }> = [];
  const everything: unknown[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => { body += c.toString(); });
    req.on('end', () => void (async () => {
      const event = Stripe.webhooks.constructEvent(body, String(req.headers['stripe-signature']), SECRET);
      everything.push(JSON.parse(body));
      const object = event.data.object as unknown as Record<string, unknown>;
      const subId = event.type.startsWith('customer.subscription.') ? object.id : event.type === 'checkout.session.completed' ? object.subscription
        : (object.parent as { subscription_details: { subscription: string } } | undefined)?.subscription_details.subscription;
      const sub = await client(apiBase(), 'sk_test_receiver').subscriptions.retrieve(String(subId));
      received.push({ type: event.type, livemode: event.livemode, status: sub.status, object });
      res.writeHead(200).end('{}');
    })().catch(() => res.writeHead(400).end()));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, received, everything, close: () => new Promise((r) => server.close(r)) };
}

function client(apiBase: string, key: string): Stripe {
  const base = new URL(apiBase);
  return new Stripe(key, { host: base.hostname, port: base.port, protocol: 'http', maxNetworkRetries: 0, telemetry: false });
}

/** Every `livemode` anywhere in a value. */
const livemodes = (value: unknown): unknown[] => (Array.isArray(value) ? value.flatMap(livemodes)
  : value && typeof value === 'object' ? Object.entries(value).flatMap(([k, v]) => (k === 'livemode' ? [v] : livemodes(v))) : []);

describe('the Stripe double', () => {
  let fake: StripeFake;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;

  beforeAll(async () => {
    receiver = await startReceiver(() => fake.url);
    fake = await startStripeFake();
    fake.deliverTo(receiver.url, SECRET);
  });
  afterAll(async () => {
    await fake?.close();
    await receiver?.close();
  });

  it('listens on 127.0.0.1 and takes test keys only: a live key gets the 401 Stripe answers a bad key', async () => {
    expect(fake.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const customer = await client(fake.url, 'rk_test_abc').customers.create({ email: 'ada@example.com' });
    expect(customer).toMatchObject({ object: 'customer', email: 'ada@example.com', livemode: false });
    expect((await client(fake.url, 'sk_test_abc').customers.retrieve(customer.id)) as Stripe.Customer).toMatchObject({ id: customer.id });
    for (const key of ['sk_live_51AbCdEfGhIjKlMn1234', 'rk_live_51AbCdEfGhIjKlMn1234']) {
      const err = await client(fake.url, key).customers.create({}).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Stripe.errors.StripeAuthenticationError);
      expect(err).toMatchObject({ statusCode: 401, type: 'StripeAuthenticationError', message: `Invalid API Key provided: ${key.slice(0, 8)}${'*'.repeat(16)}1234` });
    }
    const raw = await fetch(`${fake.url}/v1/customers`, { method: 'POST', headers: { authorization: 'Bearer sk_live_51AbCdEfGhIjKlMn1234' } });
    expect(raw.status).toBe(401);
    expect(await raw.json()).toEqual({ error: { type: 'invalid_request_error', message: 'Invalid API Key provided: sk_live_****************1234' } });
    // curl -u sk_test_…: as Stripe's docs show, Basic works too.
    const basic = await fetch(`${fake.url}/v1/customers/${customer.id}`, { headers: { authorization: `Basic ${Buffer.from('sk_test_abc:').toString('base64')}` } });
    expect(basic.status).toBe(200);
  });

  it('its checkout page has Pay and Cancel: a browser is sent to success_url or cancel_url, a script gets JSON', async () => {
    const stripe = client(fake.url, 'sk_test_abc');
    const form = { mode: 'subscription' as const, line_items: [{ price: 'price_premium_monthly', quantity: 1 }], success_url: 'https://app.example.com/ok', cancel_url: 'https://app.example.com/back' };
    const session = await stripe.checkout.sessions.create(form);
    const page = await (await fetch(session.url!)).text();
    expect(page).toContain('a test double of Stripe, not Stripe');
    expect(page).toContain(`<form method="post" action="/c/pay/${session.id}"><button type="submit" id="pay">Pay</button></form>`);
    expect(page).toContain(`<form method="post" action="/c/cancel/${session.id}"><button type="submit" id="cancel">Cancel</button></form>`);
    const cancel = await fetch(`${fake.url}/c/cancel/${session.id}`, { method: 'POST', headers: { accept: 'text/html' }, redirect: 'manual' });
    expect([cancel.status, cancel.headers.get('location')]).toEqual([303, 'https://app.example.com/back']);
    const pay = await fetch(session.url!, { method: 'POST', headers: { accept: 'text/html,*/*' }, redirect: 'manual' });
    expect([pay.status, pay.headers.get('location')]).toEqual([303, 'https://app.example.com/ok']);
    const again = await fetch(session.url!, { method: 'POST' });
    expect(again.status).toBe(409);
    const other = await stripe.checkout.sessions.create(form);
    expect(await (await fetch(other.url!, { method: 'POST' })).json()).toMatchObject({ paid: true, subscription: expect.stringMatching(/^sub_/), customer: expect.stringMatching(/^cus_/) });
  });

  it('a trigger changes the objects first, then sends Stripe\'s events in Stripe\'s order; the receiver reads the change back', async () => {
    const first = receiver.received.length;
    const created = await fake.trigger({ event: 'customer.subscription.created', customer: 'cus_trigger', price: 'price_premium_monthly' });
    expect(created.subscription).toMatchObject({ customer: 'cus_trigger', status: 'active', livemode: false });
    await fake.trigger({ event: 'invoice.payment_failed', customer: 'cus_trigger' });
    await fake.trigger({ event: 'invoice.paid', customer: 'cus_trigger' });
    await fake.trigger({ event: 'customer.subscription.updated', customer: 'cus_trigger', status: 'unpaid' });
    await fake.trigger({ event: 'customer.subscription.deleted', customer: 'cus_trigger' });
    expect(receiver.received.slice(first).map((e) => [e.type, e.status])).toEqual([
      ['customer.subscription.created', 'active'], ['invoice.paid', 'active'],
      // The subscription is past_due before the first of these events is sent.
      ['customer.subscription.updated', 'past_due'], ['invoice.payment_failed', 'past_due'],
      ['customer.subscription.updated', 'active'], ['invoice.paid', 'active'],
      ['customer.subscription.updated', 'unpaid'], ['invoice.payment_failed', 'unpaid'],
      ['customer.subscription.deleted', 'canceled'],
    ]);
    const failed = receiver.received.slice(first).find((e) => e.type === 'invoice.payment_failed')!.object;
    expect(failed).toMatchObject({ object: 'invoice', customer: 'cus_trigger', status: 'open', attempted: true, parent: { type: 'subscription_details' } });
    expect(fake.sent.slice(-1)[0]).toMatchObject({ type: 'customer.subscription.deleted', status: 200 });
  });

  it('refuses what it cannot do, and changes nothing then', async () => {
    await expect(fake.trigger({ event: 'charge.refunded' })).rejects.toThrow(/unknown event "charge.refunded"; known: checkout.session.completed, /);
    await expect(fake.trigger({ event: 'invoice.paid', customer: 'cus_nobody' })).rejects.toThrow(/customer cus_nobody has no subscription/);
    await expect(fake.trigger({ event: 'customer.subscription.created', customer: 'cus_x' })).rejects.toThrow(/needs --price/);
    await expect(fake.trigger({ event: 'customer.subscription.updated', customer: 'cus_trigger', status: 'gone' })).rejects.toThrow(/--status gone: expected one of active, /);
  });

  it('never sends livemode: true, in any event or object', () => {
    const all = livemodes(receiver.everything);
    expect(all.length).toBeGreaterThan(20);
    expect(new Set(all)).toEqual(new Set([false]));
  });
});

describe('the double\'s data directory', () => {
  it('makes its webhook secret once and keeps its objects across restarts', async () => {
    const dir = path.join(mkdtempSync(path.join(tmpdir(), 'stripe-fake-')), 'data');
    try {
      const data = openDataDir(dir);
      expect(data.secret).toMatch(/^whsec_[0-9a-f]{64}$/);
      const fake = await startStripeFake({ state: data.state, onChange: (s) => data.save(s) });
      const { subscription } = await fake.trigger({ event: 'customer.subscription.created', customer: 'cus_kept', price: 'price_pro_monthly', status: 'trialing' });
      await fake.close();
      const again = openDataDir(dir);
      expect(again.secret).toBe(data.secret);
      const restarted = await startStripeFake({ state: again.state });
      try {
        expect(await client(restarted.url, 'sk_test_abc').subscriptions.retrieve(subscription.id)).toMatchObject({ status: 'trialing', customer: 'cus_kept' });
      } finally {
        await restarted.close();
      }
    } finally {
      rmSync(path.dirname(dir), { recursive: true, force: true });
    }
  });
});
