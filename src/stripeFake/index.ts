// The Stripe double's door (CONTRACT §29): `gateway stripe-fake` (cli/stripeFake.ts), `npm run demo`
// and the tests (test/helpers/stripeFake.ts) use this one implementation. docs/billing.md, "Try it
// without a Stripe account", says what it serves and what it never does.
export { startStripeFake, type StripeFake, type StripeFakeOptions } from './server.js';
export { type FakeMeterEvent, type FakeState, type StripeCall } from './fake.js';
export { DEFAULT_DATA_DIR, openDataDir, runningFakeUrl } from './dataDir.js';
export { TRIGGER_PATH, TRIGGERS, type TriggerArgs, type TriggerResult } from './triggers.js';
export { deliveryLine, sign, signedWholeEvent, type Delivery } from './webhook.js';
export { checkoutSessionObject, eventBase, subscriptionObject, wholeEvent, type FakeEvent, type FakeSubscription } from './objects.js';
export { customerObject, invoiceObject } from './invoices.js';
