/// <reference lib="dom" />
// The customer portal in Chromium (CONTRACT §30), as a new customer goes through it, in French and
// in English: sign up, verify the email from the mail catcher, create a scoped key and see it once,
// call a route with it until the quota's 429, upgrade through the Stripe double's Checkout, and see
// the new limits and the usage chart's numbers move; roll the key with a grace (both keys work),
// leave for Stripe's Customer Portal, and read the past-due banner after a failed payment. On the
// way: the product's logo and accent, and the "back to the app" link (only to a listed URL). axe-core
// checks the states a page reaches only after an action (a banner, a key shown once, a roll's
// confirmation, a status line), which portalPages.browser.test.ts's fresh pages never show.
import type { Page } from 'puppeteer-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeWithBrowser } from '../helpers/browser.js';
import { closeSql, newEmail, newPassword } from '../helpers/gateway.js';
import { ACCENT, axeViolations, FREE_DAILY, readUntil, startPortalWorld, textOf, type PortalWorld } from './portalWorld.js';

const APP = 'https://app.example.com/';
/** The accent as the browser's computed style spells it. */
const ACCENT_RGB = `rgb(${[1, 3, 5].map((i) => parseInt(ACCENT.slice(i, i + 2), 16)).join(', ')})`;

describeWithBrowser('the customer portal, a new customer from sign-up to a paid plan', () => {
  let world: PortalWorld;
  beforeAll(async () => { world = await startPortalWorld(); }, 90_000);
  afterAll(async () => {
    await world?.close();
    await closeSql();
  });

  const WORDS = {
    fr: { unverified: 'pas encore vérifiée', verified: 'Adresse e-mail vérifiée.', once: 'ne sera plus jamais affichée', premium: 'premium', limit: '1\u202f000',
      back: 'Retour à l’application', pastDue: 'Votre dernier paiement a échoué' },
    en: { unverified: 'not verified yet', verified: 'Email address verified.', once: 'never be shown again', premium: 'premium', limit: '1,000',
      back: 'Back to the app', pastDue: 'Your last payment failed' },
  } as const;

  /** The usage page's numbers for today (the days table's last row): uses and denials. */
  async function todayRow(page: Page): Promise<string[]> {
    await page.goto(`${world.portal}usage`);
    await page.waitForSelector('#h-days + .chart canvas, #chart-days canvas');
    return page.$$eval('section[aria-labelledby=h-days] .scroll tbody tr:last-child td', (tds) => tds.map((td) => td.textContent ?? ''));
  }

  for (const language of ['fr', 'en'] as const) {
    it(`${language}: signs up, verifies, makes a scoped key, hits the quota, upgrades and sees it`, async () => {
      const words = WORDS[language];
      const context = await world.browser.createBrowserContext();
      const page = await context.newPage();
      await page.setViewport({ width: 1100, height: 900 });
      const email = newEmail('portal');
      const password = newPassword();

      // A return_to that portal.returnTo does not list gives no link; a listed one does, for the visit.
      await page.goto(`${world.portal}sign-up?return_to=${encodeURIComponent('https://evil.example/')}`);
      await page.waitForSelector('#sign-up-form');
      expect(await page.$('#back-to-app')).toBeNull();
      await page.goto(`${world.portal}sign-up?return_to=${encodeURIComponent(APP)}`);
      await page.waitForSelector('#sign-up-form');
      if (language === 'en') {
        await page.click('#lang');
        await page.waitForFunction(() => document.documentElement.lang === 'en');
      }
      expect(await page.$eval('#back-to-app', (a) => [a.getAttribute('href'), a.textContent])).toEqual([APP, words.back]);
      // The product's look: its logo (served under the portal's CSP) and its accent on the header and buttons.
      expect(await page.$eval('header img.logo', (img) => (img as HTMLImageElement).complete && (img as HTMLImageElement).naturalWidth > 0)).toBe(true);
      expect(await page.$eval('header.top', (el) => getComputedStyle(el).borderBottomColor)).toBe(ACCENT_RGB);
      expect(await page.$eval('#sign-up-submit', (el) => getComputedStyle(el).backgroundColor)).toBe(ACCENT_RGB);
      await page.type('#email', email);
      await page.type('#password', password);
      await page.click('#sign-up-submit');
      // Signed in at once, on the overview, which says the email is to verify.
      expect(await textOf(page, '#banner-unverified')).toContain(words.unverified);
      expect(new URL(page.url()).pathname).toBe('/portal/');
      expect(await page.$eval('#back-to-app', (a) => a.getAttribute('href'))).toBe(APP);
      expect(await axeViolations(page), 'the overview with the unverified banner').toEqual([]);

      // The mail's link leads to the portal's verify-email page, which verifies it.
      const mail = await world.smtp.waitFor(email);
      expect(mail.link).toMatch(new RegExp(`^${world.portal}verify-email\\?token=`));
      await page.goto(mail.link!);
      await page.waitForFunction((text) => document.querySelector('[role=status]')?.textContent === text, {}, words.verified);
      expect(new URL(page.url()).search).toBe(''); // the token is off the address bar
      expect(await axeViolations(page), 'the verify-email page\'s status').toEqual([]);
      await page.goto(world.portal);
      await page.waitForSelector('#signed-in-as');
      expect(await page.$('#banner-unverified')).toBeNull();

      // A key with one scope, shown once.
      await page.click('nav.sections a[href$="/keys"]');
      await page.waitForSelector('#create-key');
      await page.type('#key-name', `deploys ${language}`);
      await page.click('input[name=scope][value="forecasts:read"]');
      await page.click('#create-key-submit');
      await page.waitForSelector('#new-key');
      expect(await textOf(page, '#new-key')).toContain(words.once);
      expect(await axeViolations(page), 'a key shown once').toEqual([]);
      const key = await page.$eval('#new-key input', (el) => (el as HTMLInputElement).value);
      expect(key).toMatch(/^gw_/);
      expect(await page.$$eval('tbody .key-name', (els) => els.map((e) => e.textContent))).toEqual([`deploys ${language}`]);
      expect(await page.$$eval('tbody td:nth-child(3)', (els) => els.map((e) => e.textContent))).toEqual(['forecasts:read']);
      await page.reload();
      await page.waitForSelector('#create-key');
      expect(await page.$('#new-key')).toBeNull();
      expect(await page.content()).not.toContain(key);

      // The key works on the route until the free plan's daily quota.
      const call = () => fetch(`${world.gw.url}/api/v1/forecasts`, { headers: { 'x-api-key': key } }).then((r) => r.status);
      for (let i = 0; i < FREE_DAILY; i++) expect(await call()).toBe(200);
      expect(await call()).toBe(429);
      expect(await readUntil(() => todayRow(page), (row) => row[2] === '1')).toEqual([expect.any(String), String(FREE_DAILY), '1']);

      // Upgrade: Checkout on the Stripe double, paid, back on the billing page with the new plan.
      await page.goto(`${world.portal}billing`);
      await page.waitForSelector('button[data-price=price_premium_monthly]');
      await Promise.all([page.waitForNavigation(), page.click('button[data-price=price_premium_monthly]')]);
      expect(page.url().startsWith(world.stripe.url)).toBe(true);
      await Promise.all([page.waitForNavigation(), page.click('#pay')]);
      expect(page.url()).toBe(`${world.portal}billing`);
      // The webhook may land just after the redirect: the page is read again until it says so.
      for (let i = 0; i < 50 && (await textOf(page, '#current-plan')).trim().endsWith('free'); i++) {
        await new Promise((r) => setTimeout(r, 200));
        await page.reload();
      }
      expect(await textOf(page, '#current-plan')).toContain(words.premium);
      expect(await axeViolations(page), 'the billing page on a paid plan').toEqual([]);
      await page.goto(world.portal);
      expect(await textOf(page, '#today-text')).toContain(words.limit);
      expect(await textOf(page, '#plan-name')).toBe('premium');

      // The route answers again, and the chart's numbers move.
      expect(await call()).toBe(200);
      expect(await todayRow(page)).toEqual([expect.any(String), String(FREE_DAILY + 1), '1']);

      // Rolled with an hour's grace: the new key is shown once, and the old one keeps working meanwhile.
      await page.goto(`${world.portal}keys`);
      await page.waitForSelector('button[data-action=roll]');
      await page.click('button[data-action=roll]');
      await page.select('.actions select', '1h');
      expect(await axeViolations(page), 'a roll\'s confirmation').toEqual([]);
      await page.click('button[data-action=confirm-roll]');
      await page.waitForSelector('#new-key');
      const rolled = await page.$eval('#new-key input', (el) => (el as HTMLInputElement).value);
      expect(rolled).toMatch(/^gw_/);
      expect(rolled).not.toBe(key);
      expect(await call()).toBe(200);
      expect((await fetch(`${world.gw.url}/api/v1/forecasts`, { headers: { 'x-api-key': rolled } })).status).toBe(200);

      // Manage billing: Stripe's Customer Portal, a top-level navigation, which comes back to the billing page.
      await page.goto(`${world.portal}billing`);
      await page.waitForSelector('#manage-billing');
      const leaving = page.waitForRequest((r) => r.url().startsWith('https://billing.stripe.com/'));
      await page.click('#manage-billing');
      await leaving;
      const portalSession = world.stripe.calls.filter((c) => c.path === '/v1/billing_portal/sessions').at(-1)!;
      expect(portalSession.form.return_url).toBe(`${world.portal}billing`);

      // A failed payment: the overview says so (read again until the webhook's change is in).
      await world.stripe.trigger({ event: 'invoice.payment_failed', customer: portalSession.form.customer });
      await page.goto(world.portal);
      await page.waitForSelector('#signed-in-as');
      for (let i = 0; i < 25 && !(await page.$('#banner-past-due')); i++) {
        await new Promise((r) => setTimeout(r, 200));
        await page.reload();
        await page.waitForSelector('#signed-in-as');
      }
      expect(await textOf(page, '#banner-past-due')).toContain(words.pastDue);
      expect(await axeViolations(page), 'the overview with the past-due banner').toEqual([]);
      await context.close();
    }, 120_000);
  }
});
