// What the portal's pages need of billing (CONTRACT §30), through the HTTP API, on two instances
// running docs/billing.md's and docs/organizations.md's examples with a portal block: GET
// /api/v1/plans without a credential; GET /api/v1/billing/subscription (§29's billing object less
// customer_id) for a user and for an organization's owner only; `"return": "portal"` sending
// Stripe back to the portal's billing page, and 400 where no portal is enabled.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { StorageUnavailableError } from '../../src/errors/index.js';
import { docsExample } from '../helpers/docs.js';
import { bearer, closeSql, describeWithServices, loggedLines, makeUser, sql, startTestGateway, testConfigFromYaml, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { signedEvent, startStripeFake, type StripeFake } from '../helpers/stripeFake.js';
import { createOrg, verifiedUser } from '../orgs/helpers.js';

const SECRET = 'whsec_dGVzdC1zZWNyZXQtb2YtdGhlLWVuZHBvaW50';
const PORTAL = 'portal:\n  enabled: true\n  publicUrl: https://portal.example.com\n  product: { name: Acme API }\n';
const BILLING_PAGE = 'https://portal.example.com/portal/billing';
const BAD_REQUEST = '{"error":"Requête invalide","code":"bad_request"}';

describeWithServices('billing for the portal (CONTRACT §30)', () => {
  let a: TestGateway;
  let b: TestGateway;
  let bare: TestGateway;
  let stripe: StripeFake;
  let app: EchoUpstream;
  let smtp: SmtpCatcher;

  beforeAll(async () => {
    [stripe, app, smtp] = await Promise.all([startStripeFake(), startEchoUpstream(), startSmtpCatcher()]);
    const env = { STRIPE_SECRET_KEY: 'rk_test_fake', STRIPE_WEBHOOK_SECRET: SECRET, STRIPE_API_BASE: stripe.url, APP_URL: app.url, SMTP_URL: smtp.url };
    const examples = `${docsExample('billing', 'billing')}${docsExample('organizations', 'organizations')}errors: { codes: true }\n`;
    const config = testConfigFromYaml(`${examples}${PORTAL}`, env);
    [a, b] = await Promise.all([startTestGateway(config), startTestGateway(config)]);
    bare = await startTestGateway(testConfigFromYaml(examples, env));
  });
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close(), bare?.close()]);
    await Promise.all([stripe?.close(), app?.close(), smtp?.close()]);
    await closeSql();
  });

  const send = (gw: TestGateway, event: { body: string; signature?: string }) =>
    gw.request('POST', '/api/v1/billing/stripe/webhook', { body: event.body, headers: { 'content-type': 'application/json', 'stripe-signature': event.signature! } });
  const formOfLast = (path: string) => stripe.calls.filter((c) => c.path === path).at(-1)!.form;

  /** `owner` (with `headers`) checks out `price` with the portal's return, and Stripe completes it with a subscription in `status`. */
  async function subscribe(headers: Record<string, string>, status: 'active' | 'past_due', tag: string): Promise<string> {
    const res = await a.post('/api/v1/billing/checkout', { price: 'price_premium_monthly', return: 'portal' }, { headers });
    expect(res.status, res.text).toBe(200);
    expect(formOfLast('/v1/checkout/sessions')).toMatchObject({ success_url: BILLING_PAGE, cancel_url: BILLING_PAGE });
    const session = /cs_test_\w+$/.exec(res.json.url as string)![0];
    const sub = { id: `sub_${tag}_${Date.now()}`, customer: `cus_${tag}_${Date.now()}`, status, prices: ['price_premium_monthly'] };
    stripe.setSubscription(sub);
    expect((await send(a, signedEvent(SECRET, 'checkout.session.completed', { id: session, object: 'checkout.session', customer: sub.customer, subscription: sub.id }))).status).toBe(200);
    return sub.id;
  }
  const subscription = (gw: TestGateway, headers: Record<string, string>) => gw.get('/api/v1/billing/subscription', { headers });
  const stored = async (id: string) => (await sql<{ end: Date; since: Date | null }>(
    'SELECT current_period_end AS end, past_due_since AS since FROM billing_subscriptions WHERE stripe_subscription_id = $1', [id]))[0]!;

  it('lists every plan the configuration knows, its limits and prices, to anyone', async () => {
    const res = await b.get('/api/v1/plans');
    expect(res.status).toBe(200);
    expect(res.json).toEqual({
      plans: [
        { name: 'free', limits: { daily: 10, monthly: null, perMinute: null }, prices: [] },
        { name: 'premium', limits: { daily: 10000, monthly: null, perMinute: 600 }, prices: ['price_premium_monthly'] },
        { name: 'pro', limits: { daily: null, monthly: null, perMinute: null }, prices: ['price_pro_monthly'] },
      ],
    });
  });

  it('shows a user their subscription, where their plan comes from, and no customer id', async () => {
    const user = await makeUser(a);
    expect((await subscription(b, bearer(user.access))).json).toEqual({ subscriptions: [], plan_source: 'default', grace_ends_at: null });
    const id = await subscribe(bearer(user.access), 'active', 'user');
    const res = await subscription(b, bearer(user.access));
    expect(res.status, res.text).toBe(200);
    expect(res.json).toEqual({
      subscriptions: [{
        id, status: 'active', price: 'price_premium_monthly', plan: 'premium', current_period_end: (await stored(id)).end.toISOString(),
        cancel_at_period_end: false, past_due_since: null,
      }],
      plan_source: 'billing', grace_ends_at: null,
    });
    expect(res.text).not.toContain('cus_');

    // The Customer Portal comes back to the portal's billing page too; without `return`, to cancelUrl as before.
    expect((await b.post('/api/v1/billing/portal', { return: 'portal' }, { headers: bearer(user.access) })).status).toBe(200);
    expect(formOfLast('/v1/billing_portal/sessions')).toMatchObject({ return_url: BILLING_PAGE });
    expect((await b.post('/api/v1/billing/portal', {}, { headers: bearer(user.access) })).status).toBe(200);
    expect(formOfLast('/v1/billing_portal/sessions')).toMatchObject({ return_url: 'https://app.example.com/billing' });
    // Any other `return` is refused, before Stripe is asked.
    const calls = stripe.calls.length;
    for (const body of [{ return: 'app' }, { return: true }]) {
      const refused = await a.post('/api/v1/billing/portal', body, { headers: bearer(user.access) });
      expect([refused.status, refused.text]).toEqual([400, BAD_REQUEST]);
    }
    expect(stripe.calls).toHaveLength(calls);
    // An operator's plan, with nothing from billing: `operator`.
    const other = await makeUser(a, { plan: 'pro' });
    expect((await subscription(a, bearer(other.access))).json).toEqual({ subscriptions: [], plan_source: 'operator', grace_ends_at: null });
    expect((await subscription(a, {})).status).toBe(401);
  });

  it('an organization\'s, for its owner only; a past_due one says when its grace ends', async () => {
    const owner = await verifiedUser(a, smtp);
    const org = await createOrg(a, owner, 'Billed');
    const admin: TestUser = await makeUser(a);
    await sql('INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, \'admin\')', [org, admin.id]);
    const acting = (u: TestUser) => ({ ...bearer(u.access), 'Gateway-Org': String(org) });
    const id = await subscribe(acting(owner), 'past_due', 'org');
    const { since, end } = await stored(id);
    const res = await subscription(b, acting(owner));
    expect(res.json).toEqual({
      subscriptions: [{
        id, status: 'past_due', price: 'price_premium_monthly', plan: 'premium', current_period_end: end.toISOString(), cancel_at_period_end: false, past_due_since: since!.toISOString(),
      }],
      plan_source: 'billing', grace_ends_at: new Date(since!.getTime() + 7 * 86_400_000).toISOString(),
    });
    const refused = await subscription(b, acting(admin));
    expect([refused.status, refused.text]).toEqual([403, '{"error":"Rôle insuffisant","code":"role_insufficient","required_roles":["owner"],"current_role":"admin"}']);
    const stranger = await makeUser(a);
    expect((await subscription(b, { ...bearer(stranger.access), 'Gateway-Org': String(org) })).text).toBe('{"error":"Organisation introuvable","code":"org_not_found"}');
    // The owner acting for themselves sees their own (none).
    expect((await subscription(b, bearer(owner.access))).json).toEqual({ subscriptions: [], plan_source: 'default', grace_ends_at: null });
  });

  it('the portal\'s return on the portal session too; any other return, or a Gateway-Org that is no id, is 400 before Stripe is asked', async () => {
    const user = await makeUser(a);
    await subscribe(bearer(user.access), 'active', 'back');
    expect((await a.post('/api/v1/billing/portal', { return: 'portal' }, { headers: bearer(user.access) })).status).toBe(200);
    expect(formOfLast('/v1/billing_portal/sessions')).toMatchObject({ return_url: BILLING_PAGE });
    const calls = stripe.calls.length;
    for (const [path, body] of [['/api/v1/billing/checkout', { price: 'price_premium_monthly', return: 'home' }], ['/api/v1/billing/portal', { return: '' }]] as const) {
      const res = await a.post(path, body, { headers: bearer(user.access) });
      expect([res.status, res.text], path).toEqual([400, BAD_REQUEST]);
    }
    for (const path of ['/api/v1/billing/checkout', '/api/v1/billing/portal']) {
      const res = await a.post(path, { price: 'price_premium_monthly' }, { headers: { ...bearer(user.access), 'Gateway-Org': 'acme' } });
      expect([res.status, res.text], path).toEqual([400, BAD_REQUEST]);
    }
    expect((await subscription(a, { ...bearer(user.access), 'Gateway-Org': 'acme' })).text).toBe(BAD_REQUEST);
    expect(stripe.calls).toHaveLength(calls);
    // No body at all: the portal for the owner's customer, back to the configured URL.
    expect((await a.request('POST', '/api/v1/billing/portal', { headers: bearer(user.access) })).status).toBe(200);
    expect(formOfLast('/v1/billing_portal/sessions')).toMatchObject({ return_url: 'https://app.example.com/billing' });
    const none = await makeUser(a);
    expect((await a.request('POST', '/api/v1/billing/portal', { headers: bearer(none.access) })).text).toBe('{"error":"Aucun abonnement","code":"subscription_none"}');
  });

  it('each event applied is logged with its id, type and outcome; a Stripe failure is 503 payment_unavailable and logged; a storage failure stays the storage\'s', async () => {
    const user = await makeUser(a);
    await subscribe(bearer(user.access), 'active', 'logged');
    expect(loggedLines(a, 'billing: Stripe event').at(-1)).toMatchObject({ type: 'checkout.session.completed', outcome: 'applied', eventId: expect.stringMatching(/^evt_/) });
    const other = await makeUser(a);
    stripe.failNext(1);
    const failed = await a.post('/api/v1/billing/checkout', { price: 'price_premium_monthly' }, { headers: bearer(other.access) });
    expect([failed.status, failed.json.code]).toEqual([503, 'payment_unavailable']);
    expect(loggedLines(a, 'billing: Stripe call failed').at(-1)).toMatchObject({ err: 'Stripe call failed: the fake was told to fail' });
    stripe.failNext(1);
    const portal = await a.post('/api/v1/billing/portal', {}, { headers: bearer(user.access) });
    expect([portal.status, portal.json.code]).toEqual([503, 'payment_unavailable']);
    const db = a.services.db;
    const query = db.query.bind(db);
    db.query = ((text: string, params?: unknown[]) => /FROM billing_subscriptions/.test(text)
      ? Promise.reject(new StorageUnavailableError(new Error('the test\'s outage'))) : query(text, params)) as typeof db.query;
    try {
      const down = await a.post('/api/v1/billing/checkout', { price: 'price_premium_monthly' }, { headers: bearer(other.access) });
      expect([down.status, down.json.code]).toEqual([503, 'service_unavailable']);
    } finally {
      db.query = query;
    }
  });

  it('`"return": "portal"` without an enabled portal is 400 Requête invalide, and nothing is asked of Stripe', async () => {
    const user = await makeUser(bare);
    const calls = stripe.calls.length;
    for (const path of ['/api/v1/billing/checkout', '/api/v1/billing/portal']) {
      const res = await bare.post(path, { price: 'price_premium_monthly', return: 'portal' }, { headers: bearer(user.access) });
      expect([res.status, res.text]).toEqual([400, BAD_REQUEST]);
    }
    expect(stripe.calls).toHaveLength(calls);
    // Without `return`: Checkout comes back to successUrl and cancelUrl, as before.
    expect((await bare.post('/api/v1/billing/checkout', { price: 'price_premium_monthly' }, { headers: bearer(user.access) })).status).toBe(200);
    expect(formOfLast('/v1/checkout/sessions')).toMatchObject({ success_url: 'https://app.example.com/billing?done=1', cancel_url: 'https://app.example.com/billing' });
    // The plans without a portal, and without credentials, as with one.
    expect((await bare.get('/api/v1/plans')).json).toEqual((await a.get('/api/v1/plans')).json);
  });
});
