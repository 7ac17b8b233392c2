// Billed = served − refunded through a crash (CONTRACT §23, issue 53): the reporting gateway is
// killed between Stripe's answer to a meter event and the outbox's mark of it, and another gateway
// sends the event again after the lease. The order is forced, not timed: the fake Stripe takes the
// event and, before answering, lets the test lock the outbox row, so the gateway's mark waits on
// the lock with Stripe's 200 in hand; the test kills it there (SIGKILL). What must hold is what
// Stripe sees: the same identifier twice, the event counted once (Stripe keeps one event per
// identifier), the served uses past the allowance less the refunded ones, and every record marked.
import { randomBytes } from 'node:crypto';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { docsExample } from '../helpers/docs.js';
import { bearer, closeSql, describeWithServices, eventually, marker, newEmail, newPassword, rawTestConfig, throwawayDatabase, type ThrowawayDatabase } from '../helpers/gateway.js';
import { spawnGateway, type GatewayProcess } from '../helpers/gatewayProcess.js';
import { request } from '../helpers/http.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { holdRows, type HeldRow } from '../helpers/rowLock.js';
import { startStripeFake, type FakeMeterEvent, type StripeFake } from '../helpers/stripeFake.js';

const ROUTE = '/api/v1/forecasts';
const INCLUDED = 3;
/** The meter events an outbox has claimed and not yet marked. */
const IN_FLIGHT = "SELECT id FROM webhook_deliveries WHERE type = 'stripe.meter_event' AND status = 'pending' AND lease IS NOT NULL";

