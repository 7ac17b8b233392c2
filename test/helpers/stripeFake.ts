// The local fake of Stripe the billing tests run against: src/demo/stripeFake.ts, which `npm run
// demo` runs too (its objects are checked against the `stripe` package's types: src/demo/stripeObjects.ts).
export { signedEvent, signedWholeEvent, startStripeFake, type FakeMeterEvent, type FakeSubscription, type StripeCall, type StripeFake } from '../../src/demo/stripeFake.js';
