// Issue 53, part 1 (CONTRACT §23): plans that follow payment, for users. Two instances run
// docs/billing.md's example against a local fake of Stripe; webhooks are signed with the `stripe`
// package's test helper. Checkout and portal, the signed webhook applied once (replays, two
// instances at once), the subscription's state fetched from Stripe on every event (out of order),
// the plan from all subscriptions with the past_due grace, and Stripe failures retried.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import {
  ADMIN_KEY, bearer, closeSql, describeWithServices, eventually, everywhereWithin, makeUser, ownRedisPrefix, sql as runSql, startTestGateway, testClock, testConfig,
  type TestGateway, type TestUser,
} from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { signedEvent, startBillingSetup, startStripeFake, type BillingSetup, type FakeSubscription, type StripeFake } from '../helpers/stripeFake.js';

const SECRET = 'whsec_dGVzdC1zZWNyZXQtb2YtdGhlLWVuZHBvaW50';
const WEBHOOK = '/api/v1/billing/stripe/webhook';
const GUARDED = '/api/v1/forecasts';

describeWithServices('plans that follow payment (CONTRACT §23)', () => {
  let a: TestGateway;
  let b: TestGateway;
  let stripe: StripeFake;
  let setup: BillingSetup;
  const clock = testClock();
  const sql = <T = Record<string, unknown>>(text: string, params?: unknown[]) => setup.db.sql<T>(text, params);

  beforeAll(async () => {
    setup = await startBillingSetup(SECRET, 2, { clock });
    stripe = setup.stripe;
    [a, b] = setup.gateways as [TestGateway, TestGateway];
  });
  afterAll(async () => {
    await setup?.close();
    await closeSql();
  });

  const send = (gw: TestGateway, event: { body: string; signature?: string }) =>
    gw.request('POST', WEBHOOK, { body: event.body, headers: { 'content-type': 'application/json', ...(event.signature ? { 'stripe-signature': event.signature } : {}) } });
  const subscriptionEvent = (type: string, sub: FakeSubscription, options: { id?: string; livemode?: boolean } = {}) =>
    signedEvent(SECRET, `customer.subscription.${type}`, { id: sub.id, object: 'subscription', customer: sub.customer, status: 'active' }, options);
  const planOf = async (id: number) => (await sql<{ plan: string; mirrored: string }>(
    'SELECT u.plan, s.plan AS mirrored FROM users u JOIN subscriptions s ON s.user_id = u.id WHERE u.id = $1', [id]))[0];
  const auditOf = (id: number) => sql<{ actor: string; data: Record<string, unknown> }>("SELECT actor, data FROM audit_events WHERE user_id = $1 AND type = 'billing.plan_changed' ORDER BY id", [id]);

  /** A user who went through checkout on `a` for `price`, its session completed with `sub` (set at the fake first). */
  async function subscribed(sub: Omit<FakeSubscription, 'id' | 'customer'>, price = 'price_premium_monthly'): Promise<{ user: TestUser; sub: FakeSubscription; eventId: string }> {
    const user = await makeUser(a);
    const res = await a.post('/api/v1/billing/checkout', { price }, { headers: bearer(user.access) });
    expect(res.status, res.text).toBe(200);
    const session = /\/c\/pay\/(cs_test_\w+)$/.exec(res.json.url as string)![1]!;
    const full = { ...sub, id: `sub_${user.id}_${Date.now()}`, customer: `cus_${user.id}_${Date.now()}` };
    stripe.setSubscription(full);
    const completed = signedEvent(SECRET, 'checkout.session.completed', { id: session, object: 'checkout.session', customer: full.customer, subscription: full.id });
    expect((await send(a, completed)).status).toBe(200);
    return { user, sub: full, eventId: completed.id };
  }

  it('checkout, then the completed session links the customer: premium on the other instance within a second, guard passing', async () => {
    const user = await makeUser(a);
    expect((await b.get(GUARDED, { headers: bearer(user.access) })).status).toBe(403);
    const res = await a.post('/api/v1/billing/checkout', { price: 'price_premium_monthly' }, { headers: bearer(user.access) });
    expect(res.status, res.text).toBe(200);
    // The session's page, as the fake serves it (Stripe's is on checkout.stripe.com): the URL is Stripe's, passed on.
    expect(res.json.url).toMatch(new RegExp(`^${stripe.url}/c/pay/cs_test_[0-9a-f]+$`));
    const call = stripe.calls.filter((c) => c.path === '/v1/checkout/sessions').at(-1)!;
    expect(call.authorization).toBe('Bearer rk_test_fake');
    expect(call.form).toMatchObject({
      mode: 'subscription', 'line_items[0][price]': 'price_premium_monthly', client_reference_id: `user:${user.id}`,
      'metadata[owner_type]': 'user', 'metadata[owner_id]': String(user.id), 'subscription_data[metadata][owner_id]': String(user.id),
      success_url: 'https://app.example.com/billing?done=1', cancel_url: 'https://app.example.com/billing',
    });
    expect(call.form.customer).toBeUndefined();
    const session = /cs_test_\w+$/.exec(res.json.url as string)![0];
    const sub: FakeSubscription = { id: `sub_first_${user.id}`, customer: `cus_first_${user.id}`, status: 'active', prices: ['price_premium_monthly'] };
    stripe.setSubscription(sub);
    const event = signedEvent(SECRET, 'checkout.session.completed', { id: session, object: 'checkout.session', customer: sub.customer, subscription: sub.id, client_reference_id: `user:${user.id}` });
    expect((await send(a, event)).json).toEqual({ received: true });
    await everywhereWithin([b], async (gw) => (await gw.get(GUARDED, { headers: bearer(user.access) })).status === 200, 1000);
    expect(await planOf(user.id)).toEqual({ plan: 'premium', mirrored: 'premium' });
    expect(await sql('SELECT owner_type, owner_id::int AS owner_id FROM billing_customers WHERE stripe_customer_id = $1', [sub.customer])).toEqual([{ owner_type: 'user', owner_id: user.id }]);
    expect(await auditOf(user.id)).toEqual([{ actor: 'billing', data: { event_id: event.id, plan: 'premium', previous_plan: 'free' } }]);
    expect(stripe.calls.some((c) => c.method === 'GET' && c.path === `/v1/subscriptions/${sub.id}`)).toBe(true);

    // Subscribed: a second checkout is refused; the portal opens on the linked customer.
    const again = await b.post('/api/v1/billing/checkout', { price: 'price_pro_monthly' }, { headers: bearer(user.access) });
    expect([again.status, again.json.error, again.json.code]).toEqual([409, 'Abonnement déjà actif', 'subscription_already_active']);
    const portal = await b.post('/api/v1/billing/portal', {}, { headers: bearer(user.access) });
    expect(portal.status, portal.text).toBe(200);
    expect(portal.json.url).toMatch(/^https:\/\/billing\.stripe\.com\/p\/session\//);
    expect(stripe.calls.at(-1)!.form).toMatchObject({ customer: sub.customer, return_url: 'https://app.example.com/billing' });

    // A replay changes nothing, even though the subscription has changed at Stripe meanwhile.
    stripe.setSubscription({ ...sub, status: 'canceled' });
    expect((await send(b, event)).status).toBe(200);
    expect((await planOf(user.id))!.plan).toBe('premium');
    expect(await sql('SELECT count(*)::int AS n FROM billing_events WHERE event_id = $1', [event.id])).toEqual([{ n: 1 }]);

    // Deleted: free again, and the next checkout reuses the customer.
    expect((await send(a, subscriptionEvent('deleted', sub))).status).toBe(200);
    await everywhereWithin([a, b], async (gw) => (await gw.get(GUARDED, { headers: bearer(user.access) })).status === 403, 1000);
    expect(await planOf(user.id)).toEqual({ plan: 'free', mirrored: 'free' });
    expect((await a.post('/api/v1/billing/checkout', { price: 'price_pro_monthly' }, { headers: bearer(user.access) })).status).toBe(200);
    expect(stripe.calls.at(-1)!.form.customer).toBe(sub.customer);
  });

  it('checkout and portal: bearer only, prices known, no customer no portal, Stripe down is a 503', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const key = (await a.post('/api/v1/user/api-token', {}, { headers: bearer(user.access) })).json.api_token as string;
    for (const path of ['/api/v1/billing/checkout', '/api/v1/billing/portal']) {
      const res = await a.post(path, { price: 'price_premium_monthly' }, { headers: { 'x-api-key': key } });
      expect([res.status, res.json.error, res.json.code]).toEqual([401, 'Token invalide ou expiré', 'api_key_not_accepted']);
    }
    const unknown = await a.post('/api/v1/billing/checkout', { price: 'price_gold' }, { headers: bearer(user.access) });
    expect([unknown.status, unknown.json.error, unknown.json.code]).toEqual([400, 'Prix inconnu', 'price_unknown']);
    const portal = await a.post('/api/v1/billing/portal', {}, { headers: bearer(user.access) });
    expect([portal.status, portal.json.error, portal.json.code]).toEqual([404, 'Aucun abonnement', 'subscription_none']);
    stripe.failNext(1);
    const down = await a.post('/api/v1/billing/checkout', { price: 'price_premium_monthly' }, { headers: bearer(user.access) });
    expect([down.status, down.json.error, down.json.code]).toEqual([503, 'Service de paiement indisponible', 'payment_unavailable']);
    expect(await sql('SELECT count(*)::int AS n FROM billing_sessions WHERE owner_id = $1', [user.id])).toEqual([{ n: 0 }]);
  });

  it('refuses a signature dated more than 300 s in the future like a stale one (CONTRACT §33); a few seconds of clock skew pass', async () => {
    const { sub } = await subscribed({ status: 'active', prices: ['price_premium_monthly'] });
    const now = Math.floor(Date.now() / 1000);
    const future = [3600, 302].map((ahead) => signedEvent(SECRET, 'customer.subscription.updated', { id: sub.id, customer: sub.customer }, { timestamp: now + ahead }));
    for (const event of future) {
      const res = await send(a, event);
      expect([res.status, res.json.error, res.json.code]).toEqual([400, 'Signature invalide', 'signature_invalid']);
    }
    expect(await sql('SELECT count(*)::int AS n FROM billing_events WHERE event_id = ANY($1)', [future.map((e) => e.id)])).toEqual([{ n: 0 }]);
    const skewed = signedEvent(SECRET, 'customer.subscription.updated', { id: sub.id, customer: sub.customer }, { timestamp: now + 5 });
    expect((await send(a, skewed)).status).toBe(200);
  });

  it('refuses a bad, missing or stale signature and applies nothing; ignores other modes and other types', async () => {
    const { user, sub } = await subscribed({ status: 'active', prices: ['price_premium_monthly'] });
    stripe.setSubscription({ ...sub, status: 'canceled' });
    const wrong = subscriptionEvent('updated', sub);
    const forged = { body: wrong.body, signature: signedEvent('whsec_c29tZW9uZS1lbHNl', 'x', {}).signature };
    const stale = signedEvent(SECRET, 'customer.subscription.updated', { id: sub.id, customer: sub.customer }, { timestamp: Math.floor(Date.now() / 1000) - 301 });
    const tampered = { body: wrong.body.replace('"active"', '"trialing"'), signature: wrong.signature };
    for (const event of [forged, { body: wrong.body }, stale, tampered]) {
      const res = await send(a, event);
      expect([res.status, res.json.error, res.json.code]).toEqual([400, 'Signature invalide', 'signature_invalid']);
    }
    expect(await sql('SELECT count(*)::int AS n FROM billing_events WHERE event_id IN ($1, $2)', [wrong.id, stale.id])).toEqual([{ n: 0 }]);
    // A live-mode event to a test key, and a type the gateway does not use: 200, nothing applied.
    for (const event of [subscriptionEvent('updated', sub, { livemode: true }), signedEvent(SECRET, 'invoice.paid', { id: 'in_1', customer: sub.customer })]) {
      expect((await send(b, event)).status).toBe(200);
      expect(await sql('SELECT count(*)::int AS n FROM billing_events WHERE event_id = $1', [event.id])).toEqual([{ n: 0 }]);
    }
    expect((await planOf(user.id))!.plan).toBe('premium');
  });

  it('decides by the subscription fetched from Stripe, whatever order the events come in', async () => {
    const { user, sub } = await subscribed({ status: 'trialing', prices: ['price_premium_monthly'] });
    expect((await planOf(user.id))!.plan).toBe('premium');
    // Stripe now says canceled; an older "updated" event whose payload says active arrives late.
    stripe.setSubscription({ ...sub, status: 'canceled' });
    expect((await send(a, subscriptionEvent('updated', sub))).status).toBe(200);
    expect((await planOf(user.id))!.plan).toBe('free');
    // Then the "created" event of long ago: still what Stripe says now.
    expect((await send(b, subscriptionEvent('created', sub))).status).toBe(200);
    expect((await planOf(user.id))!.plan).toBe('free');
    // Several items, an unlisted add-on first: the listed price counts; unlisted prices alone give nothing.
    stripe.setSubscription({ ...sub, status: 'active', prices: ['price_addon_seats', 'price_pro_monthly'] });
    await send(a, subscriptionEvent('updated', sub));
    expect((await planOf(user.id))!.plan).toBe('pro');
    stripe.setSubscription({ ...sub, status: 'active', prices: ['price_legacy_gold'] });
    await send(a, subscriptionEvent('updated', sub));
    expect((await planOf(user.id))!.plan).toBe('free');
  });

  it('keeps the plan through the past_due grace, and a job ends it within a minute of its end', async () => {
    const { user, sub } = await subscribed({ status: 'active', prices: ['price_pro_monthly'] });
    stripe.setSubscription({ ...sub, status: 'past_due' });
    const event = subscriptionEvent('updated', sub);
    expect((await send(a, event)).status).toBe(200);
    expect((await planOf(user.id))!.plan).toBe('pro');
    clock.advance(6 * 86_400_000);
    await new Promise((r) => setTimeout(r, 300));
    expect((await planOf(user.id))!.plan).toBe('pro');
    clock.advance(86_400_000 + 1000);
    await eventually(async () => (await planOf(user.id))!.plan === 'free', 2000);
    expect((await planOf(user.id))!.mirrored).toBe('free');
    expect((await auditOf(user.id)).at(-1)).toEqual({ actor: 'system', data: { reason: 'past_due_grace_ended', plan: 'free', previous_plan: 'pro' } });
    clock.set(new Date());
  });

  it('an operator\'s plan change on a subscribed user: 409 without override; an override holds through the next billing event of the same plan (CONTRACT §29)', async () => {
    const { user, sub } = await subscribed({ status: 'active', prices: ['price_premium_monthly'] });
    expect((await planOf(user.id))!.plan).toBe('premium');
    const admin = await buildAdminApp(a.services);
    try {
      const url = await admin.listen({ host: '127.0.0.1', port: 0 });
      const refused = await request(url, 'PUT', `/admin/v1/users/${user.id}/plan`, { headers: bearer(ADMIN_KEY), json: { plan: 'pro' } });
      expect([refused.status, refused.text]).toEqual([409, '{"error":"Plan géré par la facturation","code":"plan_managed_by_billing","billing_plan":"premium"}']);
      const put = await request(url, 'PUT', `/admin/v1/users/${user.id}/plan`, { headers: bearer(ADMIN_KEY), json: { plan: 'pro', override: true } });
      expect([put.status, put.json.plan]).toEqual([200, 'pro']);
    } finally {
      await admin.close();
    }
    expect(await planOf(user.id)).toEqual({ plan: 'pro', mirrored: 'pro' });
    // The next event of the subscription, unchanged at Stripe: billing computes premium still, and the override holds.
    const event = subscriptionEvent('updated', sub);
    expect((await send(b, event)).status).toBe(200);
    expect(await planOf(user.id)).toEqual({ plan: 'pro', mirrored: 'pro' });
    expect((await auditOf(user.id)).at(-1)!.data.event_id).not.toBe(event.id);
  });

  it('a Stripe failure answers 500 and keeps nothing; the retry applies it', async () => {
    const { user, sub } = await subscribed({ status: 'active', prices: ['price_premium_monthly'] });
    stripe.setSubscription({ ...sub, prices: ['price_pro_monthly'] });
    const event = subscriptionEvent('updated', sub);
    stripe.failNext(1);
    const failed = await send(a, event);
    expect([failed.status, failed.json.error, failed.json.code]).toEqual([500, 'Événement non appliqué, réessayez plus tard', 'stripe_event_failed']);
    expect(await sql('SELECT count(*)::int AS n FROM billing_events WHERE event_id = $1', [event.id])).toEqual([{ n: 0 }]);
    expect((await planOf(user.id))!.plan).toBe('premium');
    expect((await send(b, event)).status).toBe(200);
    expect((await planOf(user.id))!.plan).toBe('pro');
  });

  it('the same event delivered to both instances at once is applied once', async () => {
    const { user, sub } = await subscribed({ status: 'active', prices: ['price_premium_monthly'] });
    stripe.setSubscription({ ...sub, prices: ['price_pro_monthly'] });
    stripe.delaySubscriptions(200);
    try {
      const event = subscriptionEvent('updated', sub);
      const answers = await Promise.all([send(a, event), send(b, event), send(a, event), send(b, event)]);
      expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200]);
      expect(await sql('SELECT count(*)::int AS n FROM billing_events WHERE event_id = $1', [event.id])).toEqual([{ n: 1 }]);
      expect((await auditOf(user.id)).filter((row) => row.data.event_id === event.id)).toHaveLength(1);
      expect((await planOf(user.id))!.plan).toBe('pro');
    } finally {
      stripe.delaySubscriptions(0);
    }
  });

  it('links only sessions the gateway created, and never relinks a linked user', async () => {
    const stranger = await makeUser(a);
    const foreign: FakeSubscription = { id: `sub_foreign_${stranger.id}`, customer: `cus_foreign_${stranger.id}`, status: 'active', prices: ['price_pro_monthly'] };
    stripe.setSubscription(foreign);
    const forgedSession = signedEvent(SECRET, 'checkout.session.completed', {
      id: 'cs_test_not_ours', customer: foreign.customer, subscription: foreign.id, client_reference_id: `user:${stranger.id}`,
    });
    expect((await send(a, forgedSession)).status).toBe(200);
    expect((await planOf(stranger.id))!.plan).toBe('free');
    expect(await sql('SELECT count(*)::int AS n FROM billing_customers WHERE stripe_customer_id = $1', [foreign.customer])).toEqual([{ n: 0 }]);

    const { user, sub } = await subscribed({ status: 'canceled', prices: ['price_premium_monthly'] });
    const res = await a.post('/api/v1/billing/checkout', { price: 'price_pro_monthly' }, { headers: bearer(user.access) });
    const session = /cs_test_\w+$/.exec(res.json.url as string)![0];
    const other: FakeSubscription = { id: `sub_other_${user.id}`, customer: `cus_other_${user.id}`, status: 'active', prices: ['price_pro_monthly'] };
    stripe.setSubscription(other);
    expect((await send(a, signedEvent(SECRET, 'checkout.session.completed', { id: session, customer: other.customer, subscription: other.id }))).status).toBe(200);
    expect(await sql('SELECT stripe_customer_id FROM billing_customers WHERE owner_id = $1', [user.id])).toEqual([{ stripe_customer_id: sub.customer }]);
    expect((await planOf(user.id))!.plan).toBe('free');
  });
  // Issue 53's gaps: a metered item beside a base fee, a mid-period price change, and the whole
  // trial → active → past_due → canceled life delivered newest first; the plan is what the guarded
  // route's upstream sees (x-user-plan) on the other instance.
  const seenPlan = async (gw: TestGateway, user: TestUser) => {
    const res = await gw.get(GUARDED, { headers: bearer(user.access) });
    return res.status === 200 ? String((res.json.headers as Record<string, string>)['x-user-plan']) : `status ${res.status}`;
  };

  it('a metered item beside a base fee and a mid-period price change: the plan follows on the other instance', async () => {
    const { user, sub } = await subscribed({ status: 'active', prices: ['price_metered_calls', 'price_premium_monthly'] });
    await everywhereWithin([b], async (gw) => (await seenPlan(gw, user)) === 'premium', 1000);
    // The customer switches premium → pro in the portal mid-period: Stripe sends an update.
    stripe.setSubscription({ ...sub, prices: ['price_metered_calls', 'price_pro_monthly'] });
    expect((await send(a, subscriptionEvent('updated', sub))).status).toBe(200);
    await everywhereWithin([b], async (gw) => (await seenPlan(gw, user)) === 'pro', 1000);
    // Back down to premium: the plan follows down as well.
    stripe.setSubscription({ ...sub, prices: ['price_premium_monthly', 'price_metered_calls'] });
    expect((await send(b, subscriptionEvent('updated', sub))).status).toBe(200);
    await everywhereWithin([a, b], async (gw) => (await seenPlan(gw, user)) === 'premium', 1000);
  });

  it('trial, active, past_due, canceled delivered newest first: Stripe\'s current state wins at each step', async () => {
    const { user, sub } = await subscribed({ status: 'trialing', prices: ['price_pro_monthly'] });
    // Trialing counts as paid.
    await everywhereWithin([b], async (gw) => (await seenPlan(gw, user)) === 'pro', 1000);
    // Stripe's subscription is now past_due: within the grace (docs: pastDueGraceDays) it keeps pro,
    // whatever older event (created, trial-to-active update) brings the news.
    stripe.setSubscription({ ...sub, status: 'past_due' });
    for (const type of ['updated', 'created']) {
      expect((await send(b, subscriptionEvent(type, sub))).status).toBe(200);
      expect((await planOf(user.id))!.plan).toBe('pro');
    }
    // Now canceled: the deleted event first, then the older ones late; free throughout.
    stripe.setSubscription({ ...sub, status: 'canceled' });
    for (const type of ['deleted', 'updated', 'updated', 'created']) {
      expect((await send(a, subscriptionEvent(type, sub))).status).toBe(200);
      expect((await planOf(user.id))!.plan).toBe('free');
    }
    await everywhereWithin([a, b], async (gw) => (await seenPlan(gw, user)) === 'status 403', 1000);
  });
});

