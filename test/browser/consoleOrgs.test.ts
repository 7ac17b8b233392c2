/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
// The console's organizations pages in Chromium (CONTRACT §22, operators): an operator finds an
// organization by its name (markup in it shown as text), sees its members and usage, changes its
// plan from the keyboard and the change is stored and audited as the console's; every view passes
// axe-core; screenshots land in test-artifacts/console/.
import type { FastifyInstance } from 'fastify';
import type { Page } from 'puppeteer-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import { describeWithBrowser, launchBrowser, type TestBrowser } from '../helpers/browser.js';
import { axeViolations, consolePage, screenshot, tableRows } from './consolePage.js';
import { ADMIN_KEY, closeSql, marker, sql, startTestGateway, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { createOrg, invite, join, organizationsConfig, verifiedUser } from '../orgs/helpers.js';


describeWithBrowser('the console\'s organizations pages, in Chromium', () => {
  let smtp: SmtpCatcher;
  let gw: TestGateway;
  let admin: FastifyInstance;
  let consoleUrl: string;
  let chromium: TestBrowser;
  let page: Page;
  let owner: TestUser;
  let member: TestUser;
  let orgId: number;
  const tag = marker();
  const name = `${tag} <img src=x onerror=alert(1)> & Co`;

  beforeAll(async () => {
    smtp = await startSmtpCatcher();
    gw = await startTestGateway(organizationsConfig(smtp));
    admin = await buildAdminApp(gw.services);
    consoleUrl = `${await admin.listen({ host: '127.0.0.1', port: 0 })}/console/`;
    [owner, member] = [await verifiedUser(gw, smtp), await verifiedUser(gw, smtp)];
    orgId = await createOrg(gw, owner, name);
    expect(await join(gw, member, await invite(gw, smtp, orgId, owner, member, 'member'))).toBe(200);
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

  const shot = (name: string) => screenshot(page, name);
  const rows = (scope: string) => tableRows(page, scope);
  const axe = () => axeViolations(page);

  it('signs in, then finds the organization by its name from the navigation\'s link; its name is text', async () => {
    await page.goto(consoleUrl);
    await page.waitForSelector('#key', { visible: true });
    await page.type('#key', ADMIN_KEY);
    await page.keyboard.press('Enter');
    await page.waitForSelector('#user-search', { visible: true });
    await page.click('nav a[href="#/orgs"]');
    await page.waitForSelector('#org-search');
    await page.focus('#org-query');
    await page.keyboard.type(tag.toUpperCase());
    await page.keyboard.press('Enter');
    await page.waitForFunction((expected) => {
      const found = document.querySelectorAll('tbody tr');
      return found.length === 1 && found[0]!.querySelector('a')?.textContent === expected;
    }, { timeout: 10_000 }, name);
    expect(await rows('#view')).toEqual([[name, String(orgId), 'free', '2', expect.any(String)]]);
    // Shown as text: no element came out of the name.
    expect(await page.$$eval('#view img', (imgs) => imgs.length)).toBe(0);
    expect(await axe()).toEqual([]);
    await shot('orgs');
  });

  it('shows the organization\'s members and usage, and changes its plan from the keyboard', async () => {
    await page.click('tbody a');
    await page.waitForSelector('#org-plan');
    expect(await page.$eval('#view h2', (el) => el.textContent)).toBe(name);
    expect(await rows('section[aria-labelledby=h-members]')).toEqual([[owner.email, 'owner', expect.any(String)], [member.email, 'member', expect.any(String)]]);
    // On free the members count on their own counters: the pooled one is said to be absent (CONTRACT §29's usage at a glance).
    expect(await page.$$eval('#org-usage dt, #org-usage dd', (els) => els.map((e) => e.textContent))).toEqual(['Pooled uses', ' not counted here']);
    // Dates as people read them, the exact instant on hover.
    const joined = await page.$eval('section[aria-labelledby=h-members] time', (t) => [t.getAttribute('datetime'), t.getAttribute('title'), t.textContent]);
    expect(joined[1]).toBe(joined[0]);
    expect(joined[2]).toMatch(/^\d{1,2} [A-Z][a-z]{2} \d{4}, \d{2}:\d{2} UTC$/);
    expect(await axe()).toEqual([]);
    // free → premium → pro with the arrow key, Tab to the button, Enter.
    await page.focus('#org-plan');
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('ArrowDown');
    expect(await page.$eval('#org-plan', (el) => (el as HTMLSelectElement).value)).toBe('pro');
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('save-org-plan');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => document.getElementById('org-status')?.textContent === 'Plan set to pro');
    await page.waitForFunction(() => document.activeElement?.id === 'save-org-plan');
    expect(await sql('SELECT plan FROM organizations WHERE id = $1', [orgId])).toEqual([{ plan: 'pro' }]);
    expect(await rows('section[aria-labelledby=h-org-plan-changes]')).toEqual([[expect.any(String), 'console', 'pro', 'free']]);
    // On pro the pooled counter counts: each window against the plan's limits.
    expect(await page.$$eval('#org-usage dt', (els) => els.map((e) => e.textContent))).toEqual(['Today (UTC)', 'This month (UTC)']);
    // A change by billing is listed too, newest first (CONTRACT §29: the page said "None" after one).
    await sql("INSERT INTO audit_events (at, type, actor, data) VALUES (now(), 'billing.plan_changed', 'billing', $1)",
      [JSON.stringify({ org_id: orgId, plan: 'premium', previous_plan: 'pro', event_id: 'evt_console' })]);
    await page.reload();
    await page.waitForSelector('section[aria-labelledby=h-org-plan-changes]');
    expect(await rows('section[aria-labelledby=h-org-plan-changes]')).toEqual([[expect.any(String), 'billing', 'premium', 'pro'], [expect.any(String), 'console', 'pro', 'free']]);
    expect(await axe()).toEqual([]);
    await shot('org');
  });

  it('keeps its owner: deleting them is refused, the organization they are the last owner of named', async () => {
    await page.goto(`${consoleUrl}#/user/${owner.id}`);
    await page.waitForSelector('#delete-confirm');
    await page.type('#delete-confirm', owner.email);
    await page.click('#delete-user');
    const said = `Dernier propriétaire de l'organisation: ${name} (#${orgId})`;
    await page.waitForFunction((text) => document.getElementById('delete-status')?.textContent === text, { timeout: 10_000 }, said);
    expect(await page.$$eval('#view img', (imgs) => imgs.length)).toBe(0);
    expect(await sql('SELECT email FROM users WHERE id = $1', [owner.id])).toEqual([{ email: owner.email }]);
  });

  it('an unknown organization is said so', async () => {
    await page.goto(`${consoleUrl}#/org/999999999`);
    await page.waitForSelector('#view p[role=alert]');
    expect(await page.$eval('#view p[role=alert]', (el) => el.textContent)).toBe('Ressource introuvable');
  });
});
