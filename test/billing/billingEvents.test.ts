// CONTRACT §23, what billing.test.ts leaves: which of Stripe's event types move a plan (each of the
// three subscription events alone; any other type, even naming a known subscription, none), the
// completed checkouts that link nothing (no subscription, no session id, an owner linked to another
// customer: logged for the operator), a trialing subscription refusing a second checkout, the log
// line of a plan set, this instance forgetting the plan it cached at once when an event or a grace's
// end changes it (its NOTIFY late), and an owner deleted while its event waits for the owner's lock.
// One gateway, docs/billing.md's example, against the Stripe fake.
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import {
  bearer, closeSql, describeWithServices, eventually, holdNotifications, loggedLines, makeUser, type TestGateway, type TestUser,
} from '../helpers/gateway.js';
import { holdRows } from '../helpers/rowLock.js';
import { signedEvent, startBillingSetup, type BillingSetup, type FakeSubscription, type StripeFake } from '../helpers/stripeFake.js';

const SECRET = 'whsec_dGVzdC1zZWNyZXQtb2YtdGhlLWV2ZW50cw';
const WEBHOOK = '/api/v1/billing/stripe/webhook';
const GUARDED = '/api/v1/forecasts';

let held: { release(): void } | undefined;
afterEach(() => {
  held?.release();
  held = undefined;
});

