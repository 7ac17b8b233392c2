/// <reference lib="dom" />
// The customer portal by keyboard alone (CONTRACT §30), in French and in English (the language
// switch pressed too): sign in and create a key with Tab, typing,
// Space and Enter only, the focus landing where the next step is. And names as text: a product
// name, an organization name and a key name holding markup are shown as those characters, and no
// script of theirs runs. And the other refusals as Chromium meets them: another site's form post
// to the sign-in, a call without the portal's header, a page framed by another origin, an open
// redirect through `next`, and the session cookie replayed after sign-out.
import type { Page } from 'puppeteer-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeWithBrowser } from '../helpers/browser.js';
import { bearer, closeSql, makeUser } from '../helpers/gateway.js';
import { startPortalWorld, textOf, type PortalWorld } from './portalWorld.js';

const PRODUCT = 'Acme <img src=x onerror="window.__injected=1">';
const ORG = '<script>window.__injected=2</script>Org';
const KEY = '<img src=y onerror="window.__injected=3">';

/** Presses Tab (at most 60 times) until the focused element matches `selector`; fails if it never does. */
async function tabTo(page: Page, selector: string): Promise<void> {
  for (let i = 0; i < 60; i++) {
    await page.keyboard.press('Tab');
    if (await page.evaluate((s) => document.activeElement?.matches(s) ?? false, selector)) return;
  }
  throw new Error(`Tab never reached ${selector}`);
}

