// Issue 71 (CONTRACT §29): a Stripe-managed plan is not silently overwritten. Two instances run
// docs/billing.md's example against the local Stripe fake: the operator's change goes to one
// instance's admin API, Stripe's events to the other. One table: each subscription status ×
// override or not × a later billing event computing the same plan or another, with the plan the
// guarded route's upstream sees on both instances, the 409 byte for byte and the audit rows.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import {
  ADMIN_KEY, bearer, closeSql, describeWithServices, eventually, everywhereWithin, makeUser,
  type TestGateway, type TestUser,
} from '../helpers/gateway.js';
import { request, type HttpResponse } from '../helpers/http.js';
import { signedEvent, startBillingSetup, type BillingSetup, type FakeSubscription, type StripeFake } from '../helpers/stripeFake.js';

const SECRET = 'whsec_b3ZlcnJpZGUtdGVzdC1zZWNyZXQ';
const WEBHOOK = '/api/v1/billing/stripe/webhook';
const GUARDED = '/api/v1/forecasts';
const DAY_MS = 86_400_000;
const MANAGED_409 = '{"error":"Plan géré par la facturation","code":"plan_managed_by_billing","billing_plan":"premium"}';

type Status = FakeSubscription['status'] | 'past_due_after_grace';
/** Whether billing manages the plan in that status (§23: active, trialing, past_due within its grace). */
const MANAGED: Record<Status, boolean> = {
  active: true, trialing: true, past_due: true, past_due_after_grace: false, canceled: false, unpaid: false, incomplete: false,
  incomplete_expired: false, paused: false,
};
const STATUSES: Status[] = ['active', 'trialing', 'past_due', 'past_due_after_grace', 'canceled', 'unpaid', 'incomplete'];

