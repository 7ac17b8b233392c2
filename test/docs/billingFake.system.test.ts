/// <reference lib="dom" />
// docs/billing.md, "Try it without a Stripe account" (CONTRACT §29), run as written: its shell
// blocks in bash, in one project directory, with only the ports changed (8080, 9090, 12111 and 4000
// may be taken on a shared machine). The reader's own gateway.yaml is the repository's (what
// `gateway init` writes), its billing block uncommented and its hooks block replaced by the page's,
// on a database of its own; the double, the hooks' receiver and the gateway run in the background as
// in their own terminals, and the walk's blocks share one bash, as one terminal does: sign up, pay, a
// failed payment kept for the grace, an operator's change refused (409) then made as an override,
// the lapse back to free. Each step is seen as the page shows it: by /me, by support (the admin
// API's user, and the console's page of the user in Chromium, signed in with the page's ticket) and
// by the receiver (each hook's type and data, signature checked). System tier: it starts the built
// CLI three times over, Node once more and a browser.
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Page } from 'puppeteer-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ERRORS } from '../../src/errors/index.js';
import { describeWithBrowser, launchBrowser, type TestBrowser } from '../helpers/browser.js';
import { CLI, ensureBuilt, ROOT } from '../helpers/cli.js';
import { docsBlock, expectShown, shownOutput } from '../helpers/docs.js';
import { closeSql, eventually, throwawayDatabase, type ThrowawayDatabase } from '../helpers/gateway.js';
import { sparePort } from '../helpers/ports.js';
import { shownLine, stop, Terminal } from '../helpers/terminal.js';

type Block = 'stripe-fake-secrets' | 'stripe-fake-hooks' | 'stripe-fake-start' | 'stripe-fake-receiver' | 'stripe-fake-gateway' | 'stripe-fake-pay'
  | 'stripe-fake-support-paid' | 'stripe-fake-fail' | 'stripe-fake-support-grace' | 'stripe-fake-override' | 'stripe-fake-lapse' | 'stripe-fake-support-lapsed';
/** What the page says the console and the receiver show, not commands. */
type Shown = 'stripe-fake-console-paid' | 'stripe-fake-console-grace' | 'stripe-fake-console-override' | 'stripe-fake-console-lapsed'
  | 'stripe-fake-hooks-paid' | 'stripe-fake-hooks-override' | 'stripe-fake-hooks-lapsed';
type Hook = { type: string; data: Record<string, unknown> };
/** The admin API's user as the page's `support` prints it. */
type Support = { plan: string; plan_source: string; grace_ends_at: string | null; subscriptions: Array<{ status: string; current_period_end: string }> };

/** GET /api/v1/billing/subscription, and the admin API's user's billing (support sees the customer too). */
type OwnerView = {
  subscriptions: Array<{ id: string; status: string; price: string; plan: string; cancel_at_period_end: boolean | null; past_due_since: string | null }>;
  plan_source: string; grace_ends_at: string | null;
};
type SupportBilling = OwnerView & { customer_id: string; customer_url: string; billing_plan: string | null; override_since: string | null;
  subscriptions: Array<OwnerView['subscriptions'][number] & { url: string }> };

/** A JSON value's fields and the kind of each (a date, a string, null…), not its values. */
function shapeOf(value: unknown): unknown {
  if (value === null) return 'null';
  if (Array.isArray(value)) return value.map(shapeOf);
  if (typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, shapeOf(v)]).sort(([a], [b]) => String(a).localeCompare(String(b))));
  return typeof value === 'string' && /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/.test(value) ? 'date' : typeof value;
}
const pick = <T extends object>(o: T, keys: Array<keyof T>) => Object.fromEntries(keys.map((k) => [k, o[k]]));

const GRACE_DAYS = 7;
const DAY_MS = 86_400_000;