describeWithBrowser('the customer portal by keyboard, and names shown as text', () => {
  let world: PortalWorld;
  beforeAll(async () => { world = await startPortalWorld({ name: PRODUCT }); }, 90_000);
  afterAll(async () => {
    await world?.close();
    await closeSql();
  });

  for (const language of ['fr', 'en'] as const) {
    it(`${language}: signs in and creates a key with the keyboard alone`, async () => {
      const user = await makeUser(world.gw);
      const context = await world.browser.createBrowserContext();
      const page = await context.newPage();
      await page.setViewport({ width: 360, height: 740 });
      await page.goto(`${world.portal}sign-in`);
      await page.waitForSelector('#sign-in-form');
      if (language === 'en') {
        // The language switch, by keyboard too: the focus stays on it once the page is drawn again.
        await tabTo(page, '#lang');
        await page.keyboard.press('Enter');
        await page.waitForFunction(() => document.documentElement.lang === 'en' && document.activeElement?.id === 'lang');
      }
      await tabTo(page, '#email');
      await page.keyboard.type(user.email);
      await tabTo(page, '#password');
      await page.keyboard.type(user.password);
      await page.keyboard.press('Enter');
      await page.waitForSelector('#signed-in-as');
      // The new page's heading has the focus: a screen reader says where the user is.
      expect(await page.evaluate(() => document.activeElement?.tagName)).toBe('H1');

      await tabTo(page, 'nav.sections a[href$="/keys"]');
      await page.keyboard.press('Enter');
      await page.waitForSelector('#create-key');
      await tabTo(page, '#key-name');
      await page.keyboard.type('keyboard key');
      await tabTo(page, 'input[name=scope][value="forecasts:read"]');
      await page.keyboard.press('Space');
      await tabTo(page, '#key-expiry');
      await page.keyboard.press('ArrowDown'); // in 30 days
      await tabTo(page, '#create-key-submit');
      await page.keyboard.press('Enter');
      await page.waitForSelector('#new-key');
      // The focus is on the new key's panel, and the next Tab stops are its field and its copy button.
      expect(await page.evaluate(() => document.activeElement?.id)).toBe('new-key');
      await tabTo(page, '#copy-key');
      const keys = await world.gw.get('/api/v1/user/api-keys', { headers: bearer(user.access) });
      expect(keys.json.api_keys).toEqual([expect.objectContaining({ name: 'keyboard key', scopes: ['forecasts:read'], expires_at: expect.any(String) })]);
      const days = (Date.parse(keys.json.api_keys[0].expires_at) - Date.now()) / 86_400_000;
      expect(days).toBeGreaterThan(29);
      expect(days).toBeLessThan(31);

      // Revoke by keyboard: the confirmation takes the focus, and the list says the key is gone.
      await tabTo(page, 'button[data-action=revoke]');
      await page.keyboard.press('Enter');
      expect(await page.evaluate(() => document.activeElement?.getAttribute('data-action'))).toBe('confirm-revoke');
      await page.keyboard.press('Enter');
      await page.waitForFunction(() => document.activeElement?.id === 'keys-status');
      expect(await textOf(page, '#keys-status')).toContain('keyboard key');
      expect((await world.gw.get('/api/v1/user/api-keys', { headers: bearer(user.access) })).json.api_keys).toEqual([]);
      await context.close();
    }, 90_000);
  }

  it('shows a product name, an organization name and a key name holding markup as text', async () => {
    const user = await makeUser(world.gw);
    await world.gw.post('/api/v1/auth/email/verify', { token: (await world.smtp.waitFor(user.email)).token });
    const org = await world.gw.post('/api/v1/orgs', { name: ORG }, { headers: bearer(user.access) });
    expect(org.status).toBe(201);
    const key = await world.gw.post('/api/v1/user/api-keys', { name: KEY }, { headers: bearer(user.access) });
    expect(key.status).toBe(201);
    const context = await world.browser.createBrowserContext();
    const page = await context.newPage();
    await page.goto(`${world.portal}sign-in`);
    await page.waitForSelector('#sign-in-form');
    expect(await textOf(page, '#product-name')).toBe(PRODUCT);
    expect(await page.title()).toContain(PRODUCT);
    await page.type('#email', user.email);
    await page.type('#password', user.password);
    await Promise.all([page.waitForSelector('#signed-in-as'), page.click('#sign-in-submit')]);
    await page.goto(`${world.portal}keys`);
    expect(await textOf(page, 'tbody .key-name')).toBe(KEY);
    await page.goto(`${world.portal}orgs?id=${org.json.id}`);
    expect(await textOf(page, '#h-org')).toBe(ORG);
    expect(await page.$$eval('tbody a', (as) => as.map((a) => a.textContent))).toContain(ORG);
    // Acting for it: the banner names it, as text.
    await page.click(`button[data-act="${org.json.id}"]`);
    await page.waitForSelector('#acting');
    expect(await textOf(page, '#acting')).toContain(ORG);
    expect(await page.evaluate(() => (globalThis as { __injected?: number }).__injected)).toBeUndefined();
    expect(await page.$$eval('img:not(.logo), script:not([src])', (els) => els.length)).toBe(0);
    await context.close();
  }, 60_000);

  it('refuses another site\'s form post and frame, a call without the header, a redirect away, and a cookie replayed after sign-out', async () => {
    const user = await makeUser(world.gw);
    const context = await world.browser.createBrowserContext();
    const page = await context.newPage();
    // Another site (the echo upstream, on 127.0.0.1): its form posts to the sign-in, its frame shows the portal.
    await page.goto(`${world.upstream.url}/elsewhere`);
    await Promise.all([page.waitForNavigation(), page.evaluate((action, email, password) => {
      const f = document.createElement('form');
      f.method = 'POST';
      f.action = action;
      for (const [name, value] of [['email', email], ['password', password]]) f.append(Object.assign(document.createElement('input'), { name, value }));
      document.body.append(f);
      f.submit();
    }, `${world.portal}api/login`, user.email, user.password)]);
    expect(await page.evaluate(() => document.body.innerText)).toContain('csrf_token_invalid');
    expect(await context.cookies()).toEqual([]);
    await page.goto(`${world.upstream.url}/elsewhere`);
    await page.evaluate((src) => new Promise((resolve) => {
      const frame = Object.assign(document.createElement('iframe'), { src, onload: resolve });
      document.body.append(frame);
    }), `${world.portal}sign-in`);
    const framed = page.frames().find((f) => f !== page.mainFrame())!;
    expect(framed.url()).not.toContain('/portal/');
    expect(await framed.$('#sign-in-form')).toBeNull();

    // On the portal's own page: a call without X-Gateway-Portal is refused as another site's.
    await page.goto(`${world.portal}sign-in?next=${encodeURIComponent('https://evil.example/')}`);
    await page.waitForSelector('#sign-in-form');
    expect(await page.evaluate(async (body) => (await fetch('api/login', { method: 'POST', headers: { 'content-type': 'application/json' }, body })).status,
      JSON.stringify({ email: user.email, password: user.password }))).toBe(403);
    // `next` names one of the portal's pages or none: signed in, the browser stays on the portal.
    await page.type('#email', user.email);
    await page.type('#password', user.password);
    await page.click('#sign-in-submit');
    await page.waitForSelector('#signed-in-as');
    expect(page.url()).toBe(world.portal);
    // The session cookie is HttpOnly (no script reads it) and, replayed after sign-out, signs nobody in.
    const cookie = (await context.cookies()).find((c) => c.name === 'gw_portal')!;
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict' });
    expect(await page.evaluate(() => document.cookie)).toBe('');
    await page.click('#sign-out');
    await page.waitForSelector('#sign-in-form');
    await context.close();
    const replay = await world.browser.createBrowserContext();
    await replay.setCookie(cookie);
    const again = await replay.newPage();
    await again.goto(`${world.portal}keys`);
    await again.waitForSelector('#sign-in-form');
    expect(new URL(again.url()).pathname).toBe('/portal/sign-in');
    await replay.close();
  }, 60_000);
});