describeWithServices('an operator\'s plan change on a Stripe-billed owner (CONTRACT §29)', () => {
  let a: TestGateway;
  let b: TestGateway;
  let stripe: StripeFake;
  let setup: BillingSetup;
  let adminUrl: string;
  let close: () => Promise<void>;
  const sql = <T = Record<string, unknown>>(text: string, params?: unknown[]) => setup.db.sql<T>(text, params);

  beforeAll(async () => {
    setup = await startBillingSetup(SECRET, 2);
    stripe = setup.stripe;
    [a, b] = setup.gateways as [TestGateway, TestGateway];
    const admin = await buildAdminApp(a.services);
    adminUrl = await admin.listen({ host: '127.0.0.1', port: 0 });
    close = () => admin.close();
  });
  afterAll(async () => {
    await close?.();
    await setup?.close();
    await closeSql();
  });

  const send = async (gw: TestGateway, type: string, sub: FakeSubscription) => {
    const event = signedEvent(SECRET, type, { id: sub.id, object: 'subscription', customer: sub.customer, status: sub.status });
    const res = await gw.request('POST', WEBHOOK, { body: event.body, headers: { 'content-type': 'application/json', 'stripe-signature': event.signature } });
    expect(res.status, res.text).toBe(200);
  };
  const putPlan = (user: TestUser, body: Record<string, unknown>): Promise<HttpResponse> =>
    request(adminUrl, 'PUT', `/admin/v1/users/${user.id}/plan`, { headers: bearer(ADMIN_KEY), json: body });
  const planOf = async (id: number) => (await sql<{ plan: string }>('SELECT plan FROM users WHERE id = $1', [id]))[0]!.plan;
  const overrides = (id: number) => sql("SELECT billing_plan FROM billing_plan_overrides WHERE owner_type = 'user' AND owner_id = $1", [id]);
  const operatorAudit = (id: number) => sql<{ data: Record<string, unknown> }>("SELECT data FROM audit_events WHERE user_id = $1 AND type = 'admin.plan_changed' ORDER BY id", [id]);
  /** The plan the guarded route's upstream is told, on both instances within a second (free is refused there). */
  const seenEverywhere = (user: TestUser, plan: string) => everywhereWithin([a, b], async (gw) => {
    const res = await gw.get(GUARDED, { headers: bearer(user.access) });
    return plan === 'free' ? res.status === 403 : res.status === 200 && (res.json.headers as Record<string, string>)['x-user-plan'] === plan;
  }, 1000);

  /** A user who paid premium through checkout on `a`, its subscription then in `status` at Stripe (applied on `b`). */
  async function billed(status: Status): Promise<{ user: TestUser; sub: FakeSubscription }> {
    const user = await makeUser(a);
    const res = await a.post('/api/v1/billing/checkout', { price: 'price_premium_monthly' }, { headers: bearer(user.access) });
    const session = /cs_test_\w+$/.exec(res.json.url as string)![0];
    const sub: FakeSubscription = { id: `sub_o_${user.id}`, customer: `cus_o_${user.id}`, status: 'active', prices: ['price_premium_monthly'] };
    stripe.setSubscription(sub);
    const completed = signedEvent(SECRET, 'checkout.session.completed', { id: session, object: 'checkout.session', customer: sub.customer, subscription: sub.id });
    expect((await a.request('POST', WEBHOOK, { body: completed.body, headers: { 'content-type': 'application/json', 'stripe-signature': completed.signature } })).status).toBe(200);
    expect(await planOf(user.id)).toBe('premium');
    const now: FakeSubscription = { ...sub, status: status === 'past_due_after_grace' ? 'past_due' : status };
    stripe.setSubscription(now);
    await send(b, 'customer.subscription.updated', now);
    if (status === 'past_due_after_grace') {
      // Its grace ran out: the minutely pass brings billing's plan (free) on its own.
      await sql('UPDATE billing_subscriptions SET past_due_since = past_due_since - $2::interval WHERE stripe_subscription_id = $1', [sub.id, '8 days']);
      await eventually(async () => (await planOf(user.id)) === 'free', 3000);
    }
    expect(await planOf(user.id)).toBe(MANAGED[status] ? 'premium' : 'free');
    return { user, sub: now };
  }

  describe.each(STATUSES)('a subscription %s', (status) => {
    const managed = MANAGED[status];
    it.each([
      [false, 'same'], [false, 'other'], [true, 'same'], [true, 'other'],
    ] as const)('override %s, then a billing event computing the %s plan', async (override, later) => {
      const { user, sub } = await billed(status);
      const put = await putPlan(user, { plan: 'pro', ...(override ? { override: true } : {}) });
      if (managed && !override) {
        expect([put.status, put.text]).toEqual([409, MANAGED_409]);
        expect(await operatorAudit(user.id)).toEqual([]);
      } else {
        expect([put.status, put.json.plan]).toEqual([200, 'pro']);
        expect((await operatorAudit(user.id)).map((r) => r.data)).toEqual([managed ? { plan: 'pro', override: true } : { plan: 'pro' }]);
      }
      const afterPut = managed && !override ? 'premium' : 'pro';
      await seenEverywhere(user, afterPut);
      expect(await overrides(user.id)).toEqual(managed && override ? [{ billing_plan: 'premium' }] : []);

      if (later === 'same') {
        // A renewal, an invoice, a payment retry: the subscription as it was, read back from Stripe.
        await send(b, 'customer.subscription.updated', sub);
        await send(a, 'customer.subscription.updated', sub);
      } else {
        // Billing computes another plan: a managed subscription ends; one that was not comes back active.
        const next: FakeSubscription = { ...sub, status: managed ? 'canceled' : 'active' };
        stripe.setSubscription(next);
        await send(b, managed ? 'customer.subscription.deleted' : 'customer.subscription.updated', next);
      }
      const expected = later === 'same' ? afterPut : managed ? 'free' : 'premium';
      await seenEverywhere(user, expected);
      expect(await planOf(user.id)).toBe(expected);
      expect(await overrides(user.id)).toEqual(later === 'same' && managed && override ? [{ billing_plan: 'premium' }] : []);
    });
  });

  it('setting the plan billing computes ends an override: another plan is refused again until the next override', async () => {
    const { user, sub } = await billed('active');
    expect((await putPlan(user, { plan: 'pro', override: true })).status).toBe(200);
    const back = await putPlan(user, { plan: 'premium' });
    expect([back.status, back.json.plan]).toEqual([200, 'premium']);
    expect(await overrides(user.id)).toEqual([]);
    expect((await operatorAudit(user.id)).map((r) => r.data)).toEqual([{ plan: 'pro', override: true }, { plan: 'premium' }]);
    expect((await putPlan(user, { plan: 'pro' })).text).toBe(MANAGED_409);
    // override must be a boolean.
    expect((await putPlan(user, { plan: 'pro', override: 'yes' })).text).toBe('{"error":"Requête invalide","code":"bad_request"}');
    // A plan change at Stripe (premium → pro) while an override of free stands: billing's pro applies, the override ends.
    expect((await putPlan(user, { plan: 'free', override: true })).status).toBe(200);
    stripe.setSubscription({ ...sub, prices: ['price_pro_monthly'] });
    await send(b, 'customer.subscription.updated', sub);
    await seenEverywhere(user, 'pro');
    expect(await overrides(user.id)).toEqual([]);
  });

  it('an override and a billing event computing another plan at once, on two instances: never an override standing against a plan billing no longer computes', async () => {
    stripe.delaySubscriptions(150);
    try {
      for (let round = 0; round < 4; round++) {
        const { user, sub } = await billed('active');
        stripe.setSubscription({ ...sub, prices: ['price_pro_monthly'] });
        const [put] = await Promise.all([putPlan(user, { plan: 'free', override: true }), send(b, 'customer.subscription.updated', sub)]);
        expect(put.status).toBe(200);
        // Either the override came first (billing's pro then ended it) or the event did (the override stands against pro).
        const held = await overrides(user.id);
        expect([await planOf(user.id), held]).toEqual(held.length ? ['free', [{ billing_plan: 'pro' }]] : ['pro', []]);
        await seenEverywhere(user, held.length ? 'free' : 'pro');
      }
    } finally {
      stripe.delaySubscriptions(0);
    }
  });

  it('an override holds through the past_due grace and ends with it', async () => {
    const { user, sub } = await billed('active');
    expect((await putPlan(user, { plan: 'pro', override: true })).status).toBe(200);
    stripe.setSubscription({ ...sub, status: 'past_due' });
    await send(a, 'customer.subscription.updated', { ...sub, status: 'past_due' });
    await send(b, 'invoice.payment_failed', sub);
    expect(await planOf(user.id)).toBe('pro');
    await sql('UPDATE billing_subscriptions SET past_due_since = now() - $2::interval WHERE stripe_subscription_id = $1', [sub.id, `${7 * DAY_MS + 1000} milliseconds`]);
    await eventually(async () => (await planOf(user.id)) === 'free', 3000);
    expect(await overrides(user.id)).toEqual([]);
    expect((await sql<{ actor: string; data: Record<string, unknown> }>(
      "SELECT actor, data FROM audit_events WHERE user_id = $1 AND type = 'billing.plan_changed' ORDER BY id DESC LIMIT 1", [user.id]))[0])
      .toEqual({ actor: 'system', data: { reason: 'past_due_grace_ended', plan: 'free', previous_plan: 'pro' } });
  });
});
