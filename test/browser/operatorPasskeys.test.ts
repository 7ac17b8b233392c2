// Operator passkeys in Chromium (CONTRACT §24), with its virtual authenticator as
// test/browser/passkeys.test.ts does for users: the gateway runs docs/operators.md's
// operator-passkeys example as written; an operator signed in with TOTP adds a passkey from the
// console ("Add a passkey"), then signs in on /console/operator.html with email, password and the
// passkey instead of a code; another enrols through its link with a passkey instead of the app.
// The console reached by its IP offers no passkey.
import { randomBytes } from 'node:crypto';
import type { CDPSession, Page } from 'puppeteer-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { sha256Hex } from '../../src/credentials/digest.js';
import { CONSOLE_COOKIE } from '../../src/credentials/shapes.js';
import { createEnrolment, insertOperator } from '../../src/storage/operators/operators.js';
import { describeWithBrowser, launchBrowser, type TestBrowser } from '../helpers/browser.js';
import { docsExample } from '../helpers/docs.js';
import { ADMIN_KEY, closeSql, marker, startTestGateway, testClock, testConfig, throwawayDatabase, type TestGateway, type ThrowawayDatabase } from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { sparePort } from '../helpers/ports.js';
import { totpCode } from '../helpers/totp.js';

describeWithBrowser('operator passkeys in Chromium, with its virtual authenticator', () => {
  let gw: TestGateway;
  let chromium: TestBrowser;
  let port: number;
  let origin: string;
  // A database of its own: the run's keeps no operator, so that the tests of an empty admin API hold.
  let db: ThrowawayDatabase;
  const clock = testClock();

  beforeAll(async () => {
    port = await sparePort();
    origin = `http://localhost:${port}`;
    const env = { ADMIN_PORT: String(port), CONSOLE_ORIGIN: origin, CONSOLE_HOST: 'localhost', GATEWAY_ADMIN_KEY: ADMIN_KEY };
    const { admin } = parseConfig(docsExample('operators', 'operator-passkeys'), 'gateway.yaml', env);
    expect(admin.passkeys).toEqual({ rpId: 'localhost', origins: [origin], rpName: 'Example console' });
    db = await throwawayDatabase({ migrated: true });
    gw = await startTestGateway(testConfig({ admin, storage: db.storage }), { clock });
    chromium = await launchBrowser();
  }, 60_000);

  afterAll(async () => {
    await chromium?.close();
    await gw?.close();
    await db?.drop();
    await closeSql();
  });

  async function virtualAuthenticator(page: Page): Promise<{ cdp: CDPSession; authenticatorId: string }> {
    const cdp = await page.createCDPSession();
    await cdp.send('WebAuthn.enable');
    const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
      options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
    });
    return { cdp, authenticatorId };
  }

  it('adds a passkey from the console, then signs in with password and passkey instead of a code', async () => {
    const email = `op-${marker()}@example.test`;
    const operator = (await insertOperator(gw.services.db, email, 'support', new Date()))!;
    const token = randomBytes(32).toString('base64url');
    await createEnrolment(gw.services.db, operator.id, sha256Hex(token), new Date(Date.now() + 86_400_000));
    const headers = { origin };
    const start = await request(origin, 'POST', '/console/operator/enrolment', { headers, json: { token } });
    const code = totpCode(start.json.secret as string, clock().getTime());
    const done = await request(origin, 'POST', '/console/operator/enrolment/complete', { headers, json: { token, password: 'operator-password-1', code } });
    expect(done.status).toBe(200);
    const session = /gw_console=([^;]+)/.exec(String(done.headers['set-cookie']))![1]!;

    const context = await chromium.browser.createBrowserContext();
    const page = await context.newPage();
    const { cdp, authenticatorId } = await virtualAuthenticator(page);
    await context.setCookie({ name: CONSOLE_COOKIE, value: session, domain: 'localhost', path: '/console/', httpOnly: true, sameSite: 'Strict' });
    await page.goto(`${origin}/console/#/users`);
    await page.waitForSelector('#add-passkey', { visible: true });
    await page.click('#add-passkey');
    await page.waitForFunction(() => document.getElementById('passkey-status')?.textContent?.startsWith('Passkey added'));
    const { credentials } = await cdp.send('WebAuthn.getCredentials', { authenticatorId });
    expect(credentials).toEqual([expect.objectContaining({ isResidentCredential: true, rpId: 'localhost', userHandle: Buffer.from(`operator:${operator.id}`).toString('base64') })]);

    // Signed out, then in again with the passkey: the code field is left empty.
    await page.click('#sign-out');
    await page.waitForSelector('#sign-in', { visible: true });
    await page.goto(`${origin}/console/operator.html`);
    await page.waitForSelector('#passkey-sign-in', { visible: true });
    await page.type('#email', email);
    await page.type('#password', 'operator-password-1');
    await Promise.all([page.waitForNavigation(), page.click('#passkey-sign-in')]);
    await page.waitForSelector('#nav', { visible: true });
    const [row] = await db.sql<{ counter: string; last_used_at: Date | null }>('SELECT counter, last_used_at FROM operator_passkeys WHERE operator_id = $1', [operator.id]);
    expect(row!.last_used_at).toEqual(expect.any(Date));
    expect(await db.sql("SELECT actor_id FROM audit_events WHERE type = 'operator.passkey_added'", [])).toEqual([{ actor_id: operator.id }]);
    await context.close();
  });

  it('enrols through the link with a passkey instead of the app', async () => {
    const email = `op-${marker()}@example.test`;
    const operator = (await insertOperator(gw.services.db, email, 'viewer', new Date()))!;
    const token = randomBytes(32).toString('base64url');
    await createEnrolment(gw.services.db, operator.id, sha256Hex(token), new Date(Date.now() + 86_400_000));
    const context = await chromium.browser.createBrowserContext();
    const page = await context.newPage();
    const { cdp, authenticatorId } = await virtualAuthenticator(page);
    await page.goto(`${origin}/console/operator.html#enrol=${token}`);
    await page.waitForSelector('#enrol-passkey', { visible: true });
    await page.type('#new-password', 'operator-password-1');
    await Promise.all([page.waitForNavigation(), page.click('#enrol-passkey')]);
    await page.waitForSelector('#nav', { visible: true });
    const { credentials } = await cdp.send('WebAuthn.getCredentials', { authenticatorId });
    expect(credentials).toEqual([expect.objectContaining({ rpId: 'localhost', userHandle: Buffer.from(`operator:${operator.id}`).toString('base64') })]);
    expect(await db.sql('SELECT name FROM operator_passkeys WHERE operator_id = $1', [operator.id])).toHaveLength(1);
    await context.close();
  });

  it('the console reached by its IP offers no passkey: TOTP only', async () => {
    const context = await chromium.browser.createBrowserContext();
    const page = await context.newPage();
    const asked = page.waitForResponse((res) => res.url().endsWith('/console/operator/passkey'));
    await page.goto(`http://127.0.0.1:${port}/console/operator.html`);
    expect((await asked).status()).toBe(404);
    await page.waitForSelector('#operator-sign-in', { visible: true });
    expect(await page.$eval('#passkey-sign-in', (el) => (el as HTMLElement).hidden)).toBe(true);
    await context.close();
  });
});
