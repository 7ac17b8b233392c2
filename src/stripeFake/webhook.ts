// Sending events as Stripe sends them to a webhook endpoint: one at a time, each whole
// (objects.ts), signed by the official `stripe` library's own test helper with the endpoint's
// secret (Stripe-Signature: t=…,v1=…), the next sent once the last was answered.
import Stripe from 'stripe';
import { fakeId, wholeEvent, type FakeEvent } from './objects.js';

/** Where the events go: the gateway's webhook endpoint (`--forward-to`) and its signing secret. */
export interface Webhook {
  url: string;
  secret: string;
}

/** One event sent: its id and type, and the status the endpoint answered (null: no webhook, or unreachable). */
export interface Delivery {
  id: string;
  type: string;
  /** The customer the event is about. */
  customer: string | null;
  status: number | null;
  error?: string;
}

/** Stripe's test signature of `body` with `secret`, at `timestamp` (seconds; now by default). */
export const sign = (body: string, secret: string, timestamp?: number) => Stripe.webhooks.generateTestHeaderString({ payload: body, secret, timestamp });

/** A whole event, signed: its JSON body and Stripe-Signature header. */
export function signedWholeEvent(secret: string, event: FakeEvent): { id: string; body: string; signature: string } {
  const id = fakeId('evt');
  const body = JSON.stringify(wholeEvent(id, event));
  return { id, body, signature: sign(body, secret) };
}

/** What the fake prints of a delivery: `type id → status (customer cus_…)`. */
export const deliveryLine = (e: Delivery) => `${e.type} ${e.id} → ${e.status ?? e.error}${e.customer ? ` (customer ${e.customer})` : ''}`;

export async function deliver(webhook: Webhook | undefined, events: FakeEvent[]): Promise<Delivery[]> {
  const deliveries: Delivery[] = [];
  for (const event of events) {
    const customer = typeof event.object.customer === 'string' ? event.object.customer : null;
    if (!webhook) {
      deliveries.push({ id: fakeId('evt'), type: event.type, customer, status: null, error: 'not sent (no --forward-to)' });
      continue;
    }
    const signed = signedWholeEvent(webhook.secret, event);
    try {
      const res = await fetch(webhook.url, { method: 'POST', headers: { 'content-type': 'application/json', 'stripe-signature': signed.signature }, body: signed.body });
      await res.arrayBuffer();
      deliveries.push({ id: signed.id, type: event.type, customer, status: res.status });
    } catch (err) {
      deliveries.push({ id: signed.id, type: event.type, customer, status: null, error: `not delivered: ${String((err as Error).cause ?? err)}` });
    }
  }
  return deliveries;
}
