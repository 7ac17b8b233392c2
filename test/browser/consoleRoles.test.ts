/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
// The console by role, in Chromium (CONTRACT §24): operators enrol and sign in as themselves, and
// the console disables what their role does not allow, saying which role it needs. A viewer can
// click none of the user page's changes and has no Operators link; a support revokes a session but
// cannot save a plan; an admin opens the Operators page, changes a role and removes an operator.
// axe finds nothing on the Operators page, nor on a viewer's user page with its disabled controls.
import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { Page } from 'puppeteer-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import { sha256Hex } from '../../src/credentials/digest.js';
import { CONSOLE_COOKIE } from '../../src/credentials/shapes.js';
import { createEnrolment, findOperator, insertOperator, type OperatorRole } from '../../src/storage/operators/operators.js';
import { describeWithBrowser, launchBrowser, type TestBrowser } from '../helpers/browser.js';
import { axeViolations, consolePage } from './consolePage.js';
import { closeSql, marker, startTestGateway, testClock, throwawayDatabase, type TestGateway, type TestUser, type ThrowawayDatabase } from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { totpCode } from '../helpers/totp.js';
import { createOrg, organizationsConfig, verifiedUser } from '../orgs/helpers.js';


describeWithBrowser('the console by operator role, in Chromium', () => {
  let smtp: SmtpCatcher;
  let gw: TestGateway;
  // A database of its own: the run's keeps no operator, so that the tests of an empty admin API hold.
  let db: ThrowawayDatabase;
  let orgId: number;
  let admin: FastifyInstance;
  let url: string;
  let chromium: TestBrowser;
  let user: TestUser;
  const clock = testClock();

  /** An operator as `gateway operators add` makes one, enrolled through its link as operatorsSignIn.test.ts does: the session cookie's value. */
  async function enrolled(role: OperatorRole): Promise<{ id: number; email: string; session: string }> {
    const email = `op-${marker()}@example.test`;
    const operator = (await insertOperator(gw.services.db, email, role, new Date()))!;
    const token = randomBytes(32).toString('base64url');
    await createEnrolment(gw.services.db, operator.id, sha256Hex(token), new Date(Date.now() + 86_400_000));
    const headers = { origin: new URL(url).origin };
    const start = await request(url, 'POST', '/console/operator/enrolment', { headers, json: { token } });
    const code = totpCode(start.json.secret as string, clock().getTime());
    const done = await request(url, 'POST', '/console/operator/enrolment/complete', { headers, json: { token, password: 'operator-password-1', code } });
    expect(done.status).toBe(200);
    const session = /gw_console=([^;]+)/.exec(String(done.headers['set-cookie']))![1]!;
    return { id: operator.id, email, session };
  }

  /** A browser of the operator's own (its own cookies), on the console, signed in with their session. */
  async function consoleAs(session: string, hash: string): Promise<Page> {
    const context = await chromium.browser.createBrowserContext();
    const page = await consolePage(context);
    await context.setCookie({ name: CONSOLE_COOKIE, value: session, domain: '127.0.0.1', path: '/console/', httpOnly: true, sameSite: 'Strict' });
    await page.goto(`${url}/console/${hash}`);
    await page.waitForSelector('#nav', { visible: true });
    return page;
  }

  const axe = (page: Page) => axeViolations(page);

  /** Each control's disabled state and the reason it gives. */
  const states = (page: Page, selectors: string[]) => page.evaluate((list) => list.map((s) => {
    const el = document.querySelector(s) as HTMLButtonElement | null;
    return [s, el?.disabled ?? 'missing', el?.getAttribute('aria-description') ?? null];
  }), selectors);

  beforeAll(async () => {
    smtp = await startSmtpCatcher();
    db = await throwawayDatabase({ migrated: true });
    const config = organizationsConfig(smtp);
    gw = await startTestGateway({ ...config, storage: { ...config.storage, ...db.storage } }, { clock });
    admin = await buildAdminApp(gw.services);
    url = await admin.listen({ host: '127.0.0.1', port: 0 });
    user = await verifiedUser(gw, smtp);
    orgId = await createOrg(gw, user, `${marker()} Co`);
    chromium = await launchBrowser();
  }, 60_000);
  afterAll(async () => {
    await chromium?.close();
    await admin?.close();
    await gw?.close();
    await db?.drop();
    await smtp?.close();
    await closeSql();
  });

  it('a viewer sees every change on a user\'s page disabled, with the role it needs, and no Operators link', async () => {
    const viewer = await enrolled('viewer');
    const page = await consoleAs(viewer.session, `#/user/${user.id}`);
    await page.waitForSelector('#save-plan');
    const needsAdmin = 'Needs the admin role (you are viewer)';
    const needsSupport = 'Needs the support role (you are viewer)';
    expect(await states(page, ['#user-plan', '#save-plan', '#toggle-active', '#revoke-all', '#reset-mfa', '#delete-confirm', '#delete-user', 'button[aria-label^="Revoke session"]'])).toEqual([
      ['#user-plan', true, needsAdmin], ['#save-plan', true, needsAdmin], ['#toggle-active', true, needsSupport], ['#revoke-all', true, needsSupport],
      ['#reset-mfa', true, needsSupport], ['#delete-confirm', true, needsAdmin], ['#delete-user', true, needsAdmin], ['button[aria-label^="Revoke session"]', true, needsSupport],
    ]);
    expect(await page.$eval('#nav-operators', (a) => (a as HTMLElement).hidden)).toBe(true);
    expect(await axe(page)).toEqual([]);
    // Clicking does nothing: the plan stays, no request is made.
    await page.click('#save-plan');
    expect((await db.sql<{ plan: string }>('SELECT plan FROM users WHERE id = $1', [user.id]))[0]!.plan).toBe('free');
    // The users list offers no account creation.
    await page.goto(`${url}/console/#/users`);
    await page.waitForSelector('#create-user-button');
    expect(await states(page, ['#create-user-button'])).toEqual([['#create-user-button', true, needsAdmin]]);
    // Nor an organization's plan change.
    await page.goto(`${url}/console/#/org/${orgId}`);
    await page.waitForSelector('#save-org-plan');
    expect(await states(page, ['#org-plan', '#save-org-plan'])).toEqual([['#org-plan', true, needsAdmin], ['#save-org-plan', true, needsAdmin]]);
    await page.browserContext().close();
  });

  it('a support revokes the user\'s session, but the plan\'s Save is disabled', async () => {
    const support = await enrolled('support');
    const page = await consoleAs(support.session, `#/user/${user.id}`);
    await page.waitForSelector('button[aria-label^="Revoke session"]');
    expect(await states(page, ['#save-plan', '#toggle-active', '#reset-mfa', '#delete-user'])).toEqual([
      ['#save-plan', true, 'Needs the admin role (you are support)'], ['#toggle-active', false, null], ['#reset-mfa', false, null], ['#delete-user', true, 'Needs the admin role (you are support)'],
    ]);
    expect(await page.$eval('#nav-operators', (a) => (a as HTMLElement).hidden)).toBe(true);
    const [session] = await db.sql<{ id: number }>('SELECT id FROM sessions WHERE user_id = $1', [user.id]);
    await page.click(`button[aria-label="Revoke session ${session!.id}"]`);
    await page.waitForFunction((id) => document.getElementById('user-status')?.textContent === `Session ${id} revoked`, { timeout: 10_000 }, session!.id);
    // The session is over: none of its refresh tokens works any more, and the page no longer lists it.
    expect(await db.sql('SELECT id FROM refresh_tokens WHERE session_id = $1 AND revoked = 0', [session!.id])).toEqual([]);
    await page.waitForFunction((id) => !document.querySelector(`button[aria-label="Revoke session ${id}"]`), { timeout: 10_000 }, session!.id);
    await page.browserContext().close();
  });

  it('an admin opens the Operators page, changes a role and removes an operator with its email typed', async () => {
    const boss = await enrolled('admin');
    const other = await enrolled('viewer');
    const page = await consoleAs(boss.session, '#/users');
    expect(await page.$eval('#nav-operators', (a) => (a as HTMLElement).hidden)).toBe(false);
    await page.click('#nav-operators');
    await page.waitForSelector(`#role-${other.id}`);
    const row = await page.$$eval('#view tbody tr', (trs, email) => (trs as HTMLTableRowElement[]).filter((tr) => tr.cells[0]!.textContent === email)
      .map((tr) => [tr.cells[0]!.textContent, (tr.querySelector('select') as HTMLSelectElement).value, tr.cells[2]!.textContent, tr.cells[3]!.textContent]), other.email);
    expect(row).toEqual([[other.email, 'viewer', 'yes', 'yes']]);
    expect(await axe(page)).toEqual([]);

    await page.select(`#role-${other.id}`, 'support');
    await page.click(`#save-role-${other.id}`);
    await page.waitForFunction((text) => document.getElementById('operators-status')?.textContent === text, { timeout: 10_000 }, `${other.email} is now support`);
    expect((await findOperator(gw.services.db, other.id))?.role).toBe('support');

    // Not removable until the email is typed exactly.
    expect(await page.$eval('#remove-operator', (b) => (b as HTMLButtonElement).disabled)).toBe(true);
    await page.type('#remove-confirm', other.email);
    expect(await page.$eval('#remove-operator', (b) => (b as HTMLButtonElement).disabled)).toBe(false);
    await page.click('#remove-operator');
    await page.waitForFunction((text) => document.getElementById('operators-status')?.textContent === text, { timeout: 10_000 }, `Operator ${other.email} removed`);
    expect(await findOperator(gw.services.db, other.id)).toBeUndefined();
    expect(await page.$$eval('#view tbody tr td:first-child', (tds, email) => tds.some((td) => td.textContent === email), other.email)).toBe(false);
    expect(await axe(page)).toEqual([]);
    await page.browserContext().close();
  });

  it('an admin resets another operator\'s second factor on the Operators page: the new enrolment link shown, audited; never their own; only with the page\'s CSRF token and Origin', async () => {
    const boss = await enrolled('admin');
    const lost = await enrolled('support');
    const totpOf = () => db.sql('SELECT 1 FROM operator_totp WHERE operator_id = $1 AND confirmed_at IS NOT NULL', [lost.id]);
    // A script holding the cookie but not the page's CSRF token, or the token from another site's page: refused, nothing reset.
    const cookie = `${CONSOLE_COOKIE}=${boss.session}`;
    const { csrf } = (await request(url, 'GET', '/console/session', { headers: { cookie } })).json as { csrf: string };
    const path = `/console/api/v1/operators/${lost.id}/mfa`;
    const noToken = await request(url, 'DELETE', path, { headers: { cookie, origin: new URL(url).origin } });
    const foreign = await request(url, 'DELETE', path, { headers: { cookie, origin: 'https://evil.example', 'x-csrf-token': csrf } });
    expect([noToken.status, foreign.status]).toEqual([403, 403]);
    expect(await totpOf()).toHaveLength(1);

    const page = await consoleAs(boss.session, '#/operators');
    await page.waitForSelector(`#reset-mfa-${lost.id}`);
    const own = 'You cannot reset your own second factor: another admin, or `gateway operators reset-mfa`, does it';
    expect(await states(page, [`#reset-mfa-${boss.id}`, `#reset-mfa-${lost.id}`])).toEqual([[`#reset-mfa-${boss.id}`, true, own], [`#reset-mfa-${lost.id}`, false, null]]);
    await page.click(`#reset-mfa-${lost.id}`);
    await page.waitForSelector('#enrolment-link', { timeout: 10_000 });
    expect(await page.$eval('#operators-status', (p) => p.textContent)).toMatch(new RegExp(`^Second factor of ${lost.email.replace(/[.]/g, '\\.')} reset\\. Give them this enrolment link`));
    const link = await page.$eval('#enrolment-link', (c) => c.textContent!);
    expect(link).toMatch(new RegExp(`^${new URL(url).origin}/console/operator\\.html#enrol=[\\w-]{43}$`));
    expect(await totpOf()).toEqual([]);
    // The link is the one stored (hashed): it enrols the operator again.
    const token = new URL(link).hash.replace('#enrol=', '');
    expect(await db.sql('SELECT 1 FROM operator_enrolments WHERE operator_id = $1 AND token_hash = $2', [lost.id, sha256Hex(token)])).toHaveLength(1);
    const row = await page.$$eval('#view tbody tr', (trs, email) => (trs as HTMLTableRowElement[]).filter((tr) => tr.cells[0]!.textContent === email)
      .map((tr) => tr.cells[3]!.textContent), lost.email);
    expect(row).toEqual(['no']);
    const [audit] = await db.sql<{ actor: string; actor_id: string }>("SELECT actor, actor_id FROM audit_events WHERE type = 'operator.mfa_reset' AND data->>'operator_id' = $1", [String(lost.id)]);
    expect([audit?.actor, Number(audit?.actor_id)]).toEqual(['operator', boss.id]);
    expect(await axe(page)).toEqual([]);
    await page.browserContext().close();
  });

  it('the sign-in page links to operators\' sign-in, and without a shared key offers only that (CONTRACT §29)', async () => {
    await enrolled('viewer');
    const keyless = await startTestGateway({ ...gw.services.config, admin: { ...gw.services.config.admin, apiKey: '' } }, { clock });
    const keylessAdmin = await buildAdminApp(keyless.services);
    const keylessUrl = await keylessAdmin.listen({ host: '127.0.0.1', port: 0 });
    try {
      const signInPage = async (base: string) => {
        const page = await consolePage(await chromium.browser.createBrowserContext());
        await page.goto(`${base}/console/`);
        await page.waitForSelector('#operator-link', { visible: true });
        return page;
      };
      const keyed = await signInPage(url);
      expect(await keyed.$eval('#key', (el) => (el as HTMLElement).offsetParent !== null)).toBe(true);
      expect(await keyed.$eval('#operator-link', (a) => (a as HTMLAnchorElement).href)).toBe(`${url}/console/operator.html`);
      await keyed.browserContext().close();
      const only = await signInPage(keylessUrl);
      await only.waitForFunction(() => document.getElementById('key-sign-in')!.hidden);
      expect(await only.evaluate(() => document.activeElement?.id)).toBe('operator-link');
      expect(await axe(only)).toEqual([]);
      await only.browserContext().close();
    } finally {
      await keylessAdmin.close();
      await keyless.close();
    }
  });
});
