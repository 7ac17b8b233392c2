/// <reference lib="dom" />
// The customer portal's second factors, organizations and account deletion in Chromium (CONTRACT
// §30): TOTP enrolled with the QR code's secret, then a sign-in that asks for the second factor
// (a recovery code); a passkey added with Chromium's virtual authenticator, then a sign-in with it
// alone; an organization made, a second customer invited who accepts in another browser context,
// an organization key; and the account deleted with a fresh second factor.
import { randomInt, randomUUID } from 'node:crypto';
import type { Page } from 'puppeteer-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeWithBrowser } from '../helpers/browser.js';
import { bearer, closeSql, makeUser, sql, type TestUser } from '../helpers/gateway.js';
import { idpMetadata } from '../helpers/samlIdp.js';
import { totpCode } from '../helpers/totp.js';
import { GITHUB_LOGIN, readUntil, startPageIdp, startPortalWorld, textOf, type PageIdp, type PortalWorld } from './portalWorld.js';

type Language = 'fr' | 'en';

describeWithBrowser('the customer portal: second factors, organizations, deletion', () => {
  let world: PortalWorld;
  let idp: PageIdp;
  beforeAll(async () => { [world, idp] = await Promise.all([startPortalWorld(), startPageIdp()]); }, 90_000);
  afterAll(async () => {
    await idp?.close();
    await world?.close();
    await closeSql();
  });

  async function newPage(): Promise<Page> {
    const context = await world.browser.createBrowserContext();
    const page = await context.newPage();
    await page.setViewport({ width: 1000, height: 900 });
    return page;
  }

  /** A new customer whose email is verified (TOTP, passkeys, organizations and invitations ask for it). */
  async function verifiedUser(): Promise<TestUser> {
    const user = await makeUser(world.gw);
    const verified = await world.gw.post('/api/v1/auth/email/verify', { token: (await world.smtp.waitFor(user.email)).token });
    expect(verified.status).toBe(200);
    return user;
  }

  /** The language chosen on the switch, as a visitor does (kept by this browser context). */
  async function choose(page: Page, language: Language): Promise<void> {
    await page.waitForSelector('#lang');
    if (await page.evaluate(() => document.documentElement.lang) === language) return;
    await page.click('#lang');
    await page.waitForFunction((l) => document.documentElement.lang === l, {}, language);
  }

  async function signIn(page: Page, user: TestUser, language: Language = 'fr'): Promise<void> {
    await page.goto(`${world.portal}sign-in`);
    await page.waitForSelector('#sign-in-form');
    await choose(page, language);
    await page.type('#email', user.email);
    await page.type('#password', user.password);
    await page.click('#sign-in-submit');
  }

  // Every page and action of these three in both languages (the switch, then the same steps).
  for (const language of ['fr', 'en'] as const) {
    it(`${language}: enrols TOTP from the QR code's secret, signs in again with a recovery code, and deletes the account with another`, async () => {
      const user = await verifiedUser();
      const page = await newPage();
      await signIn(page, user, language);
      await page.waitForSelector('#signed-in-as');
      await page.goto(`${world.portal}security`);
      await page.waitForSelector('#totp-enrol');
      await page.click('#totp-enrol');
      await page.waitForSelector('#totp-qr');
      const secret = await textOf(page, '#totp-secret');
      await page.type('#totp-code', totpCode(secret, Date.now()));
      await page.click('#totp-confirm button[type=submit]');
      await page.waitForSelector('#recovery-codes');
      const codes = await page.$$eval('#recovery-codes code', (els) => els.map((e) => e.textContent ?? ''));
      expect(codes).toHaveLength(10);

      await page.click('#sign-out');
      await page.waitForSelector('#sign-in-form');
      await page.type('#email', user.email);
      await page.type('#password', user.password);
      await page.click('#sign-in-submit');
      await page.waitForSelector('#mfa-form');
      await page.type('#mfa-code', 'not-a-code');
      await page.click('#mfa-form button[type=submit]');
      await page.waitForFunction(() => /\(code mfa_code_refused\)/.test(document.querySelector('#mfa-form [role=alert]')?.textContent ?? ''));
      await page.$eval('#mfa-code', (el) => { (el as HTMLInputElement).value = ''; });
      await page.type('#mfa-code', codes[0]!);
      await page.click('#mfa-form button[type=submit]');
      await page.waitForSelector('#signed-in-as');

      // Deletion: the typed email, the password, and a code (the API asks for a fresh second factor).
      await page.goto(`${world.portal}account`);
      await page.waitForSelector('#delete-form');
      await page.type('#delete-confirm', 'someone@else.test');
      await page.type('#delete-password', user.password);
      await page.click('#delete-submit');
      await page.waitForFunction(() => (document.querySelector('#delete-form [role=alert]')?.textContent ?? '') !== '');
      expect((await world.gw.post('/api/v1/auth/login', { email: user.email, password: user.password })).status).toBe(403); // still there, asking its code
      await page.$eval('#delete-confirm', (el) => { (el as HTMLInputElement).value = ''; });
      await page.type('#delete-confirm', user.email);
      await page.click('#delete-submit');
      await page.waitForFunction(() => /code/.test(document.querySelector('#delete-form [role=alert]')?.textContent ?? ''));
      await page.type('#delete-code', codes[1]!);
      await page.click('#delete-submit');
      await page.waitForSelector('#deleted');
      expect((await world.gw.post('/api/v1/auth/login', { email: user.email, password: user.password })).status).toBe(401);
      await page.browserContext().close();
    }, 90_000);

    it(`${language}: adds a passkey with the virtual authenticator, then signs in with it alone`, async () => {
      const user = await verifiedUser();
      const page = await newPage();
      const cdp = await page.createCDPSession();
      await cdp.send('WebAuthn.enable');
      await cdp.send('WebAuthn.addVirtualAuthenticator', {
        options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
      });
      await signIn(page, user, language);
      await page.waitForSelector('#signed-in-as');
      await page.goto(`${world.portal}security`);
      await page.waitForSelector('#passkey-add');
      await page.type('#passkey-name', 'Laptop <b>');
      await page.click('#passkey-add');
      await page.waitForFunction(() => (document.querySelector('#security-status')?.textContent ?? '') !== '', { timeout: 5000 }).catch(async () => {
        throw new Error(`no passkey added: ${await page.$$eval('[role=alert]', (els) => els.map((e) => e.textContent).join(' | '))}`);
      });
      expect(await page.$$eval('section[aria-labelledby=h-passkeys] tbody td:first-child', (tds) => tds.map((td) => td.textContent))).toEqual(['Laptop <b>']);

      await page.click('#sign-out');
      await page.waitForSelector('#passkey-sign-in');
      await page.click('#passkey-sign-in');
      await page.waitForSelector('#signed-in-as');
      expect(await textOf(page, '#signed-in-as')).toContain(user.email);
      await page.browserContext().close();
    }, 90_000);

    it(`${language}: creates an organization, invites a second customer who accepts in another browser, and makes an organization key`, async () => {
      const owner = await verifiedUser();
      const invited = await verifiedUser();
      const page = await newPage();
      await signIn(page, owner, language);
      await page.waitForSelector('#signed-in-as');
      await page.goto(`${world.portal}orgs`);
      await page.waitForSelector('#org-name');
      await page.type('#org-name', 'Weather Team');
      await page.click('#create-org button[type=submit]');
      await page.waitForSelector('#h-org');
      expect(await textOf(page, '#h-org')).toBe('Weather Team');
      await page.type('#invite-email', invited.email);
      await page.select('#invite-role', 'admin');
      await page.click('#invite-form button[type=submit]');
      await page.waitForFunction((email) => document.querySelector('#orgs-status')?.textContent?.includes(email), {}, invited.email);

      // The second customer, in a browser of their own, from the mail's link.
      const mail = await world.smtp.waitFor(invited.email, 2);
      expect(mail.link).toMatch(new RegExp(`^${world.portal}join\\?token=`));
      const other = await newPage();
      await other.goto(mail.link!);
      await other.waitForSelector('#join-sign-in');
      await choose(other, language);
      await other.click('#join-sign-in');
      await other.waitForSelector('#sign-in-form');
      await other.type('#email', invited.email);
      await other.type('#password', invited.password);
      await other.click('#sign-in-submit');
      await other.waitForSelector('#join-accept');
      await other.click('#join-accept');
      await other.waitForFunction(() => (document.querySelector('#orgs-status')?.textContent ?? '') !== '');
      expect(await other.$$eval('tbody a', (as) => as.map((a) => a.textContent))).toContain('Weather Team');
      const orgs = await world.gw.get('/api/v1/orgs', { headers: bearer(invited.access) });
      expect(orgs.json.orgs).toEqual([expect.objectContaining({ name: 'Weather Team', role: 'admin' })]);

      // The owner acts for the organization: the keys page makes its keys.
      await page.reload();
      await page.waitForSelector('#h-members');
      expect(await page.$$eval('section[aria-labelledby=h-members] tbody td:first-child', (tds) => tds.map((td) => td.textContent))).toContain(invited.email);
      const orgId = orgs.json.orgs[0].id as number;
      await page.click(`button[data-act="${orgId}"]`);
      await page.waitForSelector('#acting');
      await page.goto(`${world.portal}keys`);
      await page.waitForSelector('#key-role');
      await page.type('#key-name', 'team key');
      await page.click('#create-key-submit');
      await page.waitForSelector('#new-key');
      const keys = await world.gw.get(`/api/v1/orgs/${orgId}/api-keys`, { headers: bearer(owner.access) });
      expect(keys.json.api_keys).toEqual([expect.objectContaining({ name: 'team key', role: 'member' })]);

      // Its usage counts its key's calls, and its billing is the owner's to change.
      const teamKey = await page.$eval('#new-key input', (el) => (el as HTMLInputElement).value);
      const teamCall = await fetch(`${world.gw.url}/api/v1/forecasts`, { headers: { 'x-api-key': teamKey } });
      expect(teamCall.status, await teamCall.text()).toBe(200);
      // On the free plan an organization pools nothing (its days stay at 0, CONTRACT §22); its key's requests show.
      const keyToday = async () => {
        await page.goto(`${world.portal}usage`);
        await page.waitForSelector('section[aria-labelledby=h-keys]');
        return page.$$eval('section[aria-labelledby=h-keys] .scroll tbody tr:last-child td', (tds) => tds.map((td) => td.textContent));
      };
      expect(await readUntil(keyToday, (row) => row[1] === '1')).toEqual([expect.any(String), '1']);
      expect(await textOf(page, 'main h1')).toContain('Weather Team');
      await page.goto(`${world.portal}billing`);
      expect(await textOf(page, 'main h1')).toContain('Weather Team');
      await page.waitForSelector('button[data-price=price_premium_monthly]');
      // The admin acting for it reads the refusal the API gives an admin (billing is the owner's).
      await other.goto(`${world.portal}orgs`);
      await other.waitForSelector(`button[data-act="${orgId}"]`);
      await other.click(`button[data-act="${orgId}"]`);
      await other.waitForSelector('#acting');
      await other.goto(`${world.portal}billing`);
      await other.waitForFunction(() => /\(code [a-z_]+\)/.test(document.querySelector('main [role=alert]')?.textContent ?? ''));
      await page.browserContext().close();
      await other.browserContext().close();
    }, 120_000);
  }

  it('links GitHub from the sign-in page\'s button and unlinks it; ends another session, then every session', async () => {
    const user = await verifiedUser();
    world.github.users.set(GITHUB_LOGIN, { id: randomInt(1e6, 1e9), emails: [{ email: user.email, primary: true, verified: true }] });
    const page = await newPage();
    await page.goto(`${world.portal}sign-in`);
    await page.waitForSelector('button.provider');
    expect(await textOf(page, 'button.provider')).toContain('GitHub');
    // The fake GitHub approves at once; the gateway links the verified address and comes back to signed-in.
    await page.click('button.provider');
    await page.waitForSelector('#signed-in-as', { timeout: 15_000 }).catch(async (err) => {
      throw new Error(`${err}: at ${page.url()}: ${await page.evaluate(() => document.body.innerText)}`);
    });
    expect(new URL(page.url()).pathname).toBe('/portal/');
    expect((await world.gw.get('/api/v1/user/identities', { headers: bearer(user.access) })).json.identities).toEqual([expect.objectContaining({ provider: 'github' })]);

    await page.goto(`${world.portal}security`);
    await page.waitForSelector('section[aria-labelledby=h-providers] tbody button');
    await page.click('section[aria-labelledby=h-providers] tbody button');
    await page.waitForFunction(() => /github/.test(document.querySelector('#security-status')?.textContent ?? ''));
    expect((await world.gw.get('/api/v1/user/identities', { headers: bearer(user.access) })).json.identities).toEqual([]);

    // A second browser signed in: ended from the first one's list, it is signed out at its next load.
    const other = await newPage();
    await signIn(other, user);
    await other.waitForSelector('#signed-in-as');
    await page.reload();
    await page.waitForSelector('button[data-session=current]');
    const others = await page.$$eval('button[data-session]:not([data-session=current])', (bs) => bs.map((b) => b.getAttribute('data-session')));
    expect(others.length).toBeGreaterThanOrEqual(2); // the second browser's, and makeUser's own
    const before = await world.gw.get('/api/v1/user/sessions', { headers: bearer(user.access) });
    const newest = (before.json.sessions as Array<{ id: number; current: boolean; created_at: string }>).sort((a, b) => b.created_at.localeCompare(a.created_at))[0]!;
    await page.click(`button[data-session="${newest.id}"]`);
    await page.waitForFunction(() => (document.querySelector('#security-status')?.textContent ?? '') !== '');
    await other.reload();
    await other.waitForSelector('#sign-in-form');

    // A third browser's "sign out this session": signed out there, its session gone from the list,
    // and its cookie no longer signs it in; the first browser stays signed in.
    const sessionCount = async () => ((await world.gw.get('/api/v1/user/sessions', { headers: bearer(user.access) })).json.sessions as unknown[]).length;
    const third = await newPage();
    await signIn(third, user);
    await third.waitForSelector('#signed-in-as');
    await third.goto(`${world.portal}security`);
    await third.waitForSelector('button[data-session=current]');
    const withThird = await sessionCount();
    await third.click('button[data-session=current]');
    await third.waitForSelector('#sign-in-form');
    expect(await sessionCount()).toBe(withThird - 1);
    await third.reload();
    await third.waitForSelector('#sign-in-form');
    await third.browserContext().close();
    await page.reload();
    await page.waitForSelector('button[data-session=current]');

    // Everywhere: this browser too, and its cookie no longer signs it in.
    await page.click('#sign-out-everywhere');
    await page.waitForSelector('#sign-in-form');
    await page.goto(`${world.portal}keys`);
    await page.waitForSelector('#sign-in-form');
    expect((await world.gw.get('/api/v1/user/sessions', { headers: bearer(user.access) })).status).toBe(401);
    await page.browserContext().close();
    await other.browserContext().close();
  }, 90_000);

  it('signs in with the organization\'s SAML from the email\'s domain, where the enforcing organization\'s refusal of a password leads', async () => {
    const owner = await verifiedUser();
    const name = `Corp ${randomUUID().slice(0, 6)}`;
    const org = await world.gw.post('/api/v1/orgs', { name }, { headers: bearer(owner.access) });
    const domain = `corp-${randomUUID().slice(0, 8)}.test`;
    await sql(`INSERT INTO org_domains (org_id, domain, status, txt_value, verified_by, verified_at, expires_at)
               VALUES ($1, $2, 'verified', 'x', 'operator', now(), now() + interval '7 days')`, [org.json.id, domain]);
    const put = await world.gw.request('PUT', `/api/v1/orgs/${org.json.id}/sso/saml`, {
      headers: bearer(owner.access), json: { metadata_xml: idpMetadata(idp.entityId, `${idp.url}/sso`, [idp.keys]), enforce: true },
    });
    expect(put.status).toBe(200);
    const email = `ada@${domain}`;
    idp.next = { nameId: email, acsUrl: put.json.acs_url, audience: put.json.sp_entity_id };

    const page = await newPage();
    await page.goto(`${world.portal}sign-in`);
    await page.waitForSelector('#sso-form');
    await choose(page, 'en'); // the GitHub case above is in French
    // An address no organization signs in: said on the page, which stays.
    await page.type('#sso-email', `someone@elsewhere-${randomUUID().slice(0, 6)}.test`);
    await page.click('#sso-submit');
    await page.waitForFunction(() => /\(code sso_connection_not_found\)/.test(document.querySelector('#sso-form [role=alert]')?.textContent ?? ''));
    expect(new URL(page.url()).pathname).toBe('/portal/sign-in');

    // A password for an address of the enforcing organization's domain: refused, its form next, filled in.
    await page.type('#email', email);
    await page.type('#password', 'any password at all');
    await page.click('#sign-in-submit');
    await page.waitForFunction(() => /\(code sso_required\)/.test(document.querySelector('#sign-in-form [role=alert]')?.textContent ?? ''));
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('sso-submit');
    expect(await page.$eval('#sso-email', (el) => (el as HTMLInputElement).value)).toBe(email);

    // To the IdP's page, whose form posts the signed Response to the ACS, and back signed in.
    await Promise.all([page.waitForNavigation(), page.click('#sso-submit')]);
    expect(page.url().startsWith(`${idp.url}/sso?SAMLRequest=`)).toBe(true);
    await page.click('#idp-continue');
    await page.waitForSelector('#signed-in-as', { timeout: 15_000 });
    expect(await textOf(page, '#signed-in-as')).toContain(email);
    await page.goto(`${world.portal}orgs`);
    await page.waitForSelector('#create-org');
    expect(await page.$$eval('tbody a', (as) => as.map((a) => a.textContent))).toContain(name);
    await page.browserContext().close();
  }, 60_000);
});
