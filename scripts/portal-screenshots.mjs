#!/usr/bin/env node
// The pictures of docs/portal.md: every page of the customer portal at 360 px wide (a phone), in
// English, written to docs/portal/<page>.png. test/browser/portalPages.browser.test.ts runs it on
// the portal it starts (with axe-core on every page, in both languages, through `visit`); by hand:
//   node scripts/portal-screenshots.mjs http://localhost:8080/portal/ customer@example.com 'password'
// with a customer who has a key and some usage (CHROMIUM_PATH, default /usr/bin/chromium).
/* global document, requestAnimationFrame -- page.evaluate's functions run in the page */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
export const OUT = path.join(ROOT, 'docs/portal');
export const VIEWPORT = { width: 360, height: 740, deviceScaleFactor: 1 };

/** Each page: its URL segment, and a selector present once it is drawn. */
export const SIGNED_OUT_PAGES = [
  ['sign-in', '#sign-in-form'], ['sign-up', '#sign-up-form'], ['forgot-password', '#forgot-form'], ['reset-password', '#reset-form'],
  ['verify-email', 'main [role=alert]'], ['magic', 'main [role=alert]'], ['join', 'main [role=alert]'], ['signed-in', 'main [role=alert]'],
];
export const SIGNED_IN_PAGES = [
  ['overview', '#signed-in-as'], ['keys', '#create-key'], ['usage', '#h-months'], ['billing', '#current-plan'], ['security', '#h-sessions'],
  ['orgs', '#create-org'], ['account', '#delete-form'],
];

/** The page's language, chosen as a visitor does: the switch in the header. */
export async function chooseLanguage(page, language) {
  await page.waitForSelector('#lang');
  if (await page.evaluate(() => document.documentElement.lang) !== language) {
    await page.click('#lang');
    await page.waitForFunction((l) => document.documentElement.lang === l, {}, language);
  }
}

async function signIn(page, portal, email, password) {
  await page.goto(`${portal}sign-in`);
  await page.waitForSelector('#sign-in-form');
  await page.type('#email', email);
  await page.type('#password', password);
  await Promise.all([page.waitForSelector('#signed-in-as'), page.click('#sign-in-submit')]);
}

/**
 * Visits every page in each language (`visit(page, name, language)` runs on each, as the test's axe
 * check does) and writes the English ones as PNGs to `out` (none when `out` is null).
 */
export async function shootPortal({ browser, portal, email, password, languages = ['en'], out = OUT, visit = async () => {} }) {
  if (out) mkdirSync(out, { recursive: true });
  const written = [];
  for (const language of languages) {
    const context = await browser.createBrowserContext();
    const page = await context.newPage();
    await page.setViewport(VIEWPORT);
    const open = async (name, ready, signedIn) => {
      await page.goto(`${portal}${name === 'overview' ? '' : name}`);
      await page.waitForSelector(ready);
      // uPlot draws after layout: a frame later the canvases are there.
      await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r())));
      await visit(page, name, language, signedIn);
      if (out && language === 'en') {
        const file = path.join(out, `${name}.png`);
        await page.screenshot({ path: file, fullPage: true });
        written.push(file);
      }
    };
    await page.goto(`${portal}sign-in`);
    await chooseLanguage(page, language);
    for (const [name, ready] of SIGNED_OUT_PAGES) await open(name, ready, false);
    await signIn(page, portal, email, password);
    for (const [name, ready] of SIGNED_IN_PAGES) await open(name, ready, true);
    await context.close();
  }
  return written;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [portal, email, password] = process.argv.slice(2);
  if (!portal || !email || !password) {
    console.error('usage: node scripts/portal-screenshots.mjs <portal URL> <email> <password>');
    process.exit(2);
  }
  const { default: puppeteer } = await import('puppeteer-core');
  const browser = await puppeteer.launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu', '--no-first-run'] });
  try {
    for (const file of await shootPortal({ browser, portal, email, password })) console.log(path.relative(ROOT, file));
  } finally {
    await browser.close();
  }
}