describeWithServices('rolling the webhook secret, outside the auth rate limit', () => {
  let gw: TestGateway;
  let stripe: StripeFake;
  const OLD = 'whsec_b2xkLXNlY3JldC1iZWluZy1yb2xsZWQ';
  afterAll(async () => {
    await gw?.close();
    await stripe?.close();
    await closeSql();
  });

  it('accepts events signed with any listed secret, however many come from one address', async () => {
    stripe = await startStripeFake();
    gw = await startTestGateway(testConfig({
      auth: { rateLimit: { max: 1, window: '1m' } },
      storage: { redisKeyPrefix: ownRedisPrefix('billing') },
      billing: {
        stripe: {
          secretKey: 'sk_test_fake', webhookSecrets: [SECRET, OLD], apiBase: stripe.url, prices: { price_premium_monthly: 'premium' },
          successUrl: 'https://app.example.com/billing?done=1', cancelUrl: 'https://app.example.com/billing',
        },
      },
    }));
    stripe.setSubscription({ id: 'sub_nobody', customer: 'cus_nobody', status: 'active', prices: [] });
    for (const secret of [OLD, SECRET, OLD]) {
      const event = signedEvent(secret, 'customer.subscription.updated', { id: 'sub_nobody', customer: 'cus_nobody' });
      expect((await gw.request('POST', WEBHOOK, { body: event.body, headers: { 'content-type': 'application/json', 'stripe-signature': event.signature } })).status).toBe(200);
      expect(await runSql('SELECT count(*)::int AS n FROM billing_events WHERE event_id = $1', [event.id])).toEqual([{ n: 1 }]);
    }
    // The auth endpoints' budget of one is spent, and the webhook never counted against it.
    expect((await gw.post('/api/v1/auth/login', { email: 'a@example.test', password: 'x' })).status).toBe(401);
    expect((await gw.post('/api/v1/auth/login', { email: 'a@example.test', password: 'x' })).status).toBe(429);
    expect((await gw.request('POST', WEBHOOK, { body: '{}', headers: { 'content-type': 'application/json' } })).status).toBe(400);
  });

});
