// The Stripe double the billing tests run against: src/stripeFake/, which `npm run demo` and
// `gateway stripe-fake` run too (its objects are checked against the `stripe` package's types).
// signedEvent is the tests' own: events the double never sends (partial payloads, livemode: true),
// to prove the gateway decides nothing from a payload and ignores the other mode's events.
import { eventBase, sign, startStripeFake, type StripeFake } from '../../src/stripeFake/index.js';
import { docsExample } from './docs.js';
import { startEchoUpstream, type EchoUpstream } from './echoUpstream.js';
import { startTestGateway, testConfigFromYaml, throwawayDatabase, type TestGateway, type ThrowawayDatabase } from './gateway.js';

export { signedWholeEvent, startStripeFake, type FakeMeterEvent, type FakeSubscription, type StripeCall, type StripeFake } from '../../src/stripeFake/index.js';

/** An event as Stripe sends it, around `object` (partial on purpose): its JSON body and Stripe-Signature made with `secret`. */
export function signedEvent(
  secret: string, type: string, object: object, options: { id?: string; livemode?: boolean; timestamp?: number } = {},
): { id: string; body: string; signature: string } {
  const id = options.id ?? `evt_${Math.random().toString(16).slice(2)}`;
  const body = JSON.stringify({ ...eventBase(id), livemode: options.livemode ?? false, type, data: { object } });
  return { id, body, signature: sign(body, secret, options.timestamp) };
}

/** docs/billing.md's example running against the fake, on a database of its own. */
export interface BillingSetup {
  db: ThrowawayDatabase;
  stripe: StripeFake;
  /** The example's APP_URL (its routes' upstream). */
  app: EchoUpstream;
  gateways: TestGateway[];
  close(): Promise<void>;
}

/**
 * `count` gateways on docs/billing.md's example as written, error codes on, webhooks signed with
 * `secret`. A database of their own: the past_due grace's minutely pass runs every 100 ms, and the
 * sweep with it purges every expired single-use row of its database (on the run's, other files'
 * flows in progress).
 */
export async function startBillingSetup(secret: string, count: number, options: { clock?: () => Date } = {}): Promise<BillingSetup> {
  const db = await throwawayDatabase({ migrated: true });
  const [stripe, app] = await Promise.all([startStripeFake(), startEchoUpstream()]);
  const env = { STRIPE_SECRET_KEY: 'rk_test_fake', STRIPE_WEBHOOK_SECRET: secret, STRIPE_API_BASE: stripe.url, APP_URL: app.url };
  const yaml = testConfigFromYaml(`${docsExample('billing', 'billing')}errors: { codes: true }\n`, env);
  const config = { ...yaml, storage: { ...yaml.storage, ...db.storage } };
  const gateways: TestGateway[] = [];
  for (let i = 0; i < count; i++) gateways.push(await startTestGateway(config, { ...options, housekeepingEveryMs: 100 }));
  return {
    db, stripe, app, gateways,
    async close() {
      for (const gw of gateways) await gw.close();
      await stripe.close();
      await app.close();
      await db.drop();
    },
  };
}
