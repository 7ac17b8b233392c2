// Issue 53: the Stripe fake's objects are shaped as Stripe's API describes them (src/stripeFake/objects.ts,
// checked at compile time against the `stripe` package's types), and the gateway takes them whole.
// The other billing tests sign partial payloads on purpose (the payload decides nothing); here the
// events are whole, as Stripe sends them: a session paid at the fake's checkout page sends its
// checkout.session.completed to the gateway's webhook, and a whole customer.subscription.updated
// ends the plan. docs/billing.md's example against the fake.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { subscriptionObject } from '../../src/stripeFake/index.js';
import { docsExample } from '../helpers/docs.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { bearer, closeSql, describeWithServices, makeUser, sql, startTestGateway, testConfigFromYaml, type TestGateway } from '../helpers/gateway.js';
import { signedWholeEvent, startStripeFake, type StripeFake } from '../helpers/stripeFake.js';

const SECRET = 'whsec_d2hvbGUtZXZlbnRzLW9mLXRoZS1mYWtl';
const WEBHOOK = '/api/v1/billing/stripe/webhook';

describeWithServices('whole Stripe objects and events, from the fake', () => {
  let stripe: StripeFake;
  let app: EchoUpstream;
  let gw: TestGateway;

  beforeAll(async () => {
    [stripe, app] = await Promise.all([startStripeFake(), startEchoUpstream()]);
    const env = { STRIPE_SECRET_KEY: 'rk_test_fake', STRIPE_WEBHOOK_SECRET: SECRET, STRIPE_API_BASE: stripe.url, APP_URL: app.url };
    gw = await startTestGateway(testConfigFromYaml(docsExample('billing', 'billing'), env));
    stripe.deliverTo(`${gw.url.replace('localhost', '127.0.0.1')}${WEBHOOK}`, SECRET);
  });
  afterAll(async () => {
    await gw?.close();
    await stripe?.close();
    await app?.close();
    await closeSql();
  });

  const planOf = async (id: number) => (await sql<{ plan: string }>('SELECT plan FROM users WHERE id = $1', [id]))[0]!.plan;

  it('a session paid at the checkout page sends a whole checkout.session.completed: linked, premium, the guard passing', async () => {
    const user = await makeUser(gw);
    expect((await gw.get('/api/v1/forecasts', { headers: bearer(user.access) })).status).toBe(403);
    const res = await gw.post('/api/v1/billing/checkout', { price: 'price_premium_monthly' }, { headers: bearer(user.access) });
    expect(res.status, res.text).toBe(200);
    // The URL leads to the double's checkout page; its Pay button posts to it, and the fake pays and
    // delivers the events of a paid checkout before answering (a script gets JSON, a browser a redirect).
    const page = await fetch(res.json.url as string);
    expect(await page.text()).toMatch(/<form method="post" action="\/c\/pay\/cs_test_[0-9a-f]+"><button type="submit" id="pay">Pay<\/button><\/form>/);
    const paid = await fetch(res.json.url as string, { method: 'POST' });
    expect(await paid.json()).toMatchObject({ paid: true, subscription: expect.stringMatching(/^sub_[0-9a-f]+$/), webhookStatus: 200 });
    expect(stripe.sent.slice(-3).map((e) => [e.type, e.status])).toEqual([['checkout.session.completed', 200], ['customer.subscription.created', 200], ['invoice.paid', 200]]);
    expect(await planOf(user.id)).toBe('premium');
    const [linked] = await sql<{ stripe_customer_id: string }>("SELECT stripe_customer_id FROM billing_customers WHERE owner_type = 'user' AND owner_id = $1", [user.id]);
    const [sub] = await sql<{ status: string; price: string; current_period_end: Date }>(
      "SELECT status, price, current_period_end FROM billing_subscriptions WHERE owner_type = 'user' AND owner_id = $1", [user.id]);
    expect(linked!.stripe_customer_id).toMatch(/^cus_[0-9a-f]+$/);
    // The period's end comes from the subscription's items, where Stripe's API now keeps it.
    expect(sub).toMatchObject({ status: 'active', price: 'price_premium_monthly' });
    expect(sub!.current_period_end.getTime()).toBeGreaterThan(Date.now() + 29 * 86_400_000);
    expect((await gw.get('/api/v1/forecasts', { headers: bearer(user.access) })).status).toBe(200);
  });

  it('a whole customer.subscription.updated of a canceled subscription sets the plan back to free', async () => {
    const user = await makeUser(gw);
    const res = await gw.post('/api/v1/billing/checkout', { price: 'price_pro_monthly' }, { headers: bearer(user.access) });
    const { subscription } = await stripe.pay(/\/c\/pay\/(cs_test_\w+)$/.exec(res.json.url as string)![1]!);
    expect(await planOf(user.id)).toBe('pro');
    const [row] = await sql<{ stripe_customer_id: string }>('SELECT stripe_customer_id FROM billing_subscriptions WHERE stripe_subscription_id = $1', [subscription]);
    const canceled = { id: subscription, customer: row!.stripe_customer_id, status: 'canceled' as const, prices: ['price_pro_monthly'] };
    stripe.setSubscription(canceled);
    const event = signedWholeEvent(SECRET, { type: 'customer.subscription.updated', object: subscriptionObject(canceled) });
    const answer = await gw.request('POST', WEBHOOK, { body: event.body, headers: { 'content-type': 'application/json', 'stripe-signature': event.signature } });
    expect(answer.status).toBe(200);
    expect(await planOf(user.id)).toBe('free');
  });
});
