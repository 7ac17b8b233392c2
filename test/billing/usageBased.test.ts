// A usage-based plan (CONTRACT §29): `monthly: {limit: 0, overage: meter}` includes nothing and
// bills every counted use; docs/billing.md's `usage-based` example as written, against a local
// fake of Stripe, on a database of its own (only this file's gateway claims its meter events).
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { docsExample } from '../helpers/docs.js';
import { bearer, closeSql, describeWithServices, makeUser, marker, startTestGateway, testConfigFromYaml, throwawayDatabase, type TestGateway, type ThrowawayDatabase } from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { startStripeFake, type StripeFake } from '../helpers/stripeFake.js';

describeWithServices('a usage-based plan: every counted use billed', () => {
  let stripe: StripeFake;
  let app: EchoUpstream;
  let gw: TestGateway;
  let db: ThrowawayDatabase;

  beforeAll(async () => {
    [stripe, app, db] = await Promise.all([startStripeFake(), startEchoUpstream(), throwawayDatabase({ migrated: true })]);
    const env = { STRIPE_SECRET_KEY: 'rk_test_fake', STRIPE_WEBHOOK_SECRET: 'whsec_usage_based_secret', STRIPE_API_BASE: stripe.url, APP_URL: app.url };
    const config = testConfigFromYaml(docsExample('billing', 'usage-based'), env);
    gw = await startTestGateway({ ...config, storage: { ...config.storage, ...db.storage } });
  });
  afterAll(async () => {
    await gw?.close();
    await Promise.all([stripe?.close(), app?.close()]);
    await db?.drop();
    await closeSql();
  });

  it('serves, counts and reports each use from the first, exactly once', async () => {
    const user = await makeUser(gw, { plan: 'metered' });
    const customer = `cus_${randomBytes(6).toString('hex')}`;
    await db.sql("INSERT INTO billing_customers (owner_type, owner_id, stripe_customer_id) VALUES ('user', $1, $2)", [user.id, customer]);
    const m = marker();
    for (let i = 0; i < 5; i++) expect((await gw.get(`/api/v1/forecasts/${m}`, { headers: bearer(user.access) })).status).toBe(200);
    expect(app.count(m)).toBe(5);
    const me = await gw.get('/api/v1/user/me', { headers: bearer(user.access) });
    expect(me.json).toMatchObject({ plan: 'metered', monthly_usage: 5, monthly_remaining: 0, monthly_overage: 5, limits: { monthly: 0, overage: true } });
    expect(await db.sql('SELECT count(*)::int AS n FROM metered_uses WHERE user_id = $1 AND NOT refunded', [user.id])).toEqual([{ n: 5 }]);
    await expect.poll(async () => {
      await gw.services.billing!.meter!.report();
      return stripe.meterSum(customer);
    }, { timeout: 25_000, interval: 500 }).toBe(5);
  });

  it('/me shows no monthly count on a plan without a monthly window (a count kept from an earlier plan would mislead)', async () => {
    const user = await makeUser(gw, { plan: 'metered' });
    expect((await gw.get(`/api/v1/forecasts/${marker()}`, { headers: bearer(user.access) })).status).toBe(200);
    // Plain SQL, as an operator may: every instance follows within a second.
    await db.sql("UPDATE users SET plan = 'pro' WHERE id = $1", [user.id]);
    await expect.poll(async () => (await gw.get('/api/v1/user/me', { headers: bearer(user.access) })).json).toMatchObject({ plan: 'pro', monthly_usage: null, monthly_remaining: null });
  });
});
