// The whole identity-provider sign-in in headless Chromium (CONTRACT §15): an application's page on
// its own origin (test/browser/oidc-app.html) sends the browser to the gateway's start, the real
// provider (oidc-provider) shows its login form and its consent page, the provider sends the
// browser to the gateway's callback, which sends it back to the page with #login_code, and the
// page posts the exchange through CORS. The cookie that binds the sign-in is handled by Chromium
// (HttpOnly, SameSite=Lax on the redirect back), not by a client written to agree with the gateway.
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
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
      cors: { origins: [site.origin] },
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
    // The provider's login form.
    expect(new URL(page.url()).origin).toBe(idp.issuer);
    await page.type('input[name=login]', subject);
    await page.type('input[name=password]', 'anything');
    await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    // Its consent page.
    expect(await page.$eval('form', (f) => f.innerHTML)).toContain('value="consent"');
    await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    await page.waitForSelector('#result[data-done]', { timeout: 15_000 });
    const result = JSON.parse(await page.$eval('#result', (e) => e.textContent ?? '')) as { status: number; sub: string; amr: string[]; plan: string; address: string };
    const [user] = await sql<{ id: number }>('SELECT id FROM users WHERE email = $1', [email]);
    expect(result).toEqual({ status: 200, sub: String(user!.id), amr: ['fed'], plan: 'free', address: `${site.origin}/` });
    // The page cleared the fragment: the code is in no address the user could copy or share.
    expect(page.url()).not.toContain('login_code');
    // The sign-in cookie was used up and cleared by the callback.
    const cookies = await page.cookies(`${gw.url}/api/v1/auth/oidc/testidp/callback`);
    expect(cookies.filter((c) => c.name === 'gw_oidc')).toEqual([]);
    await page.close();
  });
});
