// The Stripe double the billing tests run against: src/stripeFake/, which `npm run demo` and
// `gateway stripe-fake` run too (its objects are checked against the `stripe` package's types).
// signedEvent is the tests' own: events the double never sends (partial payloads, livemode: true),
// to prove the gateway decides nothing from a payload and ignores the other mode's events.
import { eventBase, sign } from '../../src/stripeFake/index.js';

export { signedWholeEvent, startStripeFake, type FakeMeterEvent, type FakeSubscription, type StripeCall, type StripeFake } from '../../src/stripeFake/index.js';

/** An event as Stripe sends it, around `object` (partial on purpose): its JSON body and Stripe-Signature made with `secret`. */
export function signedEvent(
  secret: string, type: string, object: object, options: { id?: string; livemode?: boolean; timestamp?: number } = {},
): { id: string; body: string; signature: string } {
  const id = options.id ?? `evt_${Math.random().toString(16).slice(2)}`;
  const body = JSON.stringify({ ...eventBase(id), livemode: options.livemode ?? false, type, data: { object } });
  return { id, body, signature: sign(body, secret, options.timestamp) };
}
