/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
// The console's pages of CONTRACT §24, in Chromium: plans are the configuration's (a `team` plan
// configured, and a user on a plan it no longer names, who is not saved over silently); a user
// created from the console receives the invitation; a user deleted after the email is typed again;
// the overview (uPlot) and the routes view marking WebSocket routes; axe finds nothing on any page.
import type { FastifyInstance } from 'fastify';
import type { Page } from 'puppeteer-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import { describeWithBrowser, launchBrowser, type TestBrowser } from '../helpers/browser.js';
import { axeViolations, consolePage, screenshot } from './consolePage.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { ADMIN_KEY, closeSql, makeUser, newEmail, newPassword, sql, startTestGateway, testConfig, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { mailSettings, startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';


describeWithBrowser('the console\'s plans, accounts and overview, in Chromium', () => {
  let upstream: EchoUpstream;
  let smtp: SmtpCatcher;
  let gw: TestGateway;
  let admin: FastifyInstance;
  let consoleUrl: string;
  let chromium: TestBrowser;
  let page: Page;
  let onTeam: TestUser;
  let retired: TestUser;
  const yesterday = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    smtp = await startSmtpCatcher();
    gw = await startTestGateway(testConfig({
      mail: mailSettings(smtp),
      plans: { limits: { team: { daily: 5000 } } },
      upstreams: { app: { url: upstream.url } },
      routes: [{ path: '/api/v1/reports', upstream: 'app', plans: ['pro', 'team'] }, { path: '/live', upstream: 'app', websocket: true }],
    }));
    admin = await buildAdminApp(gw.services);
    consoleUrl = `${await admin.listen({ host: '127.0.0.1', port: 0 })}/console/`;
    onTeam = await makeUser(gw, { plan: 'team' });
    retired = await makeUser(gw);
    // A plan an earlier configuration named: users keep it until an operator chooses another.
    await sql("UPDATE users SET plan = 'gold' WHERE id = $1", [retired.id]);
    await sql('INSERT INTO usage_days (user_id, day, uses) VALUES ($1, $2, 42)', [onTeam.id, yesterday]);
    chromium = await launchBrowser();
    page = await consolePage(chromium.browser);
    const ticket = await fetch(new URL('tickets', consoleUrl), { method: 'POST', headers: { authorization: `Bearer ${ADMIN_KEY}` } });
    await page.goto(((await ticket.json()) as { url: string }).url);
    await page.waitForSelector('#user-search', { visible: true });
  }, 60_000);
  afterAll(async () => {
    await chromium?.close();
    await admin?.close();
    await gw?.close();
    await smtp?.close();
    await upstream?.close();
    await closeSql();
  });

  const shot = (name: string) => screenshot(page, name);
  const text = (selector: string) => page.$eval(selector, (el) => el.textContent ?? '');
  const options = (selector: string) => page.$$eval(`${selector} option`,
    (os) => (os as HTMLOptionElement[]).map((o) => ({ value: o.value, text: o.textContent, selected: o.selected, disabled: o.disabled })));
  const axe = () => axeViolations(page);
  async function open(hash: string, ready: string) {
    await page.goto(`${consoleUrl}${hash}`);
    await page.waitForSelector(ready, { visible: true });
  }

  it('filters users by the configuration\'s plans, team included', async () => {
    expect((await options('#plan')).map((o) => o.value)).toEqual(['', 'free', 'premium', 'pro', 'team']);
    await page.select('#plan', 'team');
    await page.click('#user-search button[type=submit]');
    await page.waitForFunction(() => location.hash.includes('plan=team') && document.querySelectorAll('tbody tr').length > 0);
    const plans = await page.$$eval('tbody tr', (trs) => (trs as HTMLTableRowElement[]).map((tr) => tr.cells[2]?.textContent));
    expect(new Set(plans)).toEqual(new Set(['team']));
    expect(await axe()).toEqual([]);
  });

  it('shows a team user on team, with the configured plans to choose from', async () => {
    await open(`#/user/${onTeam.id}`, '#user-plan');
    expect(await options('#user-plan')).toEqual(['free', 'premium', 'pro', 'team'].map((p) => ({ value: p, text: p, selected: p === 'team', disabled: false })));
    // Pressing Save plan without choosing another writes nothing: no silent downgrade.
    await page.click('#save-plan');
    await page.waitForFunction(() => document.getElementById('user-status')?.textContent?.startsWith('Plan unchanged'));
    expect(await sql('SELECT plan FROM users WHERE id = $1', [onTeam.id])).toEqual([{ plan: 'team' }]);
    expect(await axe()).toEqual([]);
  });

  it('shows a plan the configuration no longer names as such, and never saves over it without a choice', async () => {
    await open(`#/users?query=${encodeURIComponent(retired.email)}`, 'tbody a');
    await page.waitForFunction((email) => document.querySelector('tbody a')?.textContent === email, {}, retired.email);
    expect(await page.$eval('tbody tr', (tr) => (tr as HTMLTableRowElement).cells[2]?.textContent)).toBe('gold (not in the configuration)');
    await open(`#/user/${retired.id}`, '#user-plan');
    expect((await options('#user-plan'))[0]).toEqual({ value: 'gold', text: 'gold (not in the configuration)', selected: true, disabled: true });
    await page.click('#save-plan');
    await page.waitForFunction(() => document.getElementById('user-status')?.textContent === 'Plan unchanged: choose another plan than gold first');
    expect(await sql('SELECT plan FROM users WHERE id = $1', [retired.id])).toEqual([{ plan: 'gold' }]);
    expect(await sql("SELECT id FROM audit_events WHERE user_id = $1 AND type = 'admin.plan_changed'", [retired.id])).toEqual([]);
    expect(await axe()).toEqual([]);
    await shot('user-retired-plan');
    // Choosing a configured plan is a change like any other.
    await page.select('#user-plan', 'team');
    await page.click('#save-plan');
    await page.waitForFunction(() => document.getElementById('user-status')?.textContent === 'Plan set to team');
    expect(await sql('SELECT plan FROM users WHERE id = $1', [retired.id])).toEqual([{ plan: 'team' }]);
  });

  it('creates a user, who receives the invitation and sets a password with it', async () => {
    await open('#/users', '#create-user');
    const email = newEmail('console-invited');
    await page.type('#new-email', email);
    await page.select('#new-plan', 'team');
    await page.click('#create-user-button');
    await page.waitForFunction((e) => document.getElementById('user-status')?.textContent === `Invitation sent to ${e}`, {}, email);
    expect(await text('#view h2')).toBe(email);
    expect(await page.$eval('#user-plan', (el) => (el as HTMLSelectElement).value)).toBe('team');
    const mail = await smtp.waitFor(email);
    expect(mail.subject).toBe('Votre compte a été créé');
    const password = newPassword();
    expect((await gw.post('/api/v1/auth/password/reset', { token: mail.token, new_password: password })).status).toBe(200);
    expect((await gw.post('/api/v1/auth/login', { email, password })).json.plan).toBe('team');
    const created = "SELECT actor FROM audit_events WHERE type = 'admin.user_created' AND data->>'plan' = 'team' AND user_id = (SELECT id FROM users WHERE email = $1)";
    expect(await sql(created, [email])).toEqual([{ actor: 'console' }]);
    // An address already taken: the form says so and stays.
    await open('#/users', '#create-user');
    await page.type('#new-email', email);
    await page.click('#create-user-button');
    await page.waitForFunction(() => document.getElementById('create-status')?.textContent === 'Email déjà enregistré');
    expect(await axe()).toEqual([]);
    await shot('users-create');
  });

  it('deletes a user only once its email is typed again', async () => {
    const doomed = await makeUser(gw);
    await open(`#/user/${doomed.id}`, '#delete-confirm');
    expect(await page.$eval('#delete-user', (b) => (b as HTMLButtonElement).disabled)).toBe(true);
    await page.type('#delete-confirm', doomed.email.slice(0, -1));
    expect(await page.$eval('#delete-user', (b) => (b as HTMLButtonElement).disabled)).toBe(true);
    await page.click('#delete-user');
    expect(await sql('SELECT id FROM users WHERE id = $1', [doomed.id])).toHaveLength(1);
    await page.type('#delete-confirm', doomed.email.slice(-1));
    expect(await page.$eval('#delete-user', (b) => (b as HTMLButtonElement).disabled)).toBe(false);
    expect(await axe()).toEqual([]);
    await page.click('#delete-user');
    await page.waitForFunction((e) => location.hash === '#/users' && document.getElementById('users-status')?.textContent === `User ${e} deleted`, {}, doomed.email);
    expect(await sql('SELECT id FROM users WHERE id = $1', [doomed.id])).toEqual([]);
    expect(await sql("SELECT actor FROM audit_events WHERE type = 'admin.user_deleted' AND user_id = $1", [doomed.id])).toEqual([{ actor: 'console' }]);
    expect((await gw.post('/api/v1/auth/refresh', { refresh_token: doomed.refresh })).status).toBe(401);
  });

  it('draws the overview: a chart per measure, top users, plan mix', async () => {
    await open('#/overview', '#h-mix');
    const uses = 'section[aria-labelledby=h-uses]';
    expect(await page.$eval(`${uses} canvas`, (c) => (c as HTMLCanvasElement).width)).toBeGreaterThan(0);
    const perDay = await page.$$eval(`${uses} details tbody tr`, (trs) => (trs as HTMLTableRowElement[]).map((tr) => [...tr.cells].map((td) => td.textContent)));
    expect(perDay).toHaveLength(30);
    const header = await page.$$eval(`${uses} details thead th`, (ths) => ths.map((th) => th.textContent));
    expect(perDay.find((r) => r[0] === yesterday)?.[header.indexOf('team')]).toBe(String(42));
    expect(await page.$$eval('section[aria-labelledby=h-top-users] tbody a', (as) => as.map((a) => a.textContent))).toContain(onTeam.email);
    expect(await page.$$eval('section[aria-labelledby=h-mix] tbody tr', (trs) => (trs as HTMLTableRowElement[]).map((tr) => tr.cells[0]?.textContent))).toContain('team');
    expect(await axe()).toEqual([]);
    await shot('overview');
  });

  it('marks WebSocket routes in the routes view', async () => {
    await open('#/routes', 'tbody tr');
    await page.waitForFunction(() => [...document.querySelectorAll('td')].some((td) => td.textContent === '/live'));
    const rows = await page.$$eval('tbody tr', (trs) => (trs as HTMLTableRowElement[]).map((tr) => [tr.cells[0]?.textContent, tr.cells[2]?.textContent]));
    expect(rows).toEqual([['/api/v1/reports', '—'], ['/live', 'yes']]);
    expect(await page.$$eval('thead th', (ths) => ths.map((th) => th.textContent))).toContain('WebSocket');
    expect(await axe()).toEqual([]);
  });
});
