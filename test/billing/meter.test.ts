// Metered overage (CONTRACT §23, issue 53): docs/billing.md's `overage` example against a local fake
// of Stripe. Past the included allowance nothing is refused; the uses beyond it, less the refunded
// ones, reach the Stripe meter through the durable outbox, exactly: two instances reporting, Stripe
// failing for a while, and Stripe taking an event whose answer never comes back (the outbox's mark
// never made, as when the reporter dies there) neither lose nor double a use, and requests never
// wait on Stripe. An organization's pool (CONTRACT §22) is metered as its own: its records name
// the organization, and its overage reaches the organization's customer. The two instances run on a
// database of their own: they are the only ones that claim these meter events (on the run's shared
// database another file's gateway could, and one killed holding a claim would delay a report).
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { StorageUnavailableError } from '../../src/errors/index.js';
import { docsExample } from '../helpers/docs.js';
import {
  bearer, closeSql, describeWithServices, loggedLines, makeUser, marker, startTestGateway, testConfigFromYaml, throwawayDatabase, type TestGateway, type TestUser, type ThrowawayDatabase,
} from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { startStripeFake, type StripeFake } from '../helpers/stripeFake.js';

const SECRET = 'whsec_meter_test_secret';
const ROUTE = '/api/v1/forecasts';