describeWithServices('which Stripe events move a plan, and what a plan\'s change does at once (CONTRACT §23)', () => {
  let gw: TestGateway;
  let stripe: StripeFake;
  let setup: BillingSetup;
  const sql = <T = Record<string, unknown>>(text: string, params?: unknown[]) => setup.db.sql<T>(text, params);

  beforeAll(async () => {
    setup = await startBillingSetup(SECRET, 1);
    stripe = setup.stripe;
    [gw] = setup.gateways as [TestGateway];
  });
  afterAll(async () => {
    await setup?.close();
    await closeSql();
  });

  const send = (event: { body: string; signature: string }) =>
    gw.request('POST', WEBHOOK, { body: event.body, headers: { 'content-type': 'application/json', 'stripe-signature': event.signature } });
  const plan = async (id: number) => (await sql<{ plan: string }>('SELECT plan FROM users WHERE id = $1', [id]))[0]?.plan;
  const claimed = async (id: string) => (await sql<{ n: number }>('SELECT count(*)::int AS n FROM billing_events WHERE event_id = $1', [id]))[0]!.n;
  const customers = (id: number) => sql("SELECT stripe_customer_id FROM billing_customers WHERE owner_type = 'user' AND owner_id = $1", [id]);
  const guarded = async (user: TestUser) => (await gw.get(GUARDED, { headers: bearer(user.access) })).status;
  /** What the webhook's log line says it did with the event. */
  const outcome = (id: string) => loggedLines(gw, 'billing: Stripe event').filter((l) => l.eventId === id).at(-1)?.outcome;
  const ownLines = (msg: string, id: number) => loggedLines(gw, msg).filter((l) => (l.owner as { id: number } | undefined)?.id === id);

  /** A user and the session id of the checkout it opened. */
  async function checkoutOpened(): Promise<{ user: TestUser; session: string }> {
    const user = await makeUser(gw);
    const res = await gw.post('/api/v1/billing/checkout', { price: 'price_premium_monthly' }, { headers: bearer(user.access) });
    expect(res.status, res.text).toBe(200);
    return { user, session: /cs_test_\w+$/.exec(res.json.url as string)![0] };
  }
  /** A user whose checkout completed with a subscription in `status`. */
  async function subscribed(status: FakeSubscription['status'], prices = ['price_premium_monthly']) {
    const { user, session } = await checkoutOpened();
    const sub: FakeSubscription = { id: `sub_ev_${user.id}`, customer: `cus_ev_${user.id}`, status, prices };
    stripe.setSubscription(sub);
    const completed = signedEvent(SECRET, 'checkout.session.completed', { id: session, object: 'checkout.session', customer: sub.customer, subscription: sub.id });
    expect((await send(completed)).status).toBe(200);
    return { user, sub, completed };
  }
  const about = (type: string, sub: FakeSubscription) => signedEvent(SECRET, type, { id: sub.id, object: 'subscription', customer: sub.customer });

  it('each subscription event alone moves the plan; another type naming the subscription moves nothing and is not claimed', async () => {
    const { user, sub } = await subscribed('active');
    expect(await plan(user.id)).toBe('premium');
    const steps: Array<[string, FakeSubscription, string]> = [
      ['customer.subscription.created', { ...sub, prices: ['price_pro_monthly'] }, 'pro'],
      ['customer.subscription.updated', { ...sub, prices: ['price_premium_monthly'] }, 'premium'],
      ['customer.subscription.deleted', { ...sub, status: 'canceled' }, 'free'],
    ];
    for (const [type, state, expected] of steps) {
      stripe.setSubscription(state);
      const event = about(type, sub);
      expect((await send(event)).json, type).toEqual({ received: true });
      expect([await plan(user.id), await claimed(event.id), outcome(event.id)], type).toEqual([expected, 1, 'applied']);
    }
    // Stripe says active again; events of other types that name the subscription are received, not applied.
    stripe.setSubscription({ ...sub, status: 'active' });
    for (const type of ['invoice.paid', 'customer.subscription.paused', 'checkout.session.expired', 'customer.updated']) {
      const event = about(type, sub);
      expect((await send(event)).json, type).toEqual({ received: true });
      expect([await plan(user.id), await claimed(event.id), outcome(event.id)], type).toEqual(['free', 0, 'ignored']);
    }
    // A live-mode event to a test key is ignored; the same event twice is applied once, then replayed.
    const live = signedEvent(SECRET, 'customer.subscription.updated', { id: sub.id, object: 'subscription', customer: sub.customer }, { livemode: true });
    expect([(await send(live)).status, await plan(user.id), outcome(live.id)]).toEqual([200, 'free', 'ignored']);
    const twice = about('customer.subscription.updated', sub);
    for (const expected of ['applied', 'replayed']) expect([(await send(twice)).status, outcome(twice.id)]).toEqual([200, expected]);
    expect(await plan(user.id)).toBe('premium');
    // An event whose object has no id names no subscription: claimed, nothing fetched.
    const calls = stripe.calls.length;
    const nameless = signedEvent(SECRET, 'customer.subscription.updated', { object: 'subscription', customer: sub.customer });
    expect([(await send(nameless)).status, await claimed(nameless.id), outcome(nameless.id), stripe.calls.length]).toEqual([200, 1, 'applied', calls]);
  });

  it('a completed checkout without a subscription or a session id links nothing; one for an owner linked elsewhere is logged', async () => {
    const { user, session } = await checkoutOpened();
    const sub: FakeSubscription = { id: `sub_nolink_${user.id}`, customer: `cus_nolink_${user.id}`, status: 'active', prices: ['price_premium_monthly'] };
    stripe.setSubscription(sub);
    const fetched = () => stripe.calls.filter((c) => c.path === `/v1/subscriptions/${sub.id}`).length;
    const incomplete = [
      signedEvent(SECRET, 'checkout.session.completed', { id: session, object: 'checkout.session', customer: sub.customer }),
      signedEvent(SECRET, 'checkout.session.completed', { object: 'checkout.session', customer: sub.customer, subscription: sub.id }),
    ];
    for (const event of incomplete) {
      expect((await send(event)).json).toEqual({ received: true });
      expect(await claimed(event.id)).toBe(1);
    }
    expect([await plan(user.id), await customers(user.id), fetched()]).toEqual(['free', [], 0]);

    // Linked by a first checkout; a second session of the same user completes with another customer.
    const first = await subscribed('canceled');
    const again = await gw.post('/api/v1/billing/checkout', { price: 'price_pro_monthly' }, { headers: bearer(first.user.access) });
    const second = /cs_test_\w+$/.exec(again.json.url as string)![0];
    const other: FakeSubscription = { id: `sub_other_${first.user.id}`, customer: `cus_other_${first.user.id}`, status: 'active', prices: ['price_pro_monthly'] };
    stripe.setSubscription(other);
    expect((await send(signedEvent(SECRET, 'checkout.session.completed', { id: second, customer: other.customer, subscription: other.id }))).status).toBe(200);
    expect(await plan(first.user.id)).toBe('free');
    const warned = ownLines('billing: checkout completed for an owner linked to another customer; not relinked (operator action)', first.user.id);
    expect(warned.map((l) => [l.level, l.owner, l.session])).toEqual([[40, { type: 'user', id: first.user.id }, second]]);
  });

  it('a trialing subscription refuses a second checkout as an active one does', async () => {
    const { user } = await subscribed('trialing');
    const res = await gw.post('/api/v1/billing/checkout', { price: 'price_pro_monthly' }, { headers: bearer(user.access) });
    expect([res.status, res.json.error, res.json.code]).toEqual([409, 'Abonnement déjà actif', 'subscription_already_active']);
  });

  it('logs and audits each plan it sets with the owner, the plan before and the event; an event that sets none, nothing', async () => {
    const { user, sub, completed } = await subscribed('active');
    // Then an event that leaves the subscription as it was: the plan is the one the user has, nothing set.
    const unchanged = about('customer.subscription.updated', sub);
    expect([(await send(unchanged)).status, outcome(unchanged.id)]).toEqual([200, 'applied']);
    const lines = ownLines('billing: plan set', user.id);
    expect(lines.map((l) => [l.level, l.owner, l.plan, l.previous, l.event_id])).toEqual([[30, { type: 'user', id: user.id }, 'premium', 'free', completed.id]]);
    expect(await sql("SELECT data->>'event_id' AS event FROM audit_events WHERE type = 'billing.plan_changed' AND user_id = $1", [user.id])).toEqual([{ event: completed.id }]);
  });

  it('an event that ends the plan is refused at once on this instance, its NOTIFY late', async () => {
    const { user, sub } = await subscribed('active');
    expect(await guarded(user)).toBe(200);
    held = holdNotifications(gw);
    stripe.setSubscription({ ...sub, status: 'canceled' });
    expect((await send(about('customer.subscription.deleted', sub))).status).toBe(200);
    expect(await guarded(user)).toBe(403);
  });

  it('a grace\'s end is refused at once on the instance that ended it, its NOTIFY late', async () => {
    const { user, sub } = await subscribed('past_due', ['price_pro_monthly']);
    expect([await plan(user.id), await guarded(user)]).toEqual(['pro', 200]);
    held = holdNotifications(gw);
    // Past due for eight days (the grace is seven): the next pass, within 100 ms, ends it. The
    // clock stays, so that the user's access token does too.
    await sql("UPDATE billing_subscriptions SET past_due_since = now() - interval '8 days' WHERE stripe_subscription_id = $1", [sub.id]);
    await eventually(async () => (await plan(user.id)) === 'free', 5000);
    expect(await guarded(user)).toBe(403);
  });

  it('an owner deleted while its event waits for the owner\'s lock: the event is received, nothing written for it', async () => {
    const { user, sub } = await subscribed('active');
    stripe.setSubscription({ ...sub, prices: ['price_pro_monthly'] });
    const lock = await holdRows('SELECT id FROM users WHERE id = $1 FOR UPDATE', [user.id], setup.db.url);
    const event = about('customer.subscription.updated', sub);
    const answer = send(event);
    await lock.waiters(1);
    await lock.run('DELETE FROM users WHERE id = $1', [user.id]);
    await lock.release();
    expect((await answer).json).toEqual({ received: true });
    expect(await sql("SELECT count(*)::int AS n FROM audit_events WHERE type = 'billing.plan_changed' AND data->>'event_id' = $1", [event.id])).toEqual([{ n: 0 }]);
    expect(ownLines('billing: plan set', user.id).map((l) => l.event_id)).not.toContain(event.id);
  });
});
