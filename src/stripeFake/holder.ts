// What the checkout page and the triggers need of the fake (fake.ts implements it): its objects,
// and paying and sending. Declared here, beneath all three, so that none imports the fake itself.
import type { FakeCustomer } from './invoices.js';
import type { FakeCheckout, FakeEvent, FakeSubscription } from './objects.js';
import type { Delivery } from './webhook.js';

export interface FakeHolder {
  readonly subscriptions: Map<string, FakeSubscription>;
  readonly checkouts: Map<string, FakeCheckout>;
  readonly url: string;
  /** The customer `id`, made when Stripe would have made it. */
  customer(id: string | undefined): FakeCustomer;
  /** Sends events to the webhook, one after the other; what each delivery answered. */
  send(events: FakeEvent[]): Promise<Delivery[]>;
  /** Pays a session (the Pay button). */
  pay(sessionId: string): Promise<{ subscription: string; customer: string; webhookStatus: number; events: Delivery[] }>;
}
