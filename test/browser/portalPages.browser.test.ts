/// <reference lib="dom" />
// Every page of the customer portal (CONTRACT §30), in French and in English, at 360 px wide:
// axe-core finds no violation, nothing is wider than the screen, and scripts/portal-screenshots.mjs
// (run here, as docs/portal.md says) writes the English pictures to docs/portal/.
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeWithBrowser } from '../helpers/browser.js';
import { bearer, closeSql, makeUser, type TestUser } from '../helpers/gateway.js';
import { axeViolations, startPortalWorld, type PortalWorld } from './portalWorld.js';
// @ts-expect-error: a plain ES module script, without types
import { shootPortal, SIGNED_IN_PAGES, SIGNED_OUT_PAGES } from '../../scripts/portal-screenshots.mjs';

describeWithBrowser('the customer portal\'s pages, axe and 360 px', () => {
  let world: PortalWorld;
  let user: TestUser;
  beforeAll(async () => {
    world = await startPortalWorld();
    user = await makeUser(world.gw);
    // Something on each page: a key with a scope, a few counted uses, an organization.
    const key = await world.gw.post('/api/v1/user/api-keys', { name: 'production server', scopes: ['forecasts:read'] }, { headers: bearer(user.access) });
    for (let i = 0; i < 2; i++) await fetch(`${world.gw.url}/api/v1/forecasts`, { headers: { 'x-api-key': key.json.key as string } });
  }, 90_000);
  afterAll(async () => {
    await world?.close();
    await closeSql();
  });

  it('passes axe on every page in both languages, fits 360 px, and writes the screenshots', async () => {
    const found: string[] = [];
    const written = await shootPortal({
      browser: world.browser, portal: world.portal, email: user.email, password: user.password, languages: ['fr', 'en'],
      visit: async (page: import('puppeteer-core').Page, name: string, language: string) => {
        expect(await page.evaluate(() => document.documentElement.lang)).toBe(language);
        for (const v of await axeViolations(page)) found.push(`${language} ${name}: ${v.id} ${v.nodes.join(' ')}`);
        const wide = await page.evaluate(() => document.documentElement.scrollWidth);
        if (wide > 360) found.push(`${language} ${name}: ${wide} px wide`);
      },
    });
    expect(found).toEqual([]);
    expect(written).toHaveLength(SIGNED_OUT_PAGES.length + SIGNED_IN_PAGES.length);
    for (const file of written) expect(existsSync(file)).toBe(true);
  }, 240_000);
});
