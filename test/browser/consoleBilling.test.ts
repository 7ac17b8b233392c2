/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
// The console's billing in Chromium (CONTRACT §29): a Stripe-billed user's and organization's
// pages show where the plan comes from, the grace and the subscriptions linked to Stripe's
// dashboard; before the click, beside the plan's choice, they say that another plan is an override
// billing ends when it computes another plan; saving without ticking it is refused (409), ticking
// it holds the plan, and the page then says an override stands. Every view passes axe-core.
import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { Page } from 'puppeteer-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import { describeWithBrowser, launchBrowser, type TestBrowser } from '../helpers/browser.js';
import { axeViolations, consolePage, screenshot } from './consolePage.js';
import { ADMIN_KEY, closeSql, makeUser, sql, startTestGateway, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { createOrg, organizationsConfig, verifiedUser } from '../orgs/helpers.js';

const STRIPE = {
  secretKey: 'rk_test_console', webhookSecrets: ['whsec_Y29uc29sZQ'], apiBase: 'https://api.stripe.com', dashboardUrl: 'https://dashboard.stripe.com',
  prices: { price_premium_monthly: 'premium' }, successUrl: 'https://app.example.com/billing?done=1', cancelUrl: 'https://app.example.com/billing', pastDueGraceDays: 7,
};

describeWithBrowser('the console\'s billing, in Chromium', () => {
  let smtp: SmtpCatcher;
  let gw: TestGateway;
  let admin: FastifyInstance;
  let consoleUrl: string;
  let chromium: TestBrowser;
  let page: Page;
  let user: TestUser;
  let orgId: number;
  const tag = randomBytes(6).toString('hex');

  /** A premium subscription as billing stores it once Stripe said so (past_due: its grace running). */
  async function subscribed(type: 'user' | 'org', id: number, status: 'active' | 'past_due'): Promise<void> {
    await sql('INSERT INTO billing_customers (owner_type, owner_id, stripe_customer_id) VALUES ($1, $2, $3)', [type, id, `cus_${type}_${tag}`]);
    await sql(`INSERT INTO billing_subscriptions (stripe_subscription_id, owner_type, owner_id, stripe_customer_id, status, price, prices, current_period_end, past_due_since)
      VALUES ($1, $2, $3, $4, $5, 'price_premium_monthly', '{price_premium_monthly}', now() + interval '20 days', CASE WHEN $5 = 'past_due' THEN now() END)`,
    [`sub_${type}_${tag}`, type, id, `cus_${type}_${tag}`, status]);
    await sql(type === 'user' ? 'UPDATE users SET plan = $2 WHERE id = $1' : 'UPDATE organizations SET plan = $2 WHERE id = $1', [id, 'premium']);
  }

  beforeAll(async () => {
    smtp = await startSmtpCatcher();
    gw = await startTestGateway({ ...organizationsConfig(smtp), billing: { stripe: STRIPE } });
    admin = await buildAdminApp(gw.services);
    consoleUrl = `${await admin.listen({ host: '127.0.0.1', port: 0 })}/console/`;
    user = await makeUser(gw);
    await subscribed('user', user.id, 'past_due');
    orgId = await createOrg(gw, await verifiedUser(gw, smtp), `Billed ${tag}`);
    await subscribed('org', orgId, 'active');
    chromium = await launchBrowser();
    page = await consolePage(chromium.browser);
  }, 60_000);
  afterAll(async () => {
    await chromium?.close();
    await admin?.close();
    await gw?.close();
    await smtp?.close();
    await closeSql();
  });

  const text = (selector: string) => page.$eval(selector, (el) => el.textContent ?? '');
  const axe = () => axeViolations(page);

  it('a billed user\'s page: the billing, the grace, the dashboard links, and the override said before the click', async () => {
    await page.goto(consoleUrl);
    await page.waitForSelector('#key', { visible: true });
    await page.type('#key', ADMIN_KEY);
    await page.keyboard.press('Enter');
    await page.waitForSelector('#user-search', { visible: true });
    await page.goto(`${consoleUrl}#/user/${user.id}`);
    await page.waitForSelector('#user-plan-source');
    expect(await text('#user-plan-source')).toBe('Plan from: billing (a subscription)');
    expect(await text('#user-grace')).toMatch(/^Payment past due: the plan is kept until \d{1,2} [A-Z][a-z]{2} \d{4}, \d\d:\d\d UTC, then the subscription stops giving it\.$/);
    expect(await page.$$eval('section[aria-labelledby=h-user-billing] a', (links) => links.map((a) => [a.textContent, a.getAttribute('href')]))).toEqual([
      [`cus_user_${tag}`, `https://dashboard.stripe.com/test/customers/cus_user_${tag}`],
      [`sub_user_${tag}`, `https://dashboard.stripe.com/test/subscriptions/sub_user_${tag}`],
    ]);
    expect(await text('#user-override-note')).toContain('Another plan is an override: it holds only until billing computes a plan other than premium');
    expect(await axe()).toEqual([]);

    // Not ticked: refused, the plan kept.
    await page.select('#user-plan', 'pro');
    await page.click('#save-plan');
    await page.waitForFunction(() => document.getElementById('user-status')?.textContent === 'Plan géré par la facturation');
    expect(await sql('SELECT plan FROM users WHERE id = $1', [user.id])).toEqual([{ plan: 'premium' }]);
    // Ticked: held, and the page says an override stands.
    await page.click('#user-override');
    await page.click('#save-plan');
    await page.waitForFunction(() => document.getElementById('user-status')?.textContent === 'Plan set to pro');
    await page.waitForFunction(() => document.getElementById('user-override-note')?.textContent?.startsWith('An override stands'));
    expect(await text('#user-plan-source')).toMatch(/^Plan from: an operator \(an override of billing's premium, since \d{1,2} [A-Z][a-z]{2} \d{4}, \d\d:\d\d UTC\)$/);
    expect(await sql("SELECT data FROM audit_events WHERE user_id = $1 AND type = 'admin.plan_changed'", [user.id])).toEqual([{ data: { plan: 'pro', override: true } }]);
    expect(await axe()).toEqual([]);
    await screenshot(page, 'user-billing');
  });

  it('a billed organization\'s page: the same, and its override from the console', async () => {
    await page.goto(`${consoleUrl}#/org/${orgId}`);
    await page.waitForSelector('#org-plan-source');
    expect(await text('#org-plan-source')).toBe('Plan from: billing (a subscription)');
    expect(await text('#org-override-note')).toContain('billing computes a plan other than premium');
    await page.select('#org-plan', 'pro');
    await page.click('#org-override');
    await page.click('#save-org-plan');
    await page.waitForFunction(() => document.getElementById('org-status')?.textContent === 'Plan set to pro');
    expect(await sql('SELECT plan FROM organizations WHERE id = $1', [orgId])).toEqual([{ plan: 'pro' }]);
    expect(await axe()).toEqual([]);
    await screenshot(page, 'org-billing');
  });
});