describeWithBrowser('docs/billing.md: trying billing against the Stripe double, as written', () => {
  let db: ThrowawayDatabase;
  let work: string;
  let env: NodeJS.ProcessEnv;
  let ports: { public: number; fake: number; admin: number; hooks: number };
  let fake: ReturnType<typeof Terminal.background> | undefined;
  let receiver: ReturnType<typeof Terminal.background> | undefined;
  let gateway: ReturnType<typeof Terminal.background> | undefined;
  let terminal: Terminal | undefined;
  let chromium: TestBrowser | undefined;
  let page: Page;
  let userId: number;
  /** A block of the section, with only the example ports changed. */
  const block = (name: Block) => docsBlock('billing', name).replaceAll('localhost:8080', `localhost:${ports.public}`).replaceAll('12111', String(ports.fake))
    .replaceAll(':9090', `:${ports.admin}`).replaceAll('4000', String(ports.hooks));
  /** The lines the page shows for the console or the receiver. */
  const shown = (name: Shown) => docsBlock('billing', name).split('\n').filter((l) => l.trim());

  beforeAll(async () => {
    ensureBuilt();
    db = await throwawayDatabase({ migrated: true });
    ports = { public: await sparePort(), fake: await sparePort(), admin: await sparePort(), hooks: await sparePort() };
    // A project with the gateway installed (node_modules/.bin/gateway, where npx finds it) and the
    // repository's gateway.yaml, its billing block uncommented and its hooks block the page's.
    work = mkdtempSync(path.join(tmpdir(), 'gw-docs-stripe-fake-'));
    mkdirSync(path.join(work, 'node_modules/.bin'), { recursive: true });
    symlinkSync(CLI, path.join(work, 'node_modules/.bin/gateway'));
    const yaml = readFileSync(path.join(ROOT, 'gateway.yaml'), 'utf8');
    const uncommented = yaml.replace(/^# billing:\n(?:# .*\n)+/m, (b) => b.replace(/^# /gm, ''));
    expect(uncommented).toMatch(/^billing:\n {2}stripe:\n/m);
    const hooks = block('stripe-fake-hooks').replace(/^# fragment\n/, '');
    const configured = uncommented.replace(/^# hooks:\n(?:# .*\n)+/m, hooks);
    expect(configured).toContain(`\n${hooks}`);
    writeFileSync(path.join(work, 'gateway.yaml'), configured.replace(/^( {2}port: )9090\b/m, `$1${ports.admin}`));
    // No admin key nor hooks secret here: the terminals take them from the page's try-billing.env.
    env = {
      PATH: [path.dirname(process.execPath), process.env.PATH ?? ''].join(path.delimiter), HOME: process.env.HOME ?? work,
      DATABASE_URL: db.url, REDIS_URL: '', JWT_SECRET: randomBytes(48).toString('base64'), PORT: String(ports.public),
    };
    chromium = await launchBrowser();
    page = await chromium.browser.newPage();
    await page.setViewport({ width: 1200, height: 900 });
  }, 120_000);
  afterAll(async () => {
    await chromium?.close();
    terminal?.child.stdin?.end();
    await stop(terminal?.child);
    await stop(gateway?.child);
    await stop(receiver?.child);
    await stop(fake?.child);
    await db?.drop();
    if (work) rmSync(work, { recursive: true, force: true });
    await closeSql();
  });

  const adminKey = () => /GATEWAY_ADMIN_KEY=(\w+)/.exec(readFileSync(path.join(work, 'try-billing.env'), 'utf8'))![1]!;
  /** Runs a block of the walk in the reader's terminal: it succeeds and prints what the page shows. */
  async function run(name: Block): Promise<string> {
    const text = block(name);
    const { code, stdout, stderr } = await terminal!.run(text);
    expect(code, `${name}: ${stdout}\n${stderr}`).toBe(0);
    expectShown(stdout, shownOutput(text));
    return stdout;
  }
  /** The step as /me shows it (checked by the blocks' output) and as the gateway stored it. */
  async function stored(plan: string, subscription: { status: string; in_grace: boolean }): Promise<void> {
    expect(await db.sql("SELECT plan FROM users WHERE email = 'ada@example.com'")).toEqual([{ plan }]);
    expect(await db.sql('SELECT status, past_due_since IS NOT NULL AS in_grace FROM billing_subscriptions')).toEqual([subscription]);
  }
  /** What `support` printed, checked against the subscription as the gateway stored it. */
  async function support(stdout: string): Promise<Support> {
    const view = JSON.parse(stdout.split('\n').find((l) => l.startsWith('{"plan":'))!) as Support;
    const [sub] = await db.sql<{ current_period_end: Date; past_due_since: Date | null }>('SELECT current_period_end, past_due_since FROM billing_subscriptions');
    expect(view.subscriptions.map((s) => s.current_period_end)).toEqual([sub!.current_period_end.toISOString()]);
    expect(view.grace_ends_at).toBe(sub!.past_due_since ? new Date(sub!.past_due_since.getTime() + GRACE_DAYS * DAY_MS).toISOString() : null);
    return view;
  }
  /** The console's page of the user, reloaded as the page says: its Billing section reads what the page shows. */
  async function consoleSays(name: Shown): Promise<string> {
    await page.reload();
    await page.waitForSelector('#user-plan-source');
    const flat = (text: string) => text.replace(/\s+/g, ' ').trim();
    const section = flat(await page.$eval('section[aria-labelledby=h-user-billing]', (el) => (el as HTMLElement).innerText));
    expectShown(section, shown(name).map(flat));
    return section;
  }
  /** The hooks the receiver printed since the last step: exactly the page's lines, each signature checked. */
  const received = () => receiver!.output().split('\n').filter((l) => /^[a-z_]+\.[a-z_]+ \{/.test(l));
  let seen = 0;
  async function hooksSay(name: Shown): Promise<Hook[]> {
    const lines = shown(name);
    await eventually(() => received().length >= seen + lines.length, 15_000).catch(() => undefined);
    const step = received().slice(seen);
    seen += step.length;
    expect(step).toHaveLength(lines.length);
    step.forEach((line, i) => expect(line).toMatch(shownLine(lines[i]!)));
    expect(receiver!.output()).not.toContain('bad signature');
    return step.map((line) => ({ type: line.split(' ', 1)[0]!, data: JSON.parse(line.slice(line.indexOf(' ') + 1)) as Record<string, unknown> }));
  }
  /** The events the double printed it sent: type, id, the gateway's status. */
  const sent = () => fake!.output().split('\n').flatMap((l) => {
    const m = / ?(\S+) (evt_\w+) → (\d+) \(customer cus_\w+\)$/.exec(l);
    return m ? [{ type: m[1]!, id: m[2]!, status: Number(m[3]) }] : [];
  });

  it('makes the secrets, starts the double, the receiver and the gateway', async () => {
    terminal = new Terminal(work, env);
    await run('stripe-fake-secrets');
    expect(readFileSync(path.join(work, 'try-billing.env'), 'utf8')).toMatch(/^export GATEWAY_ADMIN_KEY=[0-9a-f]{48}\nexport GATEWAY_HOOKS_SECRET=whsec_[A-Za-z0-9+/]{43}=\n$/);

    fake = Terminal.background(block('stripe-fake-start'), work, env);
    await eventually(() => /^forwarding events to /m.test(fake!.output()), 30_000);
    expectShown(fake.output(), shownOutput(block('stripe-fake-start')));
    const secret = /webhook secret (whsec_\w+)/.exec(fake.output())![1]!;

    receiver = Terminal.background(block('stripe-fake-receiver'), work, env);
    await eventually(() => receiver!.output().includes('receiving hooks on'), 30_000);
    expectShown(receiver.output(), shownOutput(block('stripe-fake-receiver')));

    gateway = Terminal.background(block('stripe-fake-gateway'), work, env);
    await eventually(async () => (await fetch(`http://127.0.0.1:${ports.public}/healthz`).catch(() => undefined))?.status === 200, 60_000);
    // The gateway took the printed secret, and says at start that Stripe is a double.
    expect(gateway.output()).toContain(`"msg":"billing: Stripe is a test double at http://127.0.0.1:${ports.fake} (billing.stripe.apiBase): no real payment is seen"`);
    expect(readFileSync(path.join(work, 'stripe-fake/webhook-secret'), 'utf8').trim()).toBe(secret);
  }, 150_000);

  it('signs up and pays: premium to the user, billing\'s active subscription to support, the sign-up and billing\'s change to the receiver', async () => {
    await run('stripe-fake-pay');
    await stored('premium', { status: 'active', in_grace: false });
    const stdout = await run('stripe-fake-support-paid');
    userId = (await db.sql<{ id: number }>("SELECT id FROM users WHERE email = 'ada@example.com'"))[0]!.id;
    expect(await support(stdout)).toMatchObject({ plan: 'premium', plan_source: 'billing', grace_ends_at: null, subscriptions: [{ status: 'active' }] });
    // The console, signed in with the printed ticket, then the user's page at the printed address.
    const [ticket, userPage] = stdout.split('\n').filter((l) => l.startsWith('http'));
    expect(userPage).toBe(`http://127.0.0.1:${ports.admin}/console/#/user/${userId}`);
    await page.goto(ticket!);
    await page.waitForFunction(() => document.getElementById('nav')?.hidden === false, { timeout: 15_000 });
    await page.goto(userPage!);
    const section = await consoleSays('stripe-fake-console-paid');
    // The customer the console links is the one the double made for the payment.
    expect(fake!.output()).toContain(`(customer ${/Stripe customer: (cus_\w+)/.exec(section)![1]})`);
    expect(await page.$('#user-grace')).toBeNull();

    const [created, changed, billed] = await hooksSay('stripe-fake-hooks-paid');
    const checkout = sent().find((e) => e.type === 'checkout.session.completed')!;
    expect(created).toEqual({ type: 'user.created', data: { user_id: userId, email: 'ada@example.com', plan: 'free' } });
    expect(changed).toEqual({ type: 'user.plan_changed', data: { user_id: userId, plan: 'premium', previous_plan: 'free', source: 'billing', stripe_event_id: checkout.id } });
    expect(billed).toEqual({ type: 'billing.plan_changed', data: { owner_type: 'user', owner_id: userId, plan: 'premium', previous_plan: 'free', stripe_event_id: checkout.id } });
  }, 120_000);

  it('fails a payment: premium kept, the grace seen by support and on the console, no hook', async () => {
    await run('stripe-fake-fail');
    await stored('premium', { status: 'past_due', in_grace: true });
    const view = await support(await run('stripe-fake-support-grace'));
    expect(view).toMatchObject({ plan: 'premium', plan_source: 'billing', subscriptions: [{ status: 'past_due' }] });
    const section = await consoleSays('stripe-fake-console-grace');
    // The console's grace is the admin API's: readable to the minute, the exact instant on hover.
    const graceEnd = new Date(view.grace_ends_at!);
    const readable = new Intl.DateTimeFormat('en-GB', { day: 'numeric', month: 'short', year: 'numeric', hour: '2-digit', minute: '2-digit', timeZone: 'UTC' }).format(graceEnd);
    expect(section).toContain(`the plan is kept until ${readable} UTC, then`);
    expect(await page.$eval('#user-grace time', (el) => [el.getAttribute('datetime'), el.getAttribute('title')])).toEqual([view.grace_ends_at, view.grace_ends_at]);
    expect(await page.$('#user-grace')).not.toBeNull();
  }, 120_000);

  it('the page\'s samples of what the owner and support see are the answers of a past_due subscription in its grace', async () => {
    // The samples as printed, their ids and dates aside: the same fields, of the same kinds, the same state.
    const owner = JSON.parse(docsBlock('billing', 'owner-subscription')) as OwnerView;
    const supportSample = (JSON.parse(`{${docsBlock('billing', 'support-billing')}}`) as { billing: SupportBilling }).billing;
    const token = (await terminal!.run('printf %s "$TOKEN"')).stdout;
    const mine = await fetch(`http://127.0.0.1:${ports.public}/api/v1/billing/subscription`, { headers: { authorization: `Bearer ${token}` } });
    expect(mine.status).toBe(200);
    const ownerView = await mine.json() as OwnerView;
    const admin = await fetch(`http://127.0.0.1:${ports.admin}/admin/v1/users/${userId}`, { headers: { authorization: `Bearer ${adminKey()}` } });
    const billing = (await admin.json() as { billing: SupportBilling }).billing;
    for (const [sample, answer] of [[owner, ownerView], [supportSample, billing]] as const) {
      expect(shapeOf(answer)).toEqual(shapeOf(sample));
      const [sub] = answer.subscriptions;
      expect(sub).toMatchObject({ status: 'past_due', price: 'price_premium_monthly', plan: 'premium' });
      expect(sub).toMatchObject(pick(sample.subscriptions[0]!, ['status', 'price', 'plan', 'cancel_at_period_end']));
      expect(answer.plan_source).toBe(sample.plan_source);
      // The grace is pastDueGraceDays (7, the page's example) after past_due was first seen, in the sample as in the answer.
      for (const view of [sample, answer]) expect(Date.parse(view.grace_ends_at!) - Date.parse(view.subscriptions[0]!.past_due_since!)).toBe(GRACE_DAYS * DAY_MS);
    }
    // Support's links: the customer and the subscription in Stripe's dashboard, its test-mode pages for a test key.
    expect(billing).toMatchObject({ billing_plan: supportSample.billing_plan, override_since: null, customer_url: `https://dashboard.stripe.com/test/customers/${billing.customer_id}` });
    expect(billing.subscriptions[0]!.url).toBe(`https://dashboard.stripe.com/test/subscriptions/${billing.subscriptions[0]!.id}`);
    expect(supportSample.customer_url).toMatch(/^https:\/\/dashboard\.stripe\.com\/test\/customers\/cus_/);
  }, 60_000);

  it('an operator\'s plan change is refused with 409 plan_managed_by_billing, then made as an override', async () => {
    const stdout = await run('stripe-fake-override');
    // The refusal, byte for byte: the catalog's text (French, the default; no code without errors.codes) and what billing computes.
    expect(stdout.split('\n')[0]).toBe(`${JSON.stringify({ error: ERRORS.planManagedByBilling.fr, billing_plan: 'premium' })} ${ERRORS.planManagedByBilling.status}`);
    expect(stdout.split('\n')[1]).toBe('200');
    await stored('pro', { status: 'past_due', in_grace: true });
    expect(await support(stdout)).toMatchObject({ plan: 'pro', plan_source: 'operator', subscriptions: [{ status: 'past_due' }] });
    expect(await db.sql("SELECT actor, data FROM audit_events WHERE user_id = $1 AND type = 'admin.plan_changed'", [userId]))
      .toEqual([{ actor: 'admin', data: { plan: 'pro', override: true } }]);
    await consoleSays('stripe-fake-console-override');
    expect(await hooksSay('stripe-fake-hooks-override')).toEqual([
      { type: 'user.plan_changed', data: { user_id: userId, plan: 'pro', previous_plan: 'premium', source: 'operator', override: true } },
    ]);
  }, 120_000);

  it('lapses: back on free, the override ended, the subscription canceled for support, billing\'s change to the receiver', async () => {
    await run('stripe-fake-lapse');
    await stored('free', { status: 'canceled', in_grace: false });
    expect(await support(await run('stripe-fake-support-lapsed'))).toMatchObject({ plan: 'free', plan_source: 'default', grace_ends_at: null, subscriptions: [{ status: 'canceled' }] });
    await consoleSays('stripe-fake-console-lapsed');
    expect(await page.$('#user-grace')).toBeNull();
    const deleted = sent().find((e) => e.type === 'customer.subscription.deleted')!;
    expect(await hooksSay('stripe-fake-hooks-lapsed')).toEqual([
      { type: 'user.plan_changed', data: { user_id: userId, plan: 'free', previous_plan: 'pro', source: 'billing', stripe_event_id: deleted.id } },
      { type: 'billing.plan_changed', data: { owner_type: 'user', owner_id: userId, plan: 'free', previous_plan: 'pro', stripe_event_id: deleted.id } },
    ]);
  }, 120_000);

  it('the double sent each event in Stripe\'s order, each answered 200; the receiver got six hooks in all', async () => {
    // The double prints a line once the gateway's answer is in, which may come a moment after the gateway stored the event.
    await eventually(() => sent().length >= 6, 10_000).catch(() => undefined);
    expect(sent().map((e) => `${e.type} ${e.status}`)).toEqual([
      'checkout.session.completed 200', 'customer.subscription.created 200', 'invoice.paid 200',
      'customer.subscription.updated 200', 'invoice.payment_failed 200', 'customer.subscription.deleted 200',
    ]);
    // Nothing came for the failed payment (no plan changed), nor twice.
    expect(received().map((l) => l.split(' ', 1)[0])).toEqual([
      'user.created', 'user.plan_changed', 'billing.plan_changed', 'user.plan_changed', 'user.plan_changed', 'billing.plan_changed',
    ]);
  }, 30_000);
});