describeWithServices('metered overage reported to a Stripe meter', () => {
  let stripe: StripeFake;
  let app: EchoUpstream;
  let a: TestGateway;
  let b: TestGateway;
  let db: ThrowawayDatabase;
  const sql: ThrowawayDatabase['sql'] = (text, params) => db.sql(text, params);

  beforeAll(async () => {
    [stripe, app, db] = await Promise.all([startStripeFake(), startEchoUpstream(), throwawayDatabase({ migrated: true })]);
    app.handle = (req, res) => {
      if (!req.url?.endsWith('-503')) return false;
      res.writeHead(503).end();
      return true;
    };
    const env = { STRIPE_SECRET_KEY: 'rk_test_fake', STRIPE_WEBHOOK_SECRET: SECRET, STRIPE_API_BASE: stripe.url, APP_URL: app.url };
    // The example as written, with organizations on and its route open to acting for one (org: optional).
    const mail = "mail: { smtp: '', from: 'G <g@example.test>', resetUrl: 'https://app.example.test/r?token={token}', verifyUrl: 'https://app.example.test/v?token={token}', "
      + "invitationUrl: 'https://app.example.test/j?token={token}' }\norganizations: { enabled: true }\n";
    const example = testConfigFromYaml(`${docsExample('billing', 'overage')}${mail}`, env);
    const config = { ...example, storage: { ...example.storage, ...db.storage }, routes: example.routes.map((r) => ({ ...r, org: 'optional' as const })) };
    [a, b] = await Promise.all([startTestGateway(config), startTestGateway(config)]);
  });

  afterAll(async () => {
    await Promise.all([a, b].map((gw) => gw?.close()));
    await Promise.all([stripe?.close(), app?.close()]);
    await db?.drop();
    await closeSql();
  });

  /** A premium user (3 uses included, then metered) with a Stripe customer. */
  async function payer(): Promise<TestUser & { customer: string }> {
    const user = await makeUser(a, { plan: 'premium' });
    const customer = `cus_${randomBytes(6).toString('hex')}`;
    await sql("INSERT INTO billing_customers (owner_type, owner_id, stripe_customer_id) VALUES ('user', $1, $2)", [user.id, customer]);
    return { ...user, customer };
  }
  const use = (gw: TestGateway, user: TestUser, path: string) => gw.get(`${ROUTE}/${path}`, { headers: bearer(user.access) });
  /** Both instances' reporters pass (as their timers would), then what Stripe holds for the customer. */
  const reported = async (customer: string) => {
    await Promise.all([a, b].map((gw) => gw.services.billing!.meter!.report()));
    return stripe.meterSum(customer);
  };
  const eventsOf = (customer: string) => stripe.meterEvents.filter((e) => e.payload.stripe_customer_id === customer);
  const pass = () => Promise.all([a, b].map((gw) => gw.services.billing!.meter!.report()));
  const WAITING = 'metered usage: an owner has uses past its allowance but no Stripe customer; they wait';
  const marks = async (id: number) => (await sql<{ mark: string | null }>('SELECT delivery_id AS mark FROM metered_uses WHERE user_id = $1 ORDER BY id', [id])).map((r) => r.mark);
  const deliveries = (id: number) => sql<{ id: string; status: string; attempts: number }>(
    "SELECT id, status, attempts FROM webhook_deliveries WHERE user_id = $1 AND type = 'stripe.meter_event' ORDER BY created_at", [id]);

  it('serves every use past the allowance and reports exactly those not refunded, once, from two instances', async () => {
    const user = await payer();
    const m = marker();
    // 3 included, 5 more, one of which the upstream fails with 503 (listed: refunded).
    for (let i = 0; i < 7; i++) {
      const res = await use(i % 2 ? a : b, user, m);
      expect(res.status).toBe(200);
      if (i >= 2) expect(res.headers.ratelimit).toMatch(/^"monthly";r=0;t=\d+$/);
    }
    expect((await use(a, user, `${m}-503`)).status).toBe(503);
    await expect.poll(async () => (await a.get('/api/v1/user/me', { headers: bearer(user.access) })).json, { timeout: 5000 })
      .toMatchObject({ monthly_usage: 7, monthly_remaining: 0, monthly_overage: 4, limits: { monthly: 3, overage: true } });
    expect(app.count(m)).toBe(8);
    // Reported once settled (twice the 1 s upstream timeout, plus 2 s): 4 uses, in an event per
    // pass that found some settled (records counted apart may settle in different passes).
    await expect.poll(() => reported(user.customer), { timeout: 25_000, interval: 500 }).toBe(4);
    const events = eventsOf(user.customer);
    for (const event of events) {
      expect(event).toMatchObject({ event_name: 'api_requests', payload: { stripe_customer_id: user.customer } });
      expect(event.identifier).toMatch(new RegExp(`^gw_${user.id}_\\d{4}-\\d{2}-01_\\d+_\\d+$`));
    }
    // Compared as sets: two passes' events may reach Stripe in another order than they were queued.
    const byId = (a: { id: string }, b: { id: string }) => a.id.localeCompare(b.id);
    await expect.poll(async () => (await deliveries(user.id)).sort(byId), { timeout: 10_000 })
      .toEqual(events.map((e) => ({ id: e.identifier, status: 'delivered', attempts: 1 })).sort(byId));
    // More passes report nothing more.
    await reported(user.customer);
    expect(eventsOf(user.customer)).toHaveLength(events.length);
    expect(stripe.meterSum(user.customer)).toBe(4);

    // What the alert rules read (deploy/monitoring/): each reporter's last pass, and the meter
    // events among the outbox's deliveries, apart from webhooks and hooks.
    const texts = await Promise.all([a, b].map((gw) => gw.services.metrics.registry.metrics()));
    for (const text of texts) {
      const at = Number(/^gateway_billing_meter_last_report_timestamp_seconds (\S+)$/m.exec(text)?.[1]);
      expect(Date.now() / 1000 - at).toBeGreaterThanOrEqual(0);
      expect(Date.now() / 1000 - at).toBeLessThan(30);
    }
    const sent = texts.map((text) => Number(/^gateway_webhook_deliveries_total\{kind="billing",outcome="success"\} (\d+)$/m.exec(text)?.[1] ?? 0));
    expect(sent[0]! + sent[1]!).toBeGreaterThanOrEqual(events.length);
  });

  it('an owner past its allowance without a Stripe customer: its uses wait, warned once an instance, and are reported once it has one', async () => {
    const user = await makeUser(a, { plan: 'premium' });
    const m = marker();
    for (let i = 0; i < 5; i++) expect((await use(i % 2 ? a : b, user, m)).status).toBe(200);
    const warnings = (gw: TestGateway) => loggedLines(gw, WAITING);
    await expect.poll(async () => { await pass(); return [...warnings(a), ...warnings(b)]; }, { timeout: 25_000, interval: 500 })
      .toEqual(expect.arrayContaining([expect.objectContaining({ level: 40, userId: user.id })]));
    // More passes, each instance on its own (each finds the records again), warn no more.
    for (const gw of [a, a, b, b]) await gw.services.billing!.meter!.report();
    expect([warnings(a).length, warnings(b).length]).toEqual([1, 1]);
    expect(await deliveries(user.id)).toEqual([]);
    expect(await sql('SELECT count(*)::int AS n FROM metered_uses WHERE user_id = $1 AND delivery_id IS NULL', [user.id])).toEqual([{ n: 2 }]);
    const customer = `cus_${randomBytes(6).toString('hex')}`;
    await sql("INSERT INTO billing_customers (owner_type, owner_id, stripe_customer_id) VALUES ('user', $1, $2)", [user.id, customer]);
    // One instance's pass at a time: two at once may each take one of the records (SKIP LOCKED),
    // as CI once saw (two events of one record each).
    await expect.poll(async () => {
      for (const gw of [a, b]) await gw.services.billing!.meter!.report();
      return stripe.meterSum(customer);
    }, { timeout: 25_000, interval: 500 }).toBe(2);
    // Both records, settled long before, in one event, and marked with its identifier.
    const [event, ...more] = eventsOf(customer);
    expect([await marks(user.id), more]).toEqual([[event!.identifier, event!.identifier], []]);
  });

  it('a month whose uses past the allowance were all refunded bills nothing: marked refunded, with a customer or without one, and no warning', async () => {
    const payerOf = await payer();
    const without = await makeUser(a, { plan: 'premium' });
    const m = marker();
    for (const user of [payerOf, without]) {
      for (let i = 0; i < 3; i++) expect((await use(a, user, m)).status).toBe(200);
      for (let i = 0; i < 2; i++) expect((await use(b, user, `${m}-503`)).status).toBe(503);
    }
    await expect.poll(async () => { await pass(); return [await marks(payerOf.id), await marks(without.id)]; }, { timeout: 25_000, interval: 500 })
      .toEqual([['refunded', 'refunded'], ['refunded', 'refunded']]);
    expect([eventsOf(payerOf.customer), await deliveries(payerOf.id), await deliveries(without.id)]).toEqual([[], [], []]);
    expect([...loggedLines(a, WAITING), ...loggedLines(b, WAITING)].filter((line) => line.userId === without.id)).toEqual([]);
  });

  it('a pass the database fails says why and keeps the last pass\'s time; two passes asked at once are one', async () => {
    const meter = a.services.billing!.meter!;
    expect(meter.report()).toBe(meter.report());
    await meter.report();
    const last = meter.lastPassAt;
    const db = a.services.db;
    const transaction = db.transaction.bind(db);
    db.transaction = (() => Promise.reject(new StorageUnavailableError(new Error('the test\'s outage')))) as typeof db.transaction;
    try {
      await meter.report();
    } finally {
      db.transaction = transaction;
    }
    expect(meter.lastPassAt).toBe(last);
    expect(loggedLines(a, 'metered usage: records could not be taken; tried again at the next pass').at(-1))
      .toMatchObject({ level: 40, err: { type: 'StorageUnavailableError', message: expect.stringMatching(/^storage unavailable: the test's outage/) } });
    await expect.poll(async () => { await meter.report(); return meter.lastPassAt; }).toBeGreaterThan(last);
  });

  it('reports on its own, every 15 seconds, once the uses are settled (never before: a pass right after them finds nothing)', async () => {
    const user = await payer();
    const m = marker();
    for (let i = 0; i < 4; i++) expect((await use(a, user, m)).status).toBe(200);
    await pass();
    expect(await marks(user.id)).toEqual([null]);
    // No pass asked from here: the reporters' timers (15 s) after the 4 s the records take to settle.
    await expect.poll(() => stripe.meterSum(user.customer), { timeout: 45_000, interval: 500 }).toBe(1);
  }, 60_000);

  it('records exactly the uses past the allowance of parallel requests on two instances, and reports exactly those', async () => {
    const user = await payer();
    const m = marker();
    const answers = await Promise.all(Array.from({ length: 24 }, (_, i) => use(i % 2 ? a : b, user, m)));
    expect(answers.map((r) => r.status)).toEqual(Array(24).fill(200));
    // Blocks within the allowance handed back, the counts settle on the uses served.
    await expect.poll(async () => (await sql<{ monthly_usage: number }>('SELECT monthly_usage FROM users WHERE id = $1', [user.id]))[0]!.monthly_usage, { timeout: 5000 }).toBe(24);
    const [records] = await sql<{ billed: number }>('SELECT count(*) FILTER (WHERE NOT refunded)::int AS billed FROM metered_uses WHERE user_id = $1', [user.id]);
    expect(records!.billed).toBe(21);
    await expect.poll(() => reported(user.customer), { timeout: 25_000, interval: 500 }).toBe(21);
    expect(new Set(eventsOf(user.customer).map((e) => e.identifier)).size).toBe(eventsOf(user.customer).length);
  });

  it('loses and doubles nothing while Stripe fails, and requests never wait on it', async () => {
    const user = await payer();
    const m = marker();
    stripe.meterMode('fail');
    try {
      for (let i = 0; i < 5; i++) expect((await use(a, user, m)).status).toBe(200);
      await expect.poll(async () => {
        await reported(user.customer);
        return stripe.calls.filter((c) => c.path === '/v1/billing/meter_events' && c.form['payload[stripe_customer_id]'] === user.customer).length;
      }, { timeout: 25_000, interval: 500 }).toBeGreaterThanOrEqual(2);
      // Stripe failing: a counted use past the allowance is answered as fast as ever.
      const started = Date.now();
      expect((await use(b, user, m)).status).toBe(200);
      expect(Date.now() - started).toBeLessThan(1000);
      expect(stripe.meterSum(user.customer)).toBe(0);
    } finally {
      stripe.meterMode('ok');
    }
    await expect.poll(() => reported(user.customer), { timeout: 20_000, interval: 500 }).toBe(3);
    await new Promise((r) => setTimeout(r, 1000));
    expect(await reported(user.customer)).toBe(3);
    // One outbox message per event Stripe holds, each delivered after its retries.
    await expect.poll(async () => (await deliveries(user.id)).map((d) => d.status), { timeout: 10_000 }).toEqual(eventsOf(user.customer).map(() => 'delivered'));
  });

  it('loses and doubles nothing while Stripe cannot be reached at all (connection refused)', async () => {
    const user = await payer();
    const m = marker();
    await stripe.down();
    try {
      for (let i = 0; i < 6; i++) expect((await use(i % 2 ? a : b, user, m)).status).toBe(200);
      // Queued and attempted: the attempts fail (refused) and are retried later.
      await expect.poll(async () => {
        await reported(user.customer);
        return (await deliveries(user.id)).reduce((n, d) => n + d.attempts, 0);
      }, { timeout: 25_000, interval: 500 }).toBeGreaterThanOrEqual(2);
      expect((await deliveries(user.id)).every((d) => d.status === 'pending')).toBe(true);
    } finally {
      await stripe.up();
    }
    await expect.poll(() => reported(user.customer), { timeout: 25_000, interval: 500 }).toBe(3);
    await expect.poll(async () => (await deliveries(user.id)).map((d) => d.status), { timeout: 10_000 }).toEqual(eventsOf(user.customer).map(() => 'delivered'));
    expect(await reported(user.customer)).toBe(3);
  });

  it('bills once when Stripe took an event but its answer never arrived: the retry repeats the identifier', async () => {
    const user = await payer();
    const m = marker();
    // Stripe's answers to each of this customer's events lost on their first attempt: set before the
    // uses, since a reporter's own timer (every 15 s) may queue their event as soon as the records
    // settle, before a test's pass.
    stripe.meterLoseFirstAttempts(user.customer);
    for (let i = 0; i < 5; i++) expect((await use(b, user, m)).status).toBe(200);
    await expect.poll(async () => {
      await reported(user.customer);
      return stripe.meterSum(user.customer);
    }, { timeout: 25_000, interval: 500 }).toBe(2);
    // The outbox never heard the answer: it sends the same identifier again, Stripe says it has it.
    // (One event, or two when a pass fell between the two records' settling: each one lost its first
    // attempt, counted per identifier, since two sent side by side interleave their requests.)
    const events = eventsOf(user.customer);
    await expect.poll(async () => (await deliveries(user.id)).map((d) => d.status), { timeout: 15_000 }).toEqual(events.map(() => 'delivered'));
    for (const delivery of await deliveries(user.id)) expect(delivery.attempts).toBeGreaterThanOrEqual(2);
    expect(eventsOf(user.customer)).toHaveLength(events.length);
    expect(stripe.meterSum(user.customer)).toBe(2);
    const sent = stripe.calls.filter((c) => c.path === '/v1/billing/meter_events' && c.form['payload[stripe_customer_id]'] === user.customer);
    expect(new Set(sent.map((c) => c.form.identifier)).size).toBe(events.length);
    expect(sent.length).toBeGreaterThanOrEqual(2 * events.length);
  });

  it('an organization\'s pool past its allowance is recorded as the organization\'s and reported to its customer, once', async () => {
    const member = await makeUser(a);
    const org = (await sql<{ id: number }>("INSERT INTO organizations (name, plan) VALUES ('Metered', 'premium') RETURNING id"))[0]!.id;
    await sql("INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'member')", [org, member.id]);
    const customer = `cus_org_${randomBytes(6).toString('hex')}`;
    await sql("INSERT INTO billing_customers (owner_type, owner_id, stripe_customer_id) VALUES ('org', $1, $2)", [org, customer]);
    const m = marker();
    // 3 included, 2 more on the pool; nothing on the member's own counters.
    for (let i = 0; i < 5; i++) expect((await (i % 2 ? a : b).get(`${ROUTE}/${m}`, { headers: { ...bearer(member.access), 'Gateway-Org': String(org) } })).status).toBe(200);
    expect(await sql('SELECT count(*)::int AS n FROM metered_uses WHERE org_id = $1 AND user_id IS NULL', [org])).toEqual([{ n: 2 }]);
    expect(await sql('SELECT count(*)::int AS n FROM metered_uses WHERE user_id = $1', [member.id])).toEqual([{ n: 0 }]);
    await expect.poll(() => reported(customer), { timeout: 25_000, interval: 500 }).toBe(2);
    for (const event of eventsOf(customer)) expect(event.identifier).toMatch(new RegExp(`^gw_org${org}_\\d{4}-\\d{2}-01_\\d+_\\d+$`));
    await reported(customer);
    expect(stripe.meterSum(customer)).toBe(2);
  });
});
