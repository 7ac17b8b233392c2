// The Stripe double behind its listener and its webhook sender (src/stripeFake/server.ts,
// webhook.ts): where it listens and the URL it gives itself, down and up again on the same port, the
// handles tests turn (meterSum, setSubscription), and each delivery of an event: signed for the
// official library, answered, refused, or unreachable, as `gateway stripe-fake` prints it.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Stripe from 'stripe';
import { describe, expect, it } from 'vitest';
import { deliveryLine, signedWholeEvent, startStripeFake, type StripeFake } from '../../src/stripeFake/index.js';
import { refusedPort } from '../helpers/ports.js';

const SECRET = 'whsec_c2VydmVyLXRlc3Qtc2VjcmV0LXNlY3JldA';

async function withFake<T>(options: Parameters<typeof startStripeFake>[0], fn: (fake: StripeFake) => Promise<T>): Promise<T> {
  const fake = await startStripeFake(options);
  try {
    return await fn(fake);
  } finally {
    await fake.close();
  }
}

/** A webhook endpoint answering `status`, keeping each event as the official library reads it. */
async function receiver(status: number) {
  const events: Stripe.Event[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => { body += c.toString(); });
    req.on('end', () => {
      events.push(Stripe.webhooks.constructEvent(body, String(req.headers['stripe-signature']), SECRET));
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, events, close: () => new Promise((r) => server.close(r)) };
}

describe('the double\'s listener', () => {
  it('listens on 127.0.0.1 by default, and names a wildcard or IPv6 host as a client reaches it', async () => {
    await withFake({}, async (fake) => expect(fake.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/));
    for (const host of ['0.0.0.0', '::']) await withFake({ host }, async (fake) => expect(fake.url, host).toMatch(/^http:\/\/localhost:\d+$/));
    await withFake({ host: '::1' }, async (fake) => {
      expect(fake.url).toMatch(/^http:\/\/\[::1\]:\d+$/);
      expect((await fetch(`${fake.url}/v1/customers/cus_x`, { headers: { authorization: 'Bearer sk_test_x' } })).status).toBe(404);
    });
  });

  it('refuses to start on a port already taken (the listen error, not a hang)', async () => {
    await withFake({}, async (first) => {
      await expect(startStripeFake({ port: Number(new URL(first.url).port) })).rejects.toMatchObject({ code: 'EADDRINUSE' });
    });
  });

  it('answers a fault of its own (here a test\'s hook that throws) with Stripe\'s api_error, never a hung request', async () => {
    await withFake({}, async (fake) => {
      fake.beforeMeterAnswer(async () => { throw new Error('the hook broke'); });
      const res = await fetch(`${fake.url}/v1/billing/meter_events`, {
        method: 'POST', headers: { authorization: 'Bearer sk_test_x', 'content-type': 'application/x-www-form-urlencoded' },
        body: 'event_name=api_requests&identifier=m1&payload[value]=1&payload[stripe_customer_id]=cus_1',
      });
      expect([res.status, res.headers.get('content-type'), await res.json()])
        .toEqual([500, 'application/json', { error: { type: 'api_error', message: 'Error: the hook broke' } }]);
    });
  });

  it('goes down (connections refused) and comes up again on the same port, its objects kept', async () => {
    await withFake({}, async (fake) => {
      const { subscription } = await fake.trigger({ event: 'customer.subscription.created', customer: 'cus_down', price: 'price_pro' });
      const read = () => fetch(`${fake.url}/v1/subscriptions/${subscription.id}`, { headers: { authorization: 'Bearer sk_test_x' } });
      await fake.down();
      await expect(read()).rejects.toThrow();
      await fake.up();
      expect((await read()).status).toBe(200);
      // Down at once, a request in flight cut rather than waited for (a subscription read held 20 s, beyond the test's time).
      fake.delaySubscriptions(20_000);
      const held = read();
      await expect.poll(() => fake.calls.length).toBeGreaterThanOrEqual(2);
      await fake.down();
      await expect(held).rejects.toThrow();
    });
  });

  it('sums the meter events\' values per customer or in all; a subscription set is a copy', async () => {
    await withFake({}, async (fake) => {
      const post = (identifier: string, customer: string, value: string) => fetch(`${fake.url}/v1/billing/meter_events`, {
        method: 'POST', headers: { authorization: 'Bearer sk_test_x' },
        body: new URLSearchParams({ identifier, event_name: 'api_requests', 'payload[stripe_customer_id]': customer, 'payload[value]': value }),
      });
      await post('a', 'cus_1', '2');
      await post('b', 'cus_2', '5');
      await post('c', 'cus_1', '3');
      expect([fake.meterSum('cus_1'), fake.meterSum('cus_2'), fake.meterSum('cus_none'), fake.meterSum()]).toEqual([5, 5, 0, 10]);
      const sub = { id: 'sub_copy', customer: 'cus_1', status: 'active' as const, prices: ['price_pro'] };
      fake.setSubscription(sub);
      sub.status = 'canceled' as never;
      const read = await fetch(`${fake.url}/v1/subscriptions/sub_copy`, { headers: { authorization: 'Bearer sk_test_x' } });
      expect(await read.json()).toMatchObject({ id: 'sub_copy', status: 'active' });
      expect([fake.cancelAtPeriodEnd('sub_copy'), fake.cancelAtPeriodEnd('sub_none')]).toEqual([false, false]);
    });
  });

  it('sends to the webhook it was started with, each event signed for the official library', async () => {
    const endpoint = await receiver(200);
    try {
      await withFake({ webhook: { url: endpoint.url, secret: SECRET } }, async (fake) => {
        const { events } = await fake.trigger({ event: 'customer.subscription.created', customer: 'cus_hook', price: 'price_pro' });
        expect(events.map((e) => [e.type, e.status, e.customer])).toEqual([['customer.subscription.created', 200, 'cus_hook'], ['invoice.paid', 200, 'cus_hook']]);
        expect(endpoint.events.map((e) => [e.id, e.type, e.livemode])).toEqual(events.map((e) => [e.id, e.type, false]));
        expect(deliveryLine(events[0]!)).toBe(`customer.subscription.created ${events[0]!.id} → 200 (customer cus_hook)`);
      });
    } finally {
      await endpoint.close();
    }
  });
});

describe('the double\'s deliveries', () => {
  it('says what the endpoint answered, or that it could not be reached, and goes on with the next event', async () => {
    const refusing = await receiver(400);
    try {
      await withFake({}, async (fake) => {
        fake.deliverTo(refusing.url, SECRET);
        const answered = await fake.trigger({ event: 'customer.subscription.created', customer: 'cus_r', price: 'price_pro' });
        expect(answered.events.map((e) => e.status)).toEqual([400, 400]);
        fake.deliverTo(`http://127.0.0.1:${await refusedPort()}/hook`, SECRET);
        const lost = await fake.trigger({ event: 'invoice.paid', customer: 'cus_r' });
        expect(lost.events.map((e) => [e.type, e.status])).toEqual([['customer.subscription.updated', null], ['invoice.paid', null]]);
        expect(lost.events[0]!.error).toMatch(/^not delivered: Error: ./);
        expect(deliveryLine(lost.events[0]!)).toBe(`customer.subscription.updated ${lost.events[0]!.id} → ${lost.events[0]!.error} (customer cus_r)`);
      });
    } finally {
      await refusing.close();
    }
  });

  it('without a webhook, lists each event as not sent', async () => {
    await withFake({}, async (fake) => {
      const { events } = await fake.trigger({ event: 'customer.subscription.created', customer: 'cus_n', price: 'price_pro', status: 'trialing' });
      expect(events).toEqual([{ id: expect.stringMatching(/^evt_[0-9a-f]{16}$/), type: 'customer.subscription.created', customer: 'cus_n', status: null, error: 'not sent (no --forward-to)' }]);
      expect(deliveryLine({ ...events[0]!, customer: null })).toBe(`customer.subscription.created ${events[0]!.id} → not sent (no --forward-to)`);
    });
  });

  it('signs a whole event as Stripe does: the official library takes it with the secret, and refuses it with another', () => {
    const { id, body, signature } = signedWholeEvent(SECRET, { type: 'invoice.paid', object: { id: 'in_1', object: 'invoice', customer: 'cus_s' } as unknown as Stripe.Invoice });
    expect(id).toMatch(/^evt_[0-9a-f]{16}$/);
    expect(Stripe.webhooks.constructEvent(body, signature, SECRET)).toMatchObject({ id, type: 'invoice.paid', livemode: false, data: { object: { id: 'in_1' } } });
    expect(() => Stripe.webhooks.constructEvent(body, signature, 'whsec_another')).toThrow(/signature/i);
  });
});
