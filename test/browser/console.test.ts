/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
// The console in Chromium (CONTRACT §16): an operator signs in with the admin key, finds a user
// the test created, changes the plan and the gateway enforces it on the next request, revokes a
// session and its refresh fails, reads the audit event the change wrote; a one-time sign-in link
// (as the demo prints) signs in once and never again; every view passes axe-core; screenshots land in
// test-artifacts/console/ (gitignored) for a person to look at.
import type { FastifyInstance } from 'fastify';
import type { Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import { describeWithBrowser, launchBrowser, type TestBrowser } from '../helpers/browser.js';
import { axeViolations, consolePage, screenshot, tableRows } from './consolePage.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { TICKET_MS } from '../../src/admin/console.js';
import { ADMIN_KEY, bearer, closeSql, makeUser, sql, startTestGateway, testClock, testConfig, type TestGateway, type TestUser } from '../helpers/gateway.js';


describeWithBrowser('the console, in Chromium', () => {
  let upstream: EchoUpstream;
  let gw: TestGateway;
  let admin: FastifyInstance;
  let consoleUrl: string;
  let chromium: TestBrowser;
  let page: Page;
  let user: TestUser;
  const clock = testClock();
  const threeDaysAgo = new Date(Date.now() - 3 * 86_400_000).toISOString().slice(0, 10);

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    gw = await startTestGateway(testConfig({ upstreams: { app: { url: upstream.url } }, routes: [{ path: '/api/v1/reports', upstream: 'app', plans: ['pro'] }] }), { clock });
    admin = await buildAdminApp(gw.services);
    consoleUrl = `${await admin.listen({ host: '127.0.0.1', port: 0 })}/console/`;
    user = await makeUser(gw);
    // Uses counted on an earlier day, for the usage chart to show.
    await sql('INSERT INTO usage_days (user_id, day, uses) VALUES ($1, $2, 7)', [user.id, threeDaysAgo]);
    chromium = await launchBrowser();
    page = await consolePage(chromium.browser);
  }, 60_000);
  afterAll(async () => {
    await chromium?.close();
    await admin?.close();
    await gw?.close();
    await upstream?.close();
    await closeSql();
  });

  const shot = (name: string) => screenshot(page, name);
  const text = (selector: string) => page.$eval(selector, (el) => el.textContent ?? '');
  /** The cells' text of each row of the tables under `scope`. */
  const rows = (scope: string) => tableRows(page, scope);
  const axe = () => axeViolations(page);

  it('refuses a wrong key, then signs in with the admin key, by keyboard alone', async () => {
    await page.goto(consoleUrl);
    await page.waitForSelector('#key', { visible: true });
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('key');
    expect(await axe()).toEqual([]);
    await shot('sign-in');
    await page.keyboard.type('wrong-key');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => document.getElementById('sign-in-error')?.textContent !== '');
    expect(await text('#sign-in-error')).toBe('Clé d’administration invalide');
    await page.$eval('#key', (el) => { (el as HTMLInputElement).value = ''; });
    await page.focus('#key');
    await page.keyboard.type(ADMIN_KEY);
    await page.keyboard.press('Enter');
    await page.waitForSelector('#user-search', { visible: true });
    const cookies = await page.cookies();
    expect(cookies).toEqual([expect.objectContaining({ name: 'gw_console', httpOnly: true, sameSite: 'Strict', path: '/console/' })]);
  });

  it('finds the user the test created, with the search box', async () => {
    await page.focus('#query');
    await page.keyboard.type(user.email.toUpperCase());
    await page.keyboard.press('Enter');
    // The unfiltered list (newest first) may show the user too: wait for the search's own answer, the one row.
    await page.waitForFunction((email) => {
      const rows = document.querySelectorAll('tbody tr');
      return rows.length === 1 && rows[0]!.querySelector('a')?.textContent === email;
    }, { timeout: 10_000 }, user.email);
    expect(await page.$$eval('tbody tr', (rows) => rows.length)).toBe(1);
    expect(await axe()).toEqual([]);
    await shot('users');
  });

  it('changes the plan from the keyboard, and the gateway enforces it on the next request', async () => {
    expect((await gw.get('/api/v1/reports', { headers: bearer(user.access) })).status).toBe(403);
    await page.click('tbody a');
    await page.waitForSelector('#user-plan');
    expect(await axe()).toEqual([]);
    // free → premium → pro with the arrow key, Tab to the button, Enter.
    await page.focus('#user-plan');
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('ArrowDown');
    expect(await page.$eval('#user-plan', (el) => (el as HTMLSelectElement).value)).toBe('pro');
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('save-plan');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => document.getElementById('user-status')?.textContent === 'Plan set to pro');
    // Drawn again, the page gives the focus back to the button that was used.
    await page.waitForFunction(() => document.activeElement?.id === 'save-plan');
    expect((await gw.get('/api/v1/reports', { headers: bearer(user.access) })).status).toBe(200);
  });

  it('shows the audit event the change wrote, on the user\'s page', async () => {
    // The page is drawn again after the change: wait for the new drawing's audit section.
    await page.waitForFunction(() => [...document.querySelectorAll('section[aria-labelledby=h-audit] td')].some((td) => td.textContent === 'admin.plan_changed'));
    const audit = await rows('section[aria-labelledby=h-audit]');
    expect(await text('#h-audit')).toBe('Audit events');
    expect(audit).toContainEqual([expect.any(String), 'admin.plan_changed', 'console', '127.0.0.1', '{"plan":"pro"}']);
    // Dates as people read them (CONTRACT §29), the exact instant on hover.
    const [stamp, exact] = await page.$eval('section[aria-labelledby=h-audit] time', (t) => [t.textContent, t.getAttribute('title')]);
    expect(stamp).toMatch(/^\d{1,2} [A-Z][a-z]{2} \d{4}, \d{2}:\d{2} UTC$/);
    expect(exact).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    // Today's and this month's uses against the plan's limits, one meter per window.
    expect(await page.$$eval('#user-usage dt', (els) => els.map((e) => e.textContent))).toEqual(['Today (UTC)', 'This month (UTC)']);
    expect(await page.$eval('#user-plan', (el) => (el as HTMLSelectElement).value)).toBe('pro');
    // The usage chart: drawn by uPlot on a canvas, its numbers as a table beside it.
    const usage = 'section[aria-labelledby=h-usage]';
    expect(await page.$eval(`${usage} canvas`, (c) => (c as HTMLCanvasElement).width)).toBeGreaterThan(0);
    const perDay = await rows(`${usage} details`);
    expect(perDay).toHaveLength(30);
    expect(perDay).toContainEqual([threeDaysAgo, '7']);
    await shot('user');
  });

  it('revokes a session, and its refresh token stops working', async () => {
    const button = await page.waitForSelector('button[aria-label^="Revoke session"]');
    await button!.click();
    await page.waitForFunction(() => /^Session \d+ revoked$/.test(document.getElementById('user-status')?.textContent ?? ''));
    expect((await gw.post('/api/v1/auth/refresh', { refresh_token: user.refresh })).status).toBe(401);
  });

  it('lists the user\'s API keys with their names, and revokes one: the key stops working', async () => {
    // The user is on pro since the plan change above, so may hold keys.
    // The session revoked above ended the user's older tokens too (CONTRACT §33): a new sign-in.
    expect((await gw.get('/api/v1/user/me', { headers: bearer(user.access) })).status).toBe(401);
    const access = (await gw.post('/api/v1/auth/login', { email: user.email, password: user.password })).json.access_token as string;
    const created = await gw.post('/api/v1/user/api-keys', { name: 'nightly export' }, { headers: bearer(access) });
    expect(created.status).toBe(201);
    await page.reload();
    const button = await page.waitForSelector(`button[aria-label="Revoke API key ${created.json.id}"]`);
    expect((await rows('section[aria-labelledby="h-keys"]')).find((r) => r[0] === String(created.json.id))?.slice(1, 4)).toEqual(['nightly export', created.json.start, 'all']);
    await button!.click();
    await page.waitForFunction((id) => document.getElementById('user-status')?.textContent === `API key ${id} revoked`, {}, created.json.id);
    expect((await gw.get('/api/v1/user/me', { headers: { 'x-api-key': created.json.key } })).status).toBe(401);
  });

  it('finds the same event in the audit log, filtered by the user\'s id from the keyboard', async () => {
    await page.click('a[href="#/audit"]');
    await page.waitForSelector('#audit-user', { visible: true });
    await page.focus('#audit-user');
    await page.keyboard.type(String(user.id));
    await page.keyboard.press('Enter');
    await page.waitForFunction(
      (id) => location.hash === `#/audit?user_id=${id}` && [...document.querySelectorAll<HTMLTableRowElement>('tbody tr')].every((tr) => tr.cells[3]?.textContent === String(id)),
      {}, user.id,
    );
    const log = await rows('main');
    expect(log).toContainEqual([expect.any(String), 'admin.plan_changed', 'console', String(user.id), '127.0.0.1', '{"plan":"pro"}']);
    // The user column leads back to the user's page.
    expect(await page.$$eval(`tbody a[href="#/user/${user.id}"]`, (links) => links.length)).toBe(log.length);
    expect(await axe()).toEqual([]);
    await shot('audit');
  });

  it('shows the route table and the health summary', async () => {
    await page.goto(`${consoleUrl}#/routes`);
    await page.waitForFunction(() => [...document.querySelectorAll('td')].some((td) => td.textContent === '/api/v1/reports'));
    expect(await axe()).toEqual([]);
    await shot('routes');
    await page.goto(`${consoleUrl}#/health`);
    await page.waitForSelector('#ready');
    expect(await text('#ready')).toBe('Ready');
    // The run's database serves other test files' gateways too: at least this one is counted.
    expect(Number((await text('#instances')).match(/^Instances: (\d+)$/)?.[1])).toBeGreaterThanOrEqual(1);
    expect(await axe()).toEqual([]);
    await shot('health');
  });

  it('shows what users chose as text: a user agent with markup runs nothing', async () => {
    const other = await makeUser(gw);
    const hostile = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>';
    expect((await gw.post('/api/v1/auth/login', { email: other.email, password: other.password }, { headers: { 'user-agent': hostile } })).status).toBe(200);
    await page.goto(`${consoleUrl}#/user/${other.id}`);
    await page.waitForFunction((ua) => [...document.querySelectorAll('td')].some((td) => td.textContent === ua), {}, hostile);
    expect(await page.$$('td img, td script')).toEqual([]);
    expect(await page.evaluate(() => (globalThis as { pwned?: number }).pwned)).toBeUndefined();
  });

  it('signs out: the session is gone', async () => {
    await page.click('#sign-out');
    await page.waitForSelector('#key', { visible: true });
    await page.goto(consoleUrl);
    await page.waitForSelector('#key', { visible: true });
    expect(await page.$('#user-search')).toBeNull();
  });

  describe('a one-time sign-in link, as `npm run demo` prints', () => {
    const mint = async () => {
      const res = await fetch(new URL('tickets', consoleUrl), { method: 'POST', headers: { authorization: `Bearer ${ADMIN_KEY}` } });
      expect(res.status).toBe(201);
      return ((await res.json()) as { url: string }).url;
    };
    /** The link opened in a browser profile of its own (no cookie from the tests above). */
    async function open(link: string): Promise<Page> {
      const context = await chromium.browser.createBrowserContext();
      const fresh = await context.newPage();
      await fresh.goto(link);
      await fresh.waitForSelector('#user-search, #sign-in:not([hidden])', { visible: true });
      return fresh;
    }
    const refusedOn = async (other: Page) => {
      await other.waitForFunction(() => document.getElementById('sign-in-error')?.textContent !== '');
      expect(await other.$eval('#sign-in-error', (el) => el.textContent)).toBe('Lien de connexion invalide, déjà utilisé ou expiré');
      expect(await other.evaluate(() => document.activeElement?.id)).toBe('key');
      expect(await other.cookies()).toEqual([]);
    };
    let link: string;

    it('signs in, and takes the ticket off the address bar', async () => {
      link = await mint();
      expect(link).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/console\/#ticket=[\w-]{43}$/);
      const signedIn = await open(link);
      expect(await signedIn.$('#user-search')).not.toBeNull();
      expect(signedIn.url()).toBe(`${consoleUrl}#/users`);
      expect(await signedIn.cookies()).toEqual([expect.objectContaining({ name: 'gw_console', httpOnly: true, sameSite: 'Strict' })]);
      // Replaced, not added to: Back leads to where the browser was before the link, not to the ticket.
      await signedIn.goBack();
      expect(signedIn.url()).toBe('about:blank');
      await signedIn.browserContext().close();
    });

    it('a second use is refused: the sign-in form says why', async () => {
      const again = await open(link);
      await refusedOn(again);
      expect(again.url()).toBe(`${consoleUrl}#/users`);
      await again.browserContext().close();
    });

    // The page redeems the ticket by a POST, which carries the page's Origin: the gateway needs it
    // (CONTRACT §26), and on a loopback listener 127.0.0.1, localhost and [::1] are one origin.
    it('signs in through localhost as through 127.0.0.1 (an SSH tunnel\'s address)', async () => {
      const tunnelled = await open((await mint()).replace('//127.0.0.1:', '//localhost:'));
      expect(await tunnelled.$('#user-search')).not.toBeNull();
      expect(await tunnelled.cookies()).toEqual([expect.objectContaining({ name: 'gw_console', domain: 'localhost' })]);
      await tunnelled.browserContext().close();
    });

    it('a link older than 10 minutes is refused', async () => {
      const late = await mint();
      clock.advance(TICKET_MS + 1_000);
      const expired = await open(late);
      await refusedOn(expired);
      await expired.browserContext().close();
    });
  });
});
