// Operator hooks (CONTRACT §24) for a plan set by payment (§23, §29's one story per event): a
// completed checkout sends user.plan_changed (source billing) and billing.plan_changed (with the
// Stripe event's id), in the transaction that applied the event; a replay of that event changes
// nothing and sends nothing more. An organization's plan set by payment is its org.plan_changed and
// billing.plan_changed, with owner_type org, and no member's user.plan_changed.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { docsExample } from '../helpers/docs.js';
import { bearer, closeSql, describeWithServices, eventually, makeUser, startTestGateway, testConfigFromYaml, throwawayDatabase, type TestGateway, type ThrowawayDatabase } from '../helpers/gateway.js';
import { hookRows, newHookSecret, verifiedHook } from '../helpers/hookReceiver.js';
import { signedEvent, startStripeFake, type FakeSubscription, type StripeFake } from '../helpers/stripeFake.js';
import { receiverCertificate, startReceiver, type Receiver } from '../helpers/webhookReceiver.js';

const SECRET = 'whsec_dGVzdC1zZWNyZXQtb2YtdGhlLWVuZHBvaW50';

describeWithServices('operator hooks: billing', () => {
  let gw: TestGateway;
  let stripe: StripeFake;
  let receiver: Receiver;
  let db: ThrowawayDatabase;
  const hookSecret = newHookSecret();

  beforeAll(async () => {
    [stripe, receiver, db] = await Promise.all([startStripeFake(), startReceiver(receiverCertificate()), throwawayDatabase({ migrated: true })]);
    const env = { STRIPE_SECRET_KEY: 'rk_test_fake', STRIPE_WEBHOOK_SECRET: SECRET, STRIPE_API_BASE: stripe.url, APP_URL: 'http://127.0.0.1:9' };
    const config = testConfigFromYaml(docsExample('billing', 'billing'), env);
    gw = await startTestGateway({
      ...config,
      storage: { ...config.storage, postgres: db.storage.postgres, redisKeyPrefix: db.storage.redisKeyPrefix },
      hooks: { url: receiver.url, secrets: [hookSecret], allowPrivateNetworks: true, events: ['user.plan_changed', 'org.plan_changed', 'billing.plan_changed'] },
    });
  });
  afterAll(async () => {
    await gw?.close();
    await Promise.all([stripe?.close(), receiver?.close()]);
    await db?.drop();
    await closeSql();
  });

  it('a completed checkout: user.plan_changed then billing.plan_changed with the Stripe event id; its replay sends nothing', async () => {
    const user = await makeUser(gw);
    const res = await gw.post('/api/v1/billing/checkout', { price: 'price_pro_monthly' }, { headers: bearer(user.access) });
    expect(res.status, res.text).toBe(200);
    const session = /cs_test_\w+$/.exec(res.json.url as string)![0];
    const sub: FakeSubscription = { id: `sub_${user.id}`, customer: `cus_${user.id}`, status: 'active', prices: ['price_pro_monthly'] };
    stripe.setSubscription(sub);
    const completed = signedEvent(SECRET, 'checkout.session.completed', { id: session, object: 'checkout.session', customer: sub.customer, subscription: sub.id });
    const send = () => gw.request('POST', '/api/v1/billing/stripe/webhook', { body: completed.body, headers: { 'content-type': 'application/json', 'stripe-signature': completed.signature! } });
    expect((await send()).status).toBe(200);
    await eventually(() => receiver.deliveries.length === 2, 10_000);
    expect(receiver.deliveries.map((d) => verifiedHook(hookSecret, d)).map((p) => [p.type, p.data])).toEqual([
      ['user.plan_changed', { user_id: user.id, plan: 'pro', previous_plan: 'free', source: 'billing', stripe_event_id: completed.id }],
      ['billing.plan_changed', { owner_type: 'user', owner_id: user.id, plan: 'pro', previous_plan: 'free', stripe_event_id: completed.id }],
    ]);
    expect((await send()).status).toBe(200);
    await new Promise((r) => setTimeout(r, 300));
    expect(receiver.deliveries).toHaveLength(2);
    expect((await hookRows(db)).map((r) => [r.subject, r.type])).toEqual([[`user:${user.id}`, 'user.plan_changed'], [`user:${user.id}`, 'billing.plan_changed']]);
  });

  it('an organization\'s completed checkout: org.plan_changed then billing.plan_changed, on the organization\'s subject, and no user.plan_changed for its member', async () => {
    const org = (await db.sql<{ id: number }>("INSERT INTO organizations (name) VALUES ('Hooked') RETURNING id"))[0]!.id;
    const owner = await makeUser(gw);
    await db.sql("INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'owner')", [org, owner.id]);
    const before = receiver.deliveries.length;
    // A session the gateway made for the organization (its owner's checkout under Gateway-Org: test/billing/orgBilling.test.ts).
    const session = `cs_test_org_${org}`;
    await db.sql("INSERT INTO billing_sessions (stripe_session_id, owner_type, owner_id, price) VALUES ($1, 'org', $2, 'price_premium_monthly')", [session, org]);
    const sub: FakeSubscription = { id: `sub_org_${org}`, customer: `cus_org_${org}`, status: 'active', prices: ['price_premium_monthly'] };
    stripe.setSubscription(sub);
    const completed = signedEvent(SECRET, 'checkout.session.completed', { id: session, object: 'checkout.session', customer: sub.customer, subscription: sub.id });
    const res = await gw.request('POST', '/api/v1/billing/stripe/webhook', { body: completed.body, headers: { 'content-type': 'application/json', 'stripe-signature': completed.signature! } });
    expect(res.status).toBe(200);
    await eventually(() => receiver.deliveries.length === before + 2, 10_000);
    expect(receiver.deliveries.slice(before).map((d) => verifiedHook(hookSecret, d)).map((p) => [p.type, p.data])).toEqual([
      ['org.plan_changed', { org_id: org, plan: 'premium', previous_plan: 'free', source: 'billing', stripe_event_id: completed.id }],
      ['billing.plan_changed', { owner_type: 'org', owner_id: org, plan: 'premium', previous_plan: 'free', stripe_event_id: completed.id }],
    ]);
    // The outbox is written in the webhook's own transaction, which has answered: what the member
    // got is all there is (not a delivery that might still come).
    expect((await hookRows(db)).filter((r) => r.subject === `org:${org}`).map((r) => r.type)).toEqual(['org.plan_changed', 'billing.plan_changed']);
    expect((await hookRows(db)).filter((r) => r.subject === `user:${owner.id}`)).toEqual([]);
  });
});
