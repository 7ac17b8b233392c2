// CONTRACT §23 for organizations (§22): deleting an organization with a running subscription sets
// it to cancel at period end through Stripe first; Stripe failing keeps the organization (503).
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { docsExample } from '../helpers/docs.js';
import { bearer, closeSql, describeWithServices, sql, startTestGateway, testConfigFromYaml, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { startStripeFake, type StripeFake } from '../helpers/stripeFake.js';
import { createOrg, organizationsConfig, verifiedUser } from '../orgs/helpers.js';

describeWithServices('a deleted organization stops its subscriptions at period end', () => {
  let stripe: StripeFake;
  let smtp: SmtpCatcher;
  let gw: TestGateway;

  beforeAll(async () => {
    [stripe, smtp] = await Promise.all([startStripeFake(), startSmtpCatcher()]);
    const env = { STRIPE_SECRET_KEY: 'rk_test_fake', STRIPE_WEBHOOK_SECRET: 'whsec_org_cancel', STRIPE_API_BASE: stripe.url, APP_URL: 'http://127.0.0.1:9' };
    const { billing } = testConfigFromYaml(docsExample('billing', 'billing'), env);
    gw = await startTestGateway({ ...organizationsConfig(smtp), billing });
  });

  afterAll(async () => {
    await gw?.close();
    await Promise.all([stripe?.close(), smtp?.close()]);
    await closeSql();
  });

  const as = (user: TestUser) => ({ headers: bearer(user.access) });

  it('cancels the organization\'s subscription at period end before deleting it, and keeps it when Stripe fails', async () => {
    const owner = await verifiedUser(gw, smtp);
    const id = await createOrg(gw, owner);
    const sub = `sub_${randomBytes(6).toString('hex')}`;
    stripe.setSubscription({ id: sub, customer: `cus_${randomBytes(6).toString('hex')}`, status: 'active', prices: ['price_pro_monthly'] });
    await sql(`INSERT INTO billing_subscriptions (stripe_subscription_id, owner_type, owner_id, stripe_customer_id, status, price, prices)
               VALUES ($1, 'org', $2, 'cus_org', 'active', 'price_pro_monthly', '{price_pro_monthly}')`, [sub, id]);
    stripe.failNext(1);
    const refused = await gw.request('DELETE', `/api/v1/orgs/${id}`, as(owner));
    expect(refused.status).toBe(503);
    expect(refused.json).toMatchObject({ code: 'payment_unavailable' });
    expect((await gw.get(`/api/v1/orgs/${id}`, as(owner))).status).toBe(200);
    expect(stripe.cancelAtPeriodEnd(sub)).toBe(false);
    expect(await gw.request('DELETE', `/api/v1/orgs/${id}`, as(owner))).toMatchObject({ status: 200, json: { message: 'Organisation supprimée' } });
    expect(stripe.cancelAtPeriodEnd(sub)).toBe(true);
    expect((await gw.get(`/api/v1/orgs/${id}`, as(owner))).status).toBe(404);
  });

  it('tells Stripe nothing for an account refused as an organization\'s last owner', async () => {
    const owner = await verifiedUser(gw, smtp);
    const org = await createOrg(gw, owner, 'Solo');
    const sub = `sub_${randomBytes(6).toString('hex')}`;
    stripe.setSubscription({ id: sub, customer: `cus_${randomBytes(6).toString('hex')}`, status: 'active', prices: ['price_premium_monthly'] });
    await sql(`INSERT INTO billing_subscriptions (stripe_subscription_id, owner_type, owner_id, stripe_customer_id, status, price, prices)
               VALUES ($1, 'user', $2, 'cus_user', 'active', 'price_premium_monthly', '{price_premium_monthly}')`, [sub, owner.id]);
    const refused = await gw.request('DELETE', '/api/v1/user/me', { ...as(owner), json: { password: owner.password } });
    expect(refused.status).toBe(409);
    expect(refused.json).toMatchObject({ code: 'last_owner', orgs: [{ id: org, name: 'Solo' }] });
    expect(stripe.calls.filter((c) => c.path === `/v1/subscriptions/${sub}`)).toEqual([]);
  });
});
