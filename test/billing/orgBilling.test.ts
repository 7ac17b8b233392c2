// CONTRACT §23 for organizations (§22), with docs/billing.md's `billing-orgs` example beside
// docs/organizations.md's, as written, on two instances and the local Stripe fake: checkout and
// portal under Gateway-Org for the organization's owner only (each refusal byte for byte), the
// signed webhook setting the organization's plan from its subscription on both instances within a
// second (members' own plans untouched; audited without a user), and the subscription's end
// bringing the organization back to free.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { docsExample } from '../helpers/docs.js';
import { bearer, closeSql, describeWithServices, everywhereWithin, makeUser, sql, startTwoGateways, testConfigFromYaml, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { holdRows } from '../helpers/rowLock.js';
import { startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { signedEvent, startStripeFake, type FakeSubscription, type StripeFake } from '../helpers/stripeFake.js';
import { createOrg, verifiedUser } from '../orgs/helpers.js';

const SECRET = 'whsec_b3JnLWJpbGxpbmctc2VjcmV0';
const WEBHOOK = '/api/v1/billing/stripe/webhook';
const ROUTE = '/api/v1/team-forecasts/x';

describeWithServices('organizations subscribe through their owner (CONTRACT §22, §23)', () => {
  let stripe: StripeFake;
  let smtp: SmtpCatcher;
  let app: EchoUpstream;
  let gws: [TestGateway, TestGateway];

  beforeAll(async () => {
    [stripe, smtp, app] = await Promise.all([startStripeFake(), startSmtpCatcher(), startEchoUpstream()]);
    const env = { STRIPE_SECRET_KEY: 'rk_test_fake', STRIPE_WEBHOOK_SECRET: SECRET, STRIPE_API_BASE: stripe.url, APP_URL: app.url, SMTP_URL: smtp.url };
    const yaml = `${docsExample('organizations', 'organizations')}${docsExample('billing', 'billing-orgs')}errors: { codes: true }\n`;
    gws = await startTwoGateways(testConfigFromYaml(yaml, env));
  });
  afterAll(async () => {
    await Promise.all((gws ?? []).map((g) => g.close()));
    await Promise.all([stripe?.close(), smtp?.close(), app?.close()]);
    await closeSql();
  });

  const acting = (user: TestUser, org: number | string) => ({ headers: { ...bearer(user.access), 'Gateway-Org': String(org) } });
  const send = (gw: TestGateway, event: { body: string; signature?: string }) =>
    gw.request('POST', WEBHOOK, { body: event.body, headers: { 'content-type': 'application/json', 'stripe-signature': event.signature! } });
  const planOf = async (org: number) => (await sql<{ plan: string }>('SELECT plan FROM organizations WHERE id = $1', [org]))[0]!.plan;

  it('only the owner opens checkout or the portal for the organization; an admin gets 403, a stranger 404, a bad id 400, byte for byte', async () => {
    const owner = await verifiedUser(gws[0], smtp);
    const org = await createOrg(gws[0], owner);
    const [admin, stranger] = [await makeUser(gws[0]), await makeUser(gws[0])];
    await sql("INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'admin')", [org, admin.id]);
    for (const path of ['/api/v1/billing/checkout', '/api/v1/billing/portal']) {
      const body = { price: 'price_premium_monthly' };
      expect((await gws[1].post(path, body, acting(admin, org))).text)
        .toBe('{"error":"Rôle insuffisant","code":"role_insufficient","required_roles":["owner"],"current_role":"admin"}');
      expect(await gws[1].post(path, body, acting(stranger, org))).toMatchObject({ status: 404, text: '{"error":"Organisation introuvable","code":"org_not_found"}' });
      expect(await gws[1].post(path, body, acting(owner, `${org}x`))).toMatchObject({ status: 400, text: '{"error":"Requête invalide","code":"bad_request"}' });
    }
    // No customer yet for the organization: no portal.
    expect(await gws[0].post('/api/v1/billing/portal', {}, acting(owner, org))).toMatchObject({ status: 404, json: { code: 'subscription_none' } });
    const res = await gws[0].post('/api/v1/billing/checkout', { price: 'price_premium_monthly' }, acting(owner, org));
    expect(res.status, res.text).toBe(200);
    expect(stripe.calls.filter((c) => c.path === '/v1/checkout/sessions').at(-1)!.form).toMatchObject({
      client_reference_id: `org:${org}`, 'metadata[owner_type]': 'org', 'metadata[owner_id]': String(org), 'subscription_data[metadata][owner_type]': 'org',
    });
  });

  it('the completed checkout sets the organization\'s plan on both instances within a second, not its members\'; its end brings free back', async () => {
    const owner = await verifiedUser(gws[0], smtp);
    const org = await createOrg(gws[0], owner);
    const member = await makeUser(gws[0]);
    await sql("INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'member')", [org, member.id]);
    expect((await gws[1].get(ROUTE, acting(member, org))).json).toMatchObject({ code: 'plan_insufficient', current_plan: 'free' });

    const res = await gws[0].post('/api/v1/billing/checkout', { price: 'price_premium_monthly' }, acting(owner, org));
    const session = /cs_test_\w+$/.exec(res.json.url as string)![0];
    const tag = randomBytes(6).toString('hex');
    const sub: FakeSubscription = { id: `sub_org_${tag}`, customer: `cus_org_${tag}`, status: 'active', prices: ['price_premium_monthly'] };
    stripe.setSubscription(sub);
    const completed = signedEvent(SECRET, 'checkout.session.completed', { id: session, object: 'checkout.session', customer: sub.customer, subscription: sub.id });
    expect((await send(gws[0], completed)).json).toEqual({ received: true });
    await everywhereWithin(gws, async (gw) => (await gw.get(ROUTE, acting(member, org))).status === 200, 1000);
    expect(await planOf(org)).toBe('premium');
    expect(await sql('SELECT plan FROM users WHERE id = ANY($1)', [[owner.id, member.id]])).toEqual([{ plan: 'free' }, { plan: 'free' }]);
    expect(await sql('SELECT owner_type, owner_id::int AS owner_id FROM billing_customers WHERE stripe_customer_id = $1', [sub.customer])).toEqual([{ owner_type: 'org', owner_id: org }]);
    expect(await sql("SELECT actor, user_id, data FROM audit_events WHERE type = 'billing.plan_changed' AND data->>'org_id' = $1", [String(org)]))
      .toEqual([{ actor: 'billing', user_id: null, data: { event_id: completed.id, plan: 'premium', previous_plan: 'free', org_id: org } }]);
    // Counted on the organization's pool, not the member's own counter.
    expect(await sql('SELECT daily_usage FROM organizations WHERE id = $1', [org])).toEqual([{ daily_usage: 2 }]);
    // Subscribed: the portal opens on the organization's customer; a second checkout is refused.
    expect((await gws[1].post('/api/v1/billing/portal', {}, acting(owner, org))).status).toBe(200);
    expect(stripe.calls.at(-1)!.form).toMatchObject({ customer: sub.customer });
    expect(await gws[1].post('/api/v1/billing/checkout', { price: 'price_premium_monthly' }, acting(owner, org))).toMatchObject({ status: 409, json: { code: 'subscription_already_active' } });
    // The owner's own checkout is the owner's, apart from the organization's.
    expect((await gws[1].post('/api/v1/billing/checkout', { price: 'price_premium_monthly' }, { headers: bearer(owner.access) })).status).toBe(200);

    stripe.setSubscription({ ...sub, status: 'canceled' });
    const deleted = signedEvent(SECRET, 'customer.subscription.deleted', { id: sub.id, object: 'subscription', customer: sub.customer, status: 'canceled' });
    expect((await send(gws[1], deleted)).status).toBe(200);
    await everywhereWithin(gws, async (gw) => (await gw.get(ROUTE, acting(member, org))).status === 403, 1000);
    expect(await planOf(org)).toBe('free');
  });

  it('an organization deleted while its event waits for the organization\'s lock: the event is received, nothing written for it', async () => {
    const owner = await verifiedUser(gws[0], smtp);
    const org = await createOrg(gws[0], owner);
    const res = await gws[0].post('/api/v1/billing/checkout', { price: 'price_premium_monthly' }, acting(owner, org));
    const session = /cs_test_\w+$/.exec(res.json.url as string)![0];
    const tag = randomBytes(6).toString('hex');
    const sub: FakeSubscription = { id: `sub_gone_${tag}`, customer: `cus_gone_${tag}`, status: 'active', prices: ['price_premium_monthly'] };
    stripe.setSubscription(sub);
    const completed = signedEvent(SECRET, 'checkout.session.completed', { id: session, object: 'checkout.session', customer: sub.customer, subscription: sub.id });
    const lock = await holdRows('SELECT id FROM organizations WHERE id = $1 FOR UPDATE', [org]);
    const answer = send(gws[1], completed);
    await lock.waiters(1);
    await lock.run('DELETE FROM organizations WHERE id = $1', [org]);
    await lock.release();
    expect((await answer).json).toEqual({ received: true });
    expect(await sql("SELECT count(*)::int AS n FROM audit_events WHERE type = 'billing.plan_changed' AND data->>'event_id' = $1", [completed.id])).toEqual([{ n: 0 }]);
  });
});
