// The whole identity-provider sign-in in headless Chromium (CONTRACT §15): an application's page on
// its own origin (test/browser/oidc-app.html) sends the browser to the gateway's start, the real
// provider (oidc-provider) shows its login form and its consent page, the provider sends the
// browser to the gateway's callback, which sends it back to the page with #login_code, and the
// page posts the exchange through CORS. The cookie that binds the sign-in is handled by Chromium
// (HttpOnly, SameSite=Lax on the redirect back, and to the exchange from a page of the gateway's
// site), not by a client written to agree with the gateway. Then issue 45's attack, end to end.
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import type { Page } from 'puppeteer-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { s256 } from '../../src/auth/providers/oidc.js';
import { describeWithBrowser, launchBrowser, serveFile, type StaticSite, type TestBrowser } from '../helpers/browser.js';
import { closeSql, newEmail, sql, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';
import { startTestProvider, type TestProvider } from '../helpers/oidcProvider.js';
import { sparePort } from '../helpers/ports.js';

const PAGE = path.join(import.meta.dirname, 'oidc-app.html');

describeWithBrowser('signing in with an identity provider, in Chromium', () => {
  let site: StaticSite;
  let idp: TestProvider;
  let gw: TestGateway;
  let chromium: TestBrowser;

  beforeAll(async () => {
    site = await serveFile(PAGE);
    // The gateway's public URL is in the provider's client registration: its port is chosen first.
    const port = await sparePort();
    const publicUrl = `http://127.0.0.1:${port}`;
    idp = await startTestProvider([`${publicUrl}/api/v1/auth/oidc/testidp/callback`]);
    gw = await startTestGateway(testConfig({
      server: { port },
      // The page and the gateway are on 127.0.0.1: one site, so the code is bound to the browser
      // (auth.oidc.bindToBrowser's default), and the page posts the exchange with credentials.
      cors: { origins: [site.origin], credentials: true },
      auth: { oidc: { publicUrl, returnTo: [`${site.origin}/`], providers: { testidp: { issuer: idp.issuer, clientId: idp.clientId, clientSecret: idp.clientSecret } } } },
    }));
    chromium = await launchBrowser();
  }, 60_000);

  afterAll(async () => {
    await chromium?.close();
    await gw?.close();
    await Promise.all([idp?.close(), site?.close()]);
    await closeSql();
  });

  it('login form, consent, back to the gateway, and the page exchanges its login_code for a pair with amr ["fed"]', async () => {
    const subject = `ada-${Date.now()}`;
    const email = newEmail('browser');
    idp.users.set(subject, { email, email_verified: true });
    const page = await chromium.browser.newPage();
    await page.goto(`${site.origin}/?gateway=${encodeURIComponent(gw.url)}`);
    await Promise.all([page.waitForNavigation(), page.click('#signin')]);
    await signInAtProviderPage(page, subject);
    await page.waitForSelector('#result[data-done]', { timeout: 15_000 });
    const result = JSON.parse(await page.$eval('#result', (e) => e.textContent ?? '')) as { status: number; sub: string; amr: string[]; plan: string; address: string };
    const [user] = await sql<{ id: number }>('SELECT id FROM users WHERE email = $1', [email]);
    expect(result).toEqual({ status: 200, sub: String(user!.id), amr: ['fed'], plan: 'free', address: `${site.origin}/` });
    // The page cleared the fragment: the code is in no address the user could copy or share.
    expect(page.url()).not.toContain('login_code');
    // The sign-in cookie, set anew by the callback for the code, was cleared by the exchange.
    const cookies = await page.cookies(`${gw.url}/api/v1/auth/oidc/exchange`);
    expect(cookies.filter((c) => c.name === 'gw_oidc')).toEqual([]);
    await page.close();
  });

  it('the attack of issue 45: a sign-in started with the attacker\'s challenge, finished in the victim\'s browser; the code read off the return page is refused to the attacker', async () => {
    const subject = `victim-${Date.now()}`;
    idp.users.set(subject, { email: newEmail('victim'), email_verified: true });
    const attackerVerifier = randomBytes(32).toString('base64url');
    // Another person's browser: no session at the provider, no cookie of the first test.
    const victim = await chromium.browser.createBrowserContext();
    const page = await victim.newPage();
    // A script on the return page that records location.hash (a third-party tag; as well a redirect of the application that keeps the fragment).
    await page.evaluateOnNewDocument(() => {
      if (location.hash.includes('login_code')) (window as unknown as { recorded: string }).recorded = location.hash;
    });
    // The attacker's link, opened by the victim: the application's exact return page, the attacker's challenge.
    await page.goto(`${gw.url}/api/v1/auth/oidc/testidp/start?return_to=${encodeURIComponent(`${site.origin}/`)}&code_challenge=${s256(attackerVerifier)}`);
    await signInAtProviderPage(page, subject);
    await page.waitForFunction(() => 'recorded' in window, { timeout: 15_000 });
    const recorded = await page.evaluate(() => (window as unknown as { recorded: string }).recorded);
    const loginCode = new URLSearchParams(recorded.slice(1)).get('login_code');
    expect(loginCode).toMatch(/^[\w-]{43}$/);
    // The attacker holds the code and the verifier of its challenge, not the victim's cookie.
    const stolen = await fetch(`${gw.url}/api/v1/auth/oidc/exchange`, {
      method: 'POST', headers: { 'content-type': 'application/json', origin: site.origin }, body: JSON.stringify({ login_code: loginCode, code_verifier: attackerVerifier }),
    });
    expect([stolen.status, await stolen.json()]).toEqual([400, { error: 'Lien invalide ou expiré' }]);
    const [user] = await sql<{ id: number }>('SELECT id FROM users WHERE email = $1', [idp.users.get(subject)!.email]);
    expect(await sql('SELECT id FROM sessions WHERE user_id = $1', [user!.id])).toEqual([]);
    await victim.close();
  });
});

/** The provider's login form (any password: the login is the subject), then its consent page; the browser then leaves for the gateway's callback. */
async function signInAtProviderPage(page: Page, subject: string): Promise<void> {
  await page.waitForSelector('input[name=login]');
  await page.type('input[name=login]', subject);
  await page.type('input[name=password]', 'anything');
  await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
  expect(await page.$eval('form', (f) => f.innerHTML)).toContain('value="consent"');
  await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
}
