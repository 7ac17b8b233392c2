// Issue 71 (CONTRACT §29): support sees the money, and checkout carries the owner everywhere.
// docs/organizations.md's and docs/billing.md's `billing-orgs` examples on two instances and the
// local Stripe fake: GET /admin/v1/users/{id} and /orgs/{id} show the customer, each subscription
// as Stripe last said (period end, cancel at period end, past_due since, the plan it gives), where
// the plan comes from, the grace and links to Stripe's dashboard; the Checkout Session the fake
// received names the owner in metadata, subscription_data.metadata and client_reference_id; an
// organization's plan change answers 409 until override, audited with data.override; and with billing
// turned off, what Stripe said stays shown, unlinked, and billing manages no plan.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import { docsExample } from '../helpers/docs.js';
import {
  ADMIN_KEY, bearer, closeSql, describeWithServices, makeUser, ownRedisPrefix, sql, startTestGateway, startTwoGateways, testConfig, testConfigFromYaml,
  type TestGateway, type TestUser,
} from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { request } from '../helpers/http.js';
import { startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { signedEvent, startStripeFake, type FakeSubscription, type StripeFake } from '../helpers/stripeFake.js';
import { createOrg, verifiedUser } from '../orgs/helpers.js';

const SECRET = 'whsec_c3VwcG9ydC1zZWVzLXRoZS1tb25leQ';
const WEBHOOK = '/api/v1/billing/stripe/webhook';
const DAY_MS = 86_400_000;
const NONE = { customer_id: null, customer_url: null, subscriptions: [], billing_plan: null, override_since: null, grace_ends_at: null };

/** A gateway on `config` with the admin API beside it: what support's requests go to. */
interface Support {
  gw: TestGateway;
  admin(method: string, path: string, json?: unknown): ReturnType<typeof request>;
  close(): Promise<void>;
}

async function withAdmin(config: Parameters<typeof startTestGateway>[0]): Promise<Support> {
  const gw = await startTestGateway(config);
  const app = await buildAdminApp(gw.services);
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  return {
    gw,
    admin: (method, path, json) => request(url, method, path, { headers: bearer(ADMIN_KEY), ...(json === undefined ? {} : { json }) }),
    close: async () => {
      await app.close();
      await gw.close();
    },
  };
}


describeWithServices('support sees the money (CONTRACT §29)', () => {
  let stripe: StripeFake;
  let smtp: SmtpCatcher;
  let app: EchoUpstream;
  let gws: [TestGateway, TestGateway];
  let adminUrl: string;
  let closeAdmin: () => Promise<void>;

  beforeAll(async () => {
    [stripe, smtp, app] = await Promise.all([startStripeFake(), startSmtpCatcher(), startEchoUpstream()]);
    const env = { STRIPE_SECRET_KEY: 'rk_test_fake', STRIPE_WEBHOOK_SECRET: SECRET, STRIPE_API_BASE: stripe.url, APP_URL: app.url, SMTP_URL: smtp.url };
    const yaml = `${docsExample('organizations', 'organizations')}${docsExample('billing', 'billing-orgs')}errors: { codes: true }\n`;
    gws = await startTwoGateways(testConfigFromYaml(yaml, env));
    const admin = await buildAdminApp(gws[1].services);
    adminUrl = await admin.listen({ host: '127.0.0.1', port: 0 });
    closeAdmin = () => admin.close();
  });
  afterAll(async () => {
    await closeAdmin?.();
    await Promise.all((gws ?? []).map((g) => g.close()));
    await Promise.all([stripe?.close(), smtp?.close(), app?.close()]);
    await closeSql();
  });

  const admin = (method: string, path: string, json?: unknown) => request(adminUrl, method, path, { headers: bearer(ADMIN_KEY), ...(json === undefined ? {} : { json }) });
  const send = async (gw: TestGateway, type: string, object: Record<string, unknown>) => {
    const event = signedEvent(SECRET, type, object);
    expect((await gw.request('POST', WEBHOOK, { body: event.body, headers: { 'content-type': 'application/json', 'stripe-signature': event.signature } })).status).toBe(200);
  };
  const lastCheckout = () => stripe.calls.filter((c) => c.path === '/v1/checkout/sessions').at(-1)!.form;
  /** What the session's form said of its owner: the three places Stripe keeps it. */
  const ownerFields = (form: Record<string, string>) => Object.fromEntries(Object.entries(form).filter(([k]) => /^(client_reference_id|metadata\[|subscription_data\[metadata\])/.test(k)));

  /** Checkout for `owner` (headers say whom), then its session completed with `sub` set at the fake. */
  async function pay(headers: Record<string, string>, sub: FakeSubscription): Promise<Record<string, string>> {
    const res = await gws[0].post('/api/v1/billing/checkout', { price: 'price_premium_monthly' }, { headers });
    expect(res.status, res.text).toBe(200);
    const form = lastCheckout();
    stripe.setSubscription(sub);
    await send(gws[0], 'checkout.session.completed', { id: /cs_test_\w+$/.exec(res.json.url as string)![0], object: 'checkout.session', customer: sub.customer, subscription: sub.id });
    return form;
  }

  it('a user: default, then billed (its subscription as Stripe says, dashboard links), its grace, then an override', async () => {
    const user: TestUser = await makeUser(gws[0]);
    expect((await admin('GET', `/admin/v1/users/${user.id}`)).json.billing).toEqual({ ...NONE, plan_source: 'default' });

    const tag = randomBytes(6).toString('hex');
    const sub: FakeSubscription = { id: `sub_u_${tag}`, customer: `cus_u_${tag}`, status: 'active', prices: ['price_premium_monthly'], cancelAtPeriodEnd: true };
    const form = await pay(bearer(user.access), sub);
    expect(ownerFields(form)).toEqual({
      client_reference_id: `user:${user.id}`, 'metadata[owner_type]': 'user', 'metadata[owner_id]': String(user.id),
      'subscription_data[metadata][owner_type]': 'user', 'subscription_data[metadata][owner_id]': String(user.id),
    });

    const billed = (await admin('GET', `/admin/v1/users/${user.id}`)).json;
    expect(billed.plan).toBe('premium');
    expect(billed.billing).toEqual({
      customer_id: sub.customer, customer_url: `https://dashboard.stripe.com/test/customers/${sub.customer}`,
      subscriptions: [{
        id: sub.id, status: 'active', price: 'price_premium_monthly', plan: 'premium', current_period_end: expect.any(String), cancel_at_period_end: true,
        past_due_since: null, url: `https://dashboard.stripe.com/test/subscriptions/${sub.id}`,
      }],
      plan_source: 'billing', billing_plan: 'premium', override_since: null, grace_ends_at: null,
    });
    // The fake's period: 30 days from a minute ago (the item's current_period_end, as Stripe's API now puts it).
    const periodEnd = Date.parse((billed.billing as { subscriptions: Array<{ current_period_end: string }> }).subscriptions[0]!.current_period_end);
    expect(Math.abs(periodEnd - (Date.now() + 30 * DAY_MS))).toBeLessThan(5 * 60_000);

    // A payment fails: past_due, the grace's end shown (pastDueGraceDays: 7 from the first sight of past_due).
    stripe.setSubscription({ ...sub, status: 'past_due', cancelAtPeriodEnd: false });
    await send(gws[1], 'customer.subscription.updated', { id: sub.id, object: 'subscription', customer: sub.customer });
    const [row] = await sql<{ past_due_since: Date }>('SELECT past_due_since FROM billing_subscriptions WHERE stripe_subscription_id = $1', [sub.id]);
    const late = (await admin('GET', `/admin/v1/users/${user.id}`)).json.billing as Record<string, unknown>;
    expect(late).toMatchObject({
      plan_source: 'billing', billing_plan: 'premium', grace_ends_at: new Date(row!.past_due_since.getTime() + 7 * DAY_MS).toISOString(),
      subscriptions: [expect.objectContaining({ status: 'past_due', cancel_at_period_end: false, past_due_since: row!.past_due_since.toISOString() })],
    });

    // An override: the plan is the operator's while billing computes premium.
    expect((await admin('PUT', `/admin/v1/users/${user.id}/plan`, { plan: 'pro', override: true })).status).toBe(200);
    const held = (await admin('GET', `/admin/v1/users/${user.id}`)).json;
    expect([held.plan, (held.billing as Record<string, unknown>).plan_source, (held.billing as Record<string, unknown>).billing_plan]).toEqual(['pro', 'operator', 'premium']);
    expect(Date.parse((held.billing as { override_since: string }).override_since)).toBeGreaterThan(Date.now() - 60_000);
  });

  it('an organization: checkout names it everywhere; its billing shown; its plan change 409 until override, audited with override', async () => {
    const owner = await verifiedUser(gws[0], smtp);
    const org = await createOrg(gws[0], owner);
    expect((await admin('GET', `/admin/v1/orgs/${org}`)).json.billing).toEqual({ ...NONE, plan_source: 'default' });
    const tag = randomBytes(6).toString('hex');
    const sub: FakeSubscription = { id: `sub_org_${tag}`, customer: `cus_org_${tag}`, status: 'trialing', prices: ['price_premium_monthly'] };
    const form = await pay({ ...bearer(owner.access), 'Gateway-Org': String(org) }, sub);
    expect(ownerFields(form)).toEqual({
      client_reference_id: `org:${org}`, 'metadata[owner_type]': 'org', 'metadata[owner_id]': String(org),
      'subscription_data[metadata][owner_type]': 'org', 'subscription_data[metadata][owner_id]': String(org),
    });
    const shown = (await admin('GET', `/admin/v1/orgs/${org}`)).json;
    expect([shown.plan, shown.billing]).toEqual(['premium', {
      customer_id: sub.customer, customer_url: `https://dashboard.stripe.com/test/customers/${sub.customer}`,
      subscriptions: [expect.objectContaining({ id: sub.id, status: 'trialing', plan: 'premium', cancel_at_period_end: false })],
      plan_source: 'billing', billing_plan: 'premium', override_since: null, grace_ends_at: null,
    }]);

    const refused = await admin('PUT', `/admin/v1/orgs/${org}/plan`, { plan: 'pro' });
    expect([refused.status, refused.text]).toEqual([409, '{"error":"Plan géré par la facturation","code":"plan_managed_by_billing","billing_plan":"premium"}']);
    const set = await admin('PUT', `/admin/v1/orgs/${org}/plan`, { plan: 'pro', override: true });
    expect([set.status, set.json.plan, (set.json.billing as Record<string, unknown>).plan_source]).toEqual([200, 'pro', 'operator']);
    expect(await sql("SELECT actor, data FROM audit_events WHERE type = 'admin.org_plan_changed' AND data->>'org_id' = $1", [String(org)]))
      .toEqual([{ actor: 'admin', data: { org_id: org, plan: 'pro', previous: 'premium', override: true } }]);
  });

  it('an organization\'s plan is locked and set by the organization\'s id, which no user need have; one no organization has is 404', async () => {
    const [{ id }] = await sql<{ id: number }>("INSERT INTO organizations (id, name) VALUES (2000000000 + (random() * 100000000)::int, 'Far') RETURNING id") as [{ id: number }];
    expect(await sql('SELECT 1 FROM users WHERE id = $1', [id])).toEqual([]);
    const set = await admin('PUT', `/admin/v1/orgs/${id}/plan`, { plan: 'pro' });
    expect([set.status, set.json.plan, (set.json.billing as Record<string, unknown>).plan_source]).toEqual([200, 'pro', 'operator']);
    await sql('DELETE FROM organizations WHERE id = $1', [id]);
    expect((await admin('PUT', `/admin/v1/orgs/${id}/plan`, { plan: 'pro' })).status).toBe(404);
  });
});

describeWithServices('the dashboard links follow billing.stripe.dashboardUrl and the key\'s mode', () => {
  let support: Support;
  beforeAll(async () => {
    support = await withAdmin(testConfig({
      storage: { redisKeyPrefix: ownRedisPrefix('dash') },
      billing: {
        stripe: {
          secretKey: 'rk_live_support', webhookSecrets: [SECRET], prices: { price_premium_monthly: 'premium' }, dashboardUrl: 'https://stripe.example/dash//', pastDueGraceDays: 3,
          successUrl: 'https://app.example.com/billing?done=1', cancelUrl: 'https://app.example.com/billing',
        },
      },
    }));
  });
  afterAll(async () => {
    await support?.close();
    await closeSql();
  });

  it('a live key links the live pages of the dashboard configured', async () => {
    const user = await makeUser(support.gw);
    const tag = randomBytes(6).toString('hex');
    await sql("INSERT INTO billing_customers (owner_type, owner_id, stripe_customer_id) VALUES ('user', $1, $2)", [user.id, `cus_live_${tag}`]);
    await sql(`INSERT INTO billing_subscriptions (stripe_subscription_id, owner_type, owner_id, stripe_customer_id, status, price, prices)
      VALUES ($1, 'user', $2, $3, 'canceled', 'price_gone', '{price_gone}')`, [`sub_live_${tag}`, user.id, `cus_live_${tag}`]);
    const res = await support.admin('GET', `/admin/v1/users/${user.id}`);
    expect(res.json.billing).toEqual({
      customer_id: `cus_live_${tag}`, customer_url: `https://stripe.example/dash/customers/cus_live_${tag}`,
      subscriptions: [{
        id: `sub_live_${tag}`, status: 'canceled', price: 'price_gone', plan: null, current_period_end: null, cancel_at_period_end: false, past_due_since: null,
        url: `https://stripe.example/dash/subscriptions/sub_live_${tag}`,
      }],
      plan_source: 'default', billing_plan: null, override_since: null, grace_ends_at: null,
    });
  });

  it('the grace shown is the first to end of the past_due subscriptions still in it, an active one beside them counting none', async () => {
    const user = await makeUser(support.gw);
    const tag = randomBytes(6).toString('hex');
    const [early, late] = [Date.now() - 2 * DAY_MS, Date.now() - DAY_MS];
    await sql("INSERT INTO billing_customers (owner_type, owner_id, stripe_customer_id) VALUES ('user', $1, $2)", [user.id, `cus_g_${tag}`]);
    for (const [id, status, since] of [[`sub_g1_${tag}`, 'past_due', late], [`sub_g2_${tag}`, 'active', null], [`sub_g3_${tag}`, 'past_due', early]] as const) {
      await sql(`INSERT INTO billing_subscriptions (stripe_subscription_id, owner_type, owner_id, stripe_customer_id, status, price, prices, past_due_since)
        VALUES ($1, 'user', $2, $3, $4, 'price_premium_monthly', '{price_premium_monthly}', $5)`, [id, user.id, `cus_g_${tag}`, status, since === null ? null : new Date(since)]);
    }
    const res = await support.admin('GET', `/admin/v1/users/${user.id}`);
    expect(res.json.billing).toMatchObject({ plan_source: 'billing', billing_plan: 'premium', grace_ends_at: new Date(early + 3 * DAY_MS).toISOString() });
  });
});

describeWithServices('billing as support reads it once billing is turned off (no billing.stripe)', () => {
  let support: Support;
  beforeAll(async () => {
    support = await withAdmin(testConfig({ storage: { redisKeyPrefix: ownRedisPrefix('unbilled') } }));
  });
  afterAll(async () => {
    await support?.close();
    await closeSql();
  });

  it('what Stripe said stays shown, unlinked and planless; billing manages no plan, so an operator\'s holds and says so', async () => {
    const user = await makeUser(support.gw);
    const tag = randomBytes(6).toString('hex');
    await sql("INSERT INTO billing_customers (owner_type, owner_id, stripe_customer_id) VALUES ('user', $1, $2)", [user.id, `cus_off_${tag}`]);
    await sql(`INSERT INTO billing_subscriptions (stripe_subscription_id, owner_type, owner_id, stripe_customer_id, status, price, prices, past_due_since)
      VALUES ($1, 'user', $2, $3, 'past_due', 'price_premium_monthly', '{price_premium_monthly}', now())`, [`sub_off_${tag}`, user.id, `cus_off_${tag}`]);
    const unlinked = {
      customer_id: `cus_off_${tag}`, customer_url: null,
      subscriptions: [expect.objectContaining({ id: `sub_off_${tag}`, status: 'past_due', plan: null, url: null })],
      billing_plan: null, override_since: null, grace_ends_at: null,
    };
    expect((await support.admin('GET', `/admin/v1/users/${user.id}`)).json.billing).toEqual({ ...unlinked, plan_source: 'default' });
    const set = await support.admin('PUT', `/admin/v1/users/${user.id}/plan`, { plan: 'pro' });
    expect([set.status, set.json.plan, set.json.billing]).toEqual([200, 'pro', { ...unlinked, plan_source: 'operator' }]);
    expect((await support.admin('PUT', `/admin/v1/users/${2_000_000_000 + user.id}/plan`, { plan: 'pro' })).status).toBe(404);
  });
});
