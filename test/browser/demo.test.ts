// `npm run demo` as a newcomer meets it: the built demo started as its script starts it, and its
// browser page (served by the demo's echo upstream, another origin than the gateway's) clicked
// through in headless Chromium: register, log in, the 401, the identity, the 403, the 429, and a
// WebSocket opened with ?access_token=; a passkey; a sign-in with the demo's identity provider,
// and one with the demo's fake GitHub (kind: github).
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import type { Page } from 'puppeteer-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeWithBrowser, launchBrowser, type TestBrowser } from '../helpers/browser.js';
import { CLI, ensureBuilt } from '../helpers/cli.js';
import { eventually } from '../helpers/gateway.js';

const DEMO = path.join(path.dirname(CLI), 'demo', 'demo.js');

describeWithBrowser('the demo\'s browser page', () => {
  let demo: ChildProcess;
  let output = '';
  let pageUrl: string;
  let chromium: TestBrowser;
  let page: Page;

  beforeAll(async () => {
    ensureBuilt();
    // PORT=0: ports of its own (the demo prefers 8080, 9090 and 9191, which may belong to others here).
    demo = spawn(process.execPath, [DEMO], { env: { PATH: process.env.PATH, PORT: '0', LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'] });
    demo.stdout!.setEncoding('utf8').on('data', (chunk: string) => { output += chunk; });
    demo.stderr!.setEncoding('utf8').on('data', (chunk: string) => { output += chunk; });
    await eventually(() => /In a browser, open (\S+) :/.test(output) || demo.exitCode !== null, 60_000, 100);
    const found = /In a browser, open (\S+) :/.exec(output);
    if (!found) throw new Error(`the demo did not start:\n${output}`);
    pageUrl = found[1]!;
    chromium = await launchBrowser();
    page = await chromium.browser.newPage();
    // An English-speaking browser, said explicitly (Chromium's own depends on the machine's
    // locale): the demo negotiates the language of its answers (errors.language: negotiate).
    await page.setExtraHTTPHeaders({ 'accept-language': 'en-US,en;q=0.9' });
    await page.goto(pageUrl);
  }, 120_000);

  afterAll(async () => {
    await chromium?.close();
    if (demo && demo.exitCode === null) {
      const exited = new Promise((resolve) => demo.once('exit', resolve));
      demo.kill('SIGINT'); // as Ctrl-C: the demo deletes its data
      await exited;
    }
  });

  /** Clicks a step's button and returns the lines it added to the page's output. */
  async function step(name: string, lines = 1): Promise<string> {
    const before = await page.evaluate('document.querySelectorAll("#out span").length') as number;
    await page.click(`button[data-step=${name}]`);
    await page.waitForFunction(`document.querySelectorAll("#out span").length >= ${before + lines}`, { timeout: 10_000 });
    return page.evaluate(`[...document.querySelectorAll("#out span")].slice(${before}).map((s) => s.textContent).join("")`) as Promise<string>;
  }

  it('imported the ten accounts of demo/users.csv at start (CONTRACT §27), and said so', () => {
    expect(output).toContain('Imported demo/users.csv (docs/migrating.md): created 10, skipped_existing 0, refused 0.');
    expect(output).toMatch(/# 19\. Moving in: .*\n(#.*\n)*curl -s .*\/admin\/v1\/users\?query=legacy-101' /);
  });

  it('registers, logs in and calls the routes through CORS, then talks over a WebSocket', async () => {
    const email = await page.evaluate('document.getElementById("email").value') as string;
    expect(await step('register')).toMatch(/^POST \/api\/v1\/auth\/register → 201\n/);
    expect(await step('login')).toMatch(/^POST \/api\/v1\/auth\/login → 200\n/);
    expect(await step('anonymous')).toContain('GET /api/v1/profile → 401\n{\n  "error": "No token was sent"\n}');
    const profile = await step('profile');
    expect(profile).toMatch(/^GET \/api\/v1\/profile → 200\n/);
    expect(profile).toContain(`"x-user-email": "${email}"`);
    expect(await step('reports')).toContain('"error": "Insufficient plan"');
    expect(await step('races')).toMatch(/^GET \/api\/v1\/races → 200\n/);
    expect(await step('races')).toContain('"error": "Daily limit reached (plan free: 1 request/day)"');
    const live = await step('live', 4);
    expect(live).toContain('WebSocket open');
    expect(live).toContain(`WebSocket message: hello ${email}, on the free plan`);
    expect(live).toContain('WebSocket message: echo: Hello from the page');
    expect(live).toContain('WebSocket closed: 1000 done');
  });

  it('verifies the email, adds a passkey (Chromium\'s virtual authenticator) and signs in with it to pass the second-factor route', async () => {
    const cdp = await page.createCDPSession();
    await cdp.send('WebAuthn.enable');
    const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
      options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
    });
    expect(await step('verify')).toMatch(/^POST \/api\/v1\/auth\/email\/verify → 200\n/);
    expect(await step('billing')).toContain('"error": "Two-factor authentication required"');
    expect(await step('login')).toMatch(/→ 200\n/); // a fresh sign-in: adding a factor needs one of the last 5 minutes
    const added = await step('addPasskey', 2);
    expect(added).toMatch(/^POST \/api\/v1\/auth\/passkeys\/register\/options → 200\nPOST \/api\/v1\/auth\/passkeys\/register\/verify → 201\n/);
    expect(added).toContain('"name": "Demo page"');
    const signedIn = await step('passkeySignIn', 3);
    expect(signedIn).toMatch(/passkeys\/login\/verify → 200\n/);
    expect(signedIn).toMatch(/GET \/api\/v1\/billing → 200\n/);
    expect((await cdp.send('WebAuthn.getCredentials', { authenticatorId })).credentials).toHaveLength(1);
  });

  it('signs in with the Demo IdP: its login form and consent page, back to the page, which exchanges the code', async () => {
    await Promise.all([page.waitForNavigation(), page.click('button[data-step=idpSignIn]')]);
    await page.type('input[name=login]', 'grace');
    await page.type('input[name=password]', 'anything');
    await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]); // consent
    await page.waitForFunction('document.querySelectorAll("#out span").length >= 2', { timeout: 10_000 });
    const out = await page.evaluate('[...document.querySelectorAll("#out span")].map((s) => s.textContent).join("")') as string;
    expect(out).toMatch(/^POST \/api\/v1\/auth\/oidc\/exchange → 200\n/);
    expect(out).toMatch(/GET \/api\/v1\/profile → 200\n/);
    expect(out).toContain('"x-user-email": "grace@example.com"');
    expect(page.url()).toBe(pageUrl);
  });

  it('signs in with GitHub (demo): the fake approves at once, back to the page, which exchanges the code for the primary verified address', async () => {
    await page.goto(pageUrl);
    await Promise.all([page.waitForNavigation(), page.click('button[data-step=githubSignIn]')]);
    await page.waitForFunction('document.querySelectorAll("#out span").length >= 2', { timeout: 10_000 });
    const out = await page.evaluate('[...document.querySelectorAll("#out span")].map((s) => s.textContent).join("")') as string;
    expect(out).toMatch(/^POST \/api\/v1\/auth\/oidc\/exchange → 200\n/);
    expect(out).toMatch(/GET \/api\/v1\/profile → 200\n/);
    expect(out).toContain('"x-user-email": "octocat@example.com"');
    expect(page.url()).toBe(pageUrl);
  });
});
