// What the portal's browser suites share (CONTRACT §30): a gateway with the portal on (the
// product's logo and accent), the mail catcher its links arrive at, the Stripe double its Checkout
// leads to, the fake GitHub its provider button leads to, organizations' SAML on (§31: the
// scripted IdP below is started by the suite that signs in with it), an echo upstream behind a
// daily-limited, scoped route, and Chromium. The portal is on http://localhost:PORT (a loopback
// origin, so the passkeys' rpId `localhost` holds and the cookie may be plain gw_portal). The
// gateway listens on a port chosen first: publicUrl, the mails' links and the passkeys' origin name it.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'puppeteer-core';
import { launchBrowser, type TestBrowser } from '../helpers/browser.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { startGitHubFake, type GitHubFake } from '../helpers/githubFake.js';
import { authnRequestOf, encode, newIdpKeys, responseXml, signResponse, type IdpKeys } from '../helpers/samlIdp.js';
import { startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';
import { mailSettings, startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { startStripeFake, type StripeFake } from '../helpers/stripeFake.js';
import { sparePort } from '../helpers/ports.js';

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
export const FREE_DAILY = 3;
const WEBHOOK_SECRET = 'whsec_cG9ydGFsLXdvcmxk';
export const ACCENT = '#3b5bdb';
/** The login the fake GitHub approves as (a test sets its user's emails first). */
export const GITHUB_LOGIN = 'octo';
const LOGO = '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" fill="#3b5bdb"/><path d="M8 24 16 8l8 16z" fill="#fff"/></svg>';

export interface PortalWorld {
  gw: TestGateway;
  smtp: SmtpCatcher;
  stripe: StripeFake;
  upstream: EchoUpstream;
  github: GitHubFake;
  chromium: TestBrowser;
  browser: Browser;
  /** http://localhost:PORT/portal/ */
  portal: string;
  origin: string;
  close(): Promise<void>;
}

export async function startPortalWorld(product: { name: string; accent?: string } = { name: 'Acme API' }): Promise<PortalWorld> {
  const [smtp, stripe, upstream, github] = await Promise.all([startSmtpCatcher(), startStripeFake(), startEchoUpstream(), startGitHubFake({ defaultLogin: GITHUB_LOGIN })]);
  const port = await sparePort();
  const origin = `http://localhost:${port}`;
  const portal = `${origin}/portal/`;
  const dir = mkdtempSync(path.join(tmpdir(), 'gw-portal-logo-'));
  const logo = path.join(dir, 'logo.svg');
  writeFileSync(logo, LOGO);
  const gw = await startTestGateway(testConfig({
    server: { host: '127.0.0.1', port },
    errors: { codes: true, language: 'negotiate' },
    mail: { ...mailSettings(smtp), verifyUrl: `${portal}verify-email?token={token}`, resetUrl: `${portal}reset-password?token={token}`, invitationUrl: `${portal}join?token={token}` },
    auth: {
      magicLink: { url: `${portal}magic?token={token}` }, passkeys: { rpId: 'localhost', rpName: product.name, origins: [origin] },
      // On the portal's origin: its provider buttons and "sign in with your organization" are shown.
      oidc: { publicUrl: origin, returnTo: ['https://app.example.com/'], providers: { github: {
        kind: 'github', trustEmail: true, clientId: github.clientId, clientSecret: github.clientSecret, authorizeUrl: `${github.url}/login/oauth/authorize`, apiBase: `${github.url}/api`,
      } } },
    },
    organizations: { enabled: true, sso: {} },
    portal: { enabled: true, publicUrl: origin, product: { accent: ACCENT, logo, ...product }, returnTo: ['https://app.example.com/'] },
    apiKeys: { plans: 'all' },
    plans: { limits: { free: { daily: FREE_DAILY }, premium: { daily: 1000 } } },
    billing: { stripe: { secretKey: 'rk_test_portal', webhookSecrets: [WEBHOOK_SECRET], apiBase: stripe.url, prices: { price_premium_monthly: 'premium' },
      successUrl: `${portal}billing`, cancelUrl: `${portal}billing` } },
    upstreams: { app: { url: upstream.url } },
    routes: [
      // org optional: a personal key or an organization's key (CONTRACT §22) may call it.
      { path: '/api/v1/forecasts', upstream: 'app', auth: 'required', dailyLimit: true, scopes: ['forecasts:read'], org: 'optional' },
      { path: '/api/v1/reports', upstream: 'app', auth: 'required', scopes: ['reports:read'] },
    ],
  }));
  stripe.deliverTo(`${gw.url}/api/v1/billing/stripe/webhook`, WEBHOOK_SECRET);
  const chromium = await launchBrowser();
  return {
    gw, smtp, stripe, upstream, github, chromium, browser: chromium.browser, portal, origin,
    close: async () => {
      await chromium.close();
      await gw.close();
      await Promise.all([smtp.close(), stripe.close(), upstream.close(), github.close()]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A scripted SAML identity provider a browser can visit (CONTRACT §31): its sign-in page answers an
 * AuthnRequest with a signed Response for `nameId` in a form that the user posts to the ACS (the
 * button `#idp-continue`), as a real IdP's page does once its user has signed in.
 */
export interface PageIdp {
  url: string;
  entityId: string;
  keys: IdpKeys;
  /** Who signs in next, and the connection the Response is for (set by the test). */
  next: { nameId: string; acsUrl: string; audience: string } | undefined;
  close(): Promise<void>;
}

export async function startPageIdp(): Promise<PageIdp> {
  const keys = newIdpKeys();
  const idp: Omit<PageIdp, 'url' | 'entityId' | 'close'> = { keys, next: undefined };
  const server = http.createServer((req, res) => {
    const next = idp.next;
    if (!req.url?.startsWith('/sso') || !next) return void res.writeHead(404).end();
    const asked = authnRequestOf(`http://idp${req.url}`);
    const { xml } = responseXml({ issuer: entityId, destination: next.acsUrl, audience: next.audience, recipient: next.acsUrl, inResponseTo: asked.id, nameId: next.nameId });
    const field = (name: string, value: string) => `<input type="hidden" name="${name}" value="${value.replace(/[&"<>]/g, (c) => `&#${c.charCodeAt(0)};`)}">`;
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(`<!doctype html><title>IdP</title><form method="post" action="${next.acsUrl}">`
      + `${field('SAMLResponse', encode(signResponse(xml, keys)))}${field('RelayState', asked.relayState)}<button id="idp-continue">Continue</button></form>`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const entityId = `${url}/metadata`;
  return Object.assign(idp, {
    url, entityId,
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  });
}

/**
 * Violations axe-core finds on the page. It is evaluated through the DevTools protocol, which the
 * page's CSP does not govern: the page itself keeps refusing any script not its own.
 */
export async function axeViolations(page: Page): Promise<{ id: string; nodes: string[] }[]> {
  await page.evaluate(AXE_SOURCE);
  return page.evaluate(async () => {
    const result = await (globalThis as unknown as { axe: { run(): Promise<{ violations: { id: string; nodes: { target: unknown }[] }[] }> } }).axe.run();
    return result.violations.map((v) => ({ id: v.id, nodes: v.nodes.map((n) => JSON.stringify(n.target)) }));
  });
}

/** The text of an element, once it is there. */
export async function textOf(page: Page, selector: string): Promise<string> {
  await page.waitForSelector(selector);
  return page.$eval(selector, (el) => el.textContent ?? '');
}

/**
 * `read()` (a page's figures, read after navigating to it) again until `done` says they are in, for
 * at most 6 s: a key's requests and a quota's refusals reach their day rows once a second, off the
 * request path (src/keys/usage.ts, src/storage/usage/ownerDenials.ts), as a customer reloading sees.
 */
export async function readUntil<T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  let value = await read();
  for (let i = 0; i < 30 && !done(value); i++) {
    await new Promise((r) => setTimeout(r, 200));
    value = await read();
  }
  return value;
}