describeWithServices('a meter event through a crash of the reporting gateway', () => {
  // A database of its own: no other test's gateway may claim the meter event (CONTRACT §9 outbox).
  let tmp: ThrowawayDatabase;
  let stripe: StripeFake;
  let app: EchoUpstream;
  const cleanups: Array<() => Promise<unknown>> = [];

  beforeEach(async () => {
    [tmp, stripe, app] = await Promise.all([throwawayDatabase({ migrated: true }), startStripeFake(), startEchoUpstream()]);
    app.handle = (req, res) => {
      if (!req.url?.endsWith('-503')) return false;
      res.writeHead(503).end();
      return true;
    };
  });
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    await Promise.all([stripe.close(), app.close()]);
    await tmp.drop();
    await closeSql();
  });

  /**
   * docs/billing.md's `overage` example as written (3 uses included, then metered; 503 refunded;
   * upstream timeout 1 s, so records settle 4 s after their use), run as an operator runs it, with
   * the test settings beside it (webhooks.timeout 1 s: the outbox's lease is 7 s). Postgres checks
   * this process's connections every 100 ms: the statement a killed process left waiting on a lock
   * is dropped, as if never sent, rather than run once the lock goes.
   */
  const spawn = async () => {
    const settings = rawTestConfig({ storage: tmp.storage, webhooks: { timeout: '1s' } });
    const yaml = `${docsExample('billing', 'overage')}\n${Object.entries(settings).map(([k, v]) => `${k}: ${JSON.stringify(v)}`).join('\n')}\n`;
    const env = {
      STRIPE_SECRET_KEY: 'rk_test_fake', STRIPE_WEBHOOK_SECRET: 'whsec_crash_test', STRIPE_API_BASE: stripe.url, APP_URL: app.url,
      PGOPTIONS: '-c client_connection_check_interval=100',
    };
    const gw = await spawnGateway(yaml, { env });
    cleanups.push(() => gw.stop());
    return gw;
  };

  /** A premium user made through the API of `gw`, with a Stripe customer. */
  async function payer(gw: GatewayProcess): Promise<{ id: number; access: string; customer: string }> {
    const email = newEmail();
    const password = newPassword();
    const id = (await request(gw.url, 'POST', '/api/v1/auth/register', { json: { email, password } })).json.user_id as number;
    await tmp.sql("UPDATE users SET plan = 'premium' WHERE id = $1", [id]);
    const access = (await request(gw.url, 'POST', '/api/v1/auth/login', { json: { email, password } })).json.access_token as string;
    const customer = `cus_${randomBytes(6).toString('hex')}`;
    await tmp.sql("INSERT INTO billing_customers (owner_type, owner_id, stripe_customer_id) VALUES ('user', $1, $2)", [id, customer]);
    return { id, access, customer };
  }

  const sentWith = (identifier: string) => stripe.calls.filter((c) => c.path === '/v1/billing/meter_events' && c.form.identifier === identifier);

  it('bills once when the reporter dies after Stripe answered and before the outbox marked: another gateway resends the same identifier', async () => {
    const a = await spawn();
    const user = await payer(a);
    // The first meter event Stripe takes: before it is answered, the test holds the outbox rows in
    // flight (claimed, not marked), found without trusting the identifier to name them.
    let held: HeldRow | undefined;
    let inFlight: string[] = [];
    let first: FakeMeterEvent | undefined;
    stripe.beforeMeterAnswer(async (event) => {
      stripe.beforeMeterAnswer(undefined);
      held = await holdRows(`${IN_FLIGHT} FOR UPDATE`, [], tmp.url);
      inFlight = (await held.run<{ id: string }>(IN_FLIGHT)).map((r) => r.id);
      first = event;
    });
    cleanups.push(() => held?.release().catch(() => undefined) ?? Promise.resolve());

    // 3 included, then 4 past the allowance, one answered 503 (refunded): 3 to bill.
    const m = marker();
    for (const path of [m, m, m, m, m, `${m}-503`, m]) await request(a.url, 'GET', `${ROUTE}/${path}`, { headers: bearer(user.access) });
    expect(app.count(m)).toBe(7);
    await eventually(async () => (await request(a.url, 'GET', '/api/v1/user/me', { headers: bearer(user.access) })).json.monthly_usage === 6, 5000);
    const served = 6;

    // A's reporter (every 15 s) queues the event, its outbox sends it, Stripe takes it and answers
    // once the row is held; A's mark of the message now waits on the test's lock: A dies there.
    await eventually(() => first !== undefined, 40_000, 100);
    await held!.waiters(1);
    a.child.kill('SIGKILL');
    expect(await a.exited).toEqual({ code: null, signal: 'SIGKILL' });
    expect(a.logs.filter((l) => /could not be recorded/.test(l.msg))).toEqual([]);
    // The dead process's mark is dropped by Postgres before the rows go: never made.
    await held!.noWaiters();
    expect(await held!.run('SELECT status, attempts FROM webhook_deliveries WHERE id = ANY($1)', [inFlight])).toEqual(inFlight.map(() => ({ status: 'pending', attempts: 1 })));
    await held!.release();
    held = undefined;
    expect(sentWith(first!.identifier)).toHaveLength(1);

    // Another gateway takes the messages once A's lease lapses and sends them again.
    await spawn();
    const meterDeliveries = () => tmp.sql<{ id: string; status: string; attempts: number }>("SELECT id, status, attempts FROM webhook_deliveries WHERE type = 'stripe.meter_event' ORDER BY id");
    await eventually(async () => (await meterDeliveries()).every((d) => d.status === 'delivered') && inFlight.length > 0, 30_000, 100);
    await eventually(async () => (await tmp.sql<{ n: number }>('SELECT count(*)::int AS n FROM metered_uses WHERE user_id = $1 AND delivery_id IS NULL', [user.id]))[0]!.n === 0, 30_000, 200);
    // What Stripe saw: the same identifier twice, the same event; counted once (one event per
    // identifier): the uses served past the allowance, less the refunded one.
    const sent = sentWith(first!.identifier);
    expect(sent).toHaveLength(2);
    expect(sent[1]!.form).toEqual(sent[0]!.form);
    expect(stripe.meterEvents.filter((e) => e.identifier === first!.identifier)).toHaveLength(1);
    expect(stripe.meterSum(user.customer)).toBe(served - INCLUDED);
    // The outbox: the message held through the crash delivered at its second attempt, under the identifier's name.
    expect((await meterDeliveries()).filter((d) => d.id === first!.identifier)).toEqual([{ id: first!.identifier, status: 'delivered', attempts: 2 }]);
    expect(inFlight).toContain(first!.identifier);
    // Every record marked, each event's identifier derived from its records (owner, month, first and last).
    const records = await tmp.sql<{ delivery_id: string; month: string; first: string; last: string; n: number; refunded: number }>(
      `SELECT delivery_id, to_char(month, 'YYYY-MM-DD') AS month, min(id)::text AS first, max(id)::text AS last, count(*)::int AS n, count(*) FILTER (WHERE refunded)::int AS refunded
         FROM metered_uses WHERE user_id = $1 GROUP BY delivery_id, month ORDER BY first`, [user.id]);
    expect(records.reduce((n, r) => n + r.n, 0)).toBe(4);
    expect(records.reduce((n, r) => n + r.refunded, 0)).toBe(1);
    for (const group of records.filter((r) => r.delivery_id !== 'refunded')) {
      expect(group.delivery_id).toBe(`gw_${user.id}_${group.month}_${group.first}_${group.last}`);
      expect(stripe.meterEvents.filter((e) => e.identifier === group.delivery_id).map((e) => Number(e.payload.value))).toEqual([group.n - group.refunded]);
    }
    expect(records.map((r) => r.delivery_id)).toContain(first!.identifier);
  });
});
