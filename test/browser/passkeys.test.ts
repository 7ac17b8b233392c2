// Passkeys in a real browser (CONTRACT §14): headless Chromium with a virtual authenticator (the
// DevTools protocol's WebAuthn domain: a platform authenticator with resident keys and user
// verification), on a page at http://localhost:PORT, which the rpId `localhost` accepts. What
// Chromium checks (the rpId against the page's origin, user verification, the options' shape) is
// checked by Chromium itself, and the gateway verifies what the authenticator really signed. The
// gateway runs docs/second-factor.md's passkeys example as written, and the page runs that page's
// registration and sign-in snippets as written.
import path from 'node:path';
import type { CDPSession, Page } from 'puppeteer-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeWithBrowser, launchBrowser, serveFile, type StaticSite, type TestBrowser } from '../helpers/browser.js';
import { docsBlock, docsExample } from '../helpers/docs.js';
import { bearer, claims, closeSql, makeUser, sql, startTestGateway, testConfigFromYaml, type TestGateway } from '../helpers/gateway.js';

interface Answer { status: number; body: Record<string, unknown>; answer?: Record<string, unknown>; refused?: string }
interface PageApi {
  register(token: string, name: string): Promise<Answer>;
  signIn(): Promise<Answer>;
}

const PAGE = path.join(import.meta.dirname, 'passkeys.html');

describeWithBrowser('passkeys in Chromium, with its virtual authenticator', () => {
  let site: StaticSite;
  let gw: TestGateway;
  let chromium: TestBrowser;
  let page: Page;
  let cdp: CDPSession;
  let authenticatorId: string;

  const inPage = <K extends keyof PageApi>(method: K, ...args: Parameters<PageApi[K]>) =>
    page.evaluate((m, a) => (globalThis as unknown as { passkeys: Record<string, (...x: unknown[]) => Promise<Answer>> }).passkeys[m]!(...a), method, args) as Promise<Answer>;

  beforeAll(async () => {
    site = await serveFile(PAGE);
    const origin = site.origin.replace('127.0.0.1', 'localhost');
    gw = await startTestGateway(testConfigFromYaml(docsExample('second-factor', 'passkeys'), { PASSKEY_RP_ID: 'localhost', PASSKEY_ORIGIN: origin }));
    chromium = await launchBrowser();
    page = await chromium.browser.newPage();
    await page.goto(`${origin}/?gateway=${encodeURIComponent(gw.url)}`);
    cdp = await page.createCDPSession();
    await cdp.send('WebAuthn.enable');
    ({ authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
      options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
    }));
  }, 60_000);

  afterAll(async () => {
    await chromium?.close();
    await gw?.close();
    await site?.close();
    await closeSql();
  });

  it('registers a passkey, signs in with it (no email typed) at aal2, and refuses the same answer twice', async () => {
    const user = await makeUser(gw);
    const registered = await inPage('register', user.access, 'Chromium');
    expect(registered).toMatchObject({ status: 201, body: { id: expect.any(Number), name: 'Chromium' } });
    // The authenticator holds it as a discoverable credential for localhost, for this user.
    const { credentials } = await cdp.send('WebAuthn.getCredentials', { authenticatorId });
    expect(credentials).toHaveLength(1);
    expect(credentials[0]).toMatchObject({ isResidentCredential: true, rpId: 'localhost', userHandle: Buffer.from(String(user.id)).toString('base64') });

    const signIn = await inPage('signIn');
    expect(signIn.status).toBe(200);
    expect(claims(signIn.body.access_token as string)).toMatchObject({ sub: String(user.id), amr: ['hwk', 'user'], acr: 'aal2' });
    // The browser sends the user handle exactly as the gateway compares it (CONTRACT §26): the
    // canonical base64url of the user id's bytes the registration gave.
    expect((signIn.answer!.response as Record<string, unknown>).userHandle).toBe(Buffer.from(String(user.id)).toString('base64url'));
    const [row] = await sql<{ credential_id: string; counter: string }>('SELECT credential_id, counter FROM passkeys WHERE user_id = $1', [user.id]);
    expect(row!.credential_id).toBe(signIn.answer!.id);
    expect(Number(row!.counter)).toBe(credentials[0]!.signCount + 1);

    const replay = await gw.post('/api/v1/auth/passkeys/login/verify', signIn.answer);
    expect([replay.status, replay.json]).toEqual([401, { error: 'Identifiants invalides' }]);
    const list = await gw.get('/api/v1/user/passkeys', { headers: bearer(signIn.body.access_token as string) });
    expect(list.json.passkeys).toEqual([expect.objectContaining({ id: registered.body.id, name: 'Chromium', last_used_at: expect.any(String) })]);
  });

  it('an authenticator that cannot verify the user is refused by the browser: the options require it', async () => {
    await cdp.send('WebAuthn.setUserVerified', { authenticatorId, isUserVerified: false });
    try {
      const signIn = await inPage('signIn');
      expect(signIn.refused).toMatch(/^NotAllowedError/);
    } finally {
      await cdp.send('WebAuthn.setUserVerified', { authenticatorId, isUserVerified: true });
    }
    expect((await inPage('signIn')).status).toBe(200);
  });

  it('docs/second-factor.md\'s snippets, run as written: one registers a passkey, the other signs in with it', async () => {
    // The authenticator holds this user's passkey only, so the sign-in cannot pick another.
    await cdp.send('WebAuthn.clearCredentials', { authenticatorId });
    const user = await makeUser(gw);
    /** Runs a snippet in the page with `gateway` and `accessToken` set, answering the variable `result`. */
    const run = (snippet: string, result: string) => page.evaluate(
      `(async () => { const gateway = ${JSON.stringify(gw.url)}; const accessToken = ${JSON.stringify(user.access)};\n${snippet}\nreturn ${result}; })()`,
    ) as Promise<Record<string, unknown>>;
    const passkey = await run(docsBlock('second-factor', 'passkey-register'), 'passkey');
    expect(passkey).toEqual({ id: expect.any(Number), name: 'Laptop', created_at: expect.any(String) });
    const pair = await run(docsBlock('second-factor', 'passkey-sign-in'), 'pair');
    expect(claims(pair.access_token as string)).toMatchObject({ sub: String(user.id), amr: ['hwk', 'user'], acr: 'aal2' });
    const list = await gw.get('/api/v1/user/passkeys', { headers: bearer(pair.access_token as string) });
    expect(list.json.passkeys).toEqual([expect.objectContaining({ id: passkey.id, name: 'Laptop', last_used_at: expect.any(String) })]);
  });
});
