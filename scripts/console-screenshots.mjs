#!/usr/bin/env node
// npm run screenshots: the pictures of docs/console.md, taken again. Starts the built demo (as
// `npm run demo` does: embedded storage in a temporary directory, deleted at the end), gives it a
// few users and some traffic through the public API, opens the one-time sign-in link the demo
// prints in headless Chromium (CHROMIUM_PATH, default /usr/bin/chromium), changes a plan in the
// console, and writes one PNG per view to docs/console/ at 1200x800 (a user's page, the overview and
// the health view at their full height). Not part of npm test: it takes a demo start and a browser, for
// pictures nobody needs to see change on every run.
import { spawn } from 'node:child_process';
import { mkdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer from 'puppeteer-core';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const OUT = path.join(ROOT, 'docs/console');
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const VIEWPORT = { width: 1200, height: 800, deviceScaleFactor: 1 };
const PASSWORD = 'screenshot-password-0123';
// Sample accounts, oldest first; each logs in with the client named, as a support person would see.
const USERS = [
  { email: 'ada@example.com', agent: 'Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0' },
  { email: 'grace.hopper@example.org', agent: 'curl/8.5.0' },
  { email: 'linus@example.net', agent: 'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) Safari/605.1.15' },
  { email: 'margaret.hamilton@example.org', agent: 'okhttp/4.12.0' },
];

function startDemo() {
  const demo = spawn(process.execPath, [path.join(ROOT, 'dist/demo/demo.js')], { env: { PATH: process.env.PATH, PORT: '0', LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the demo did not print its walkthrough:\n${output}`)), 60_000);
    const read = (chunk) => {
      output += chunk;
      if (!output.includes('Press Ctrl-C')) return;
      clearTimeout(timer);
      const gateway = /listening on (http:\/\/\S+),/.exec(output)?.[1];
      const link = /^# {4}(http:\/\/\S+\/console\/#ticket=\S+)$/m.exec(output)?.[1];
      const consoleUrl = /open (http:\/\/\S+\/console\/) and sign in/.exec(output)?.[1];
      // The admin API and its key, as the walkthrough's curl lines give them.
      const adminCall = /(http:\/\/\S+?)\/admin\/v1\/\S* -H 'Authorization: Bearer (\S+)'/.exec(output);
      if (!gateway || !link || !consoleUrl || !adminCall) reject(new Error(`the demo's walkthrough lacks the gateway, the console, its link or the admin API:\n${output}`));
      else resolve({ demo, gateway, link, consoleUrl, admin: { url: adminCall[1], key: adminCall[2] } });
    };
    demo.stdout.setEncoding('utf8').on('data', read);
    demo.stderr.setEncoding('utf8').on('data', (chunk) => { output += chunk; });
    demo.once('exit', (code) => reject(new Error(`the demo exited (${code}):\n${output}`)));
  });
}

async function call(gateway, method, route, { json, token, agent } = {}) {
  const res = await fetch(`${gateway}${route}`, {
    method,
    headers: { ...(json ? { 'content-type': 'application/json' } : {}), ...(token ? { authorization: `Bearer ${token}` } : {}), ...(agent ? { 'user-agent': agent } : {}) },
    ...(json ? { body: JSON.stringify(json) } : {}),
  });
  return { status: res.status, json: await res.json().catch(() => ({})) };
}

/** Accounts, sessions, counted uses and a few denials: what the views have to show. */
async function sampleData(gateway) {
  const ids = {};
  for (const { email, agent } of USERS) {
    const registered = await call(gateway, 'POST', '/api/v1/auth/register', { json: { email, password: PASSWORD } });
    if (registered.status !== 201) throw new Error(`register ${email}: ${registered.status} ${JSON.stringify(registered.json)}`);
    ids[email] = registered.json.user_id;
    const login = await call(gateway, 'POST', '/api/v1/auth/login', { json: { email, password: PASSWORD }, agent });
    const token = login.json.access_token;
    await call(gateway, 'GET', '/api/v1/profile', { token });
    await call(gateway, 'GET', '/api/v1/races', { token });
    await call(gateway, 'GET', '/api/v1/reports', { token }); // 403 on the free plan
  }
  // A second session for Ada, from a phone, and a wrong password (the audit log's login.failed).
  await call(gateway, 'POST', '/api/v1/auth/login', { json: { email: USERS[0].email, password: PASSWORD }, agent: 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) Mobile/15E148' });
  await call(gateway, 'POST', '/api/v1/auth/login', { json: { email: USERS[0].email, password: 'not-the-password' } });
  await call(gateway, 'GET', '/api/v1/profile'); // 401
  return ids;
}

async function main() {
  mkdirSync(OUT, { recursive: true });
  const { demo, gateway, link, consoleUrl, admin } = await startDemo();
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'],
  });
  try {
    const ids = await sampleData(gateway);
    const page = await browser.newPage();
    await page.setViewport(VIEWPORT);
    const shot = async (name, fullPage = false) => {
      const file = path.join(OUT, `${name}.png`);
      await page.screenshot({ path: file, fullPage });
      console.log(`${path.relative(ROOT, file)}: ${Math.round(statSync(file).size / 1024)} KB`);
    };

    await page.goto(consoleUrl);
    await page.waitForSelector('#key', { visible: true });
    await shot('sign-in');

    await page.goto('about:blank');
    await page.goto(link);
    await page.waitForSelector('tbody tr', { visible: true });
    await shot('users');

    // A plan changed in the console: the user's page shows it, and its audit event.
    const ada = ids[USERS[0].email];
    await page.goto(`${consoleUrl}#/user/${ada}`);
    await page.waitForSelector('#user-plan');
    await page.select('#user-plan', 'premium');
    await page.click('#save-plan');
    await page.waitForFunction('document.getElementById("user-status")?.textContent === "Plan set to premium" && document.querySelector("section[aria-labelledby=h-audit] td") !== null');
    await page.waitForFunction('[...document.querySelectorAll("section[aria-labelledby=h-audit] td")].some((td) => td.textContent === "admin.plan_changed")');
    await shot('user', true); // the whole page: its sections run below the fold

    // Two operators as `gateway operators add --admin` makes them, for the Operators page (admin only).
    for (const [email, role] of [['grace@example.com', 'support'], ['linus@example.com', 'viewer']]) {
      const added = await fetch(`${admin.url}/admin/v1/operators`, {
        method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${admin.key}` }, body: JSON.stringify({ email, role }),
      });
      if (added.status !== 201) throw new Error(`operator ${email}: ${added.status} ${await added.text()}`);
    }

    for (const [name, view, ready, fullPage] of [
      ['overview', '#/overview', '#h-mix', true], ['audit', '#/audit', '#audit-filter'], ['routes', '#/routes', 'tbody tr'], ['health', '#/health', '#ready', true],
      ['operators', '#/operators', 'tbody tr'],
    ]) {
      await page.goto(`${consoleUrl}${view}`);
      await page.waitForSelector(ready, { visible: true });
      await page.waitForSelector('tbody tr');
      await shot(name, fullPage);
    }
  } finally {
    await browser.close();
    const exited = new Promise((resolve) => demo.once('exit', resolve));
    demo.kill('SIGINT'); // as Ctrl-C: the demo deletes its data
    await exited;
  }
}

main().catch((err) => {
  console.error(err instanceof Error ? err.message : String(err));
  process.exitCode = 1;
});
