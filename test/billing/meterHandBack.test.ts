// A meter event (an outbox message only billing's handler sends, webhooks/outbox.ts) due while an
// instance without that handler looks at the outbox (a fleet mid-change): that instance never claims
// it, so it makes no attempt, counts none and delays nothing; an instance with the handler sends it
// as its first attempt. Seen on CI: another test file's gateway on the shared database claimed a
// meter event first, and the delivered row said 2 attempts for one call to Stripe. Instances on a
// database of their own here.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { docsExample } from '../helpers/docs.js';
import {
  closeSql, describeWithServices, eventually, makeUser, startTestGateway, testConfig, testConfigFromYaml, throwawayDatabase, type TestGateway, type ThrowawayDatabase,
} from '../helpers/gateway.js';
import { startStripeFake, type StripeFake } from '../helpers/stripeFake.js';

describeWithServices('a meter event meets an instance without its handler', () => {
  let db: ThrowawayDatabase;
  let stripe: StripeFake;
  let plain: TestGateway | undefined;
  let billed: TestGateway | undefined;

  beforeAll(async () => {
    [db, stripe] = await Promise.all([throwawayDatabase({ migrated: true }), startStripeFake()]);
  });
  afterAll(async () => {
    await Promise.all([plain?.close(), billed?.close()]);
    await stripe?.close();
    await db?.drop();
    await closeSql();
  });

  type Row = { status: string; attempts: number; last_error: string | null; lease: string | null; last_attempt_at: Date | null };
  const row = async (id: string) => (await db.sql<Row>('SELECT status, attempts, last_error, lease, last_attempt_at FROM webhook_deliveries WHERE id = $1', [id]))[0];

  it('is left untouched by an instance without it, then sent once by one that has it: one attempt', async () => {
    plain = await startTestGateway(testConfig({ storage: db.storage }));
    const user = await makeUser(plain);
    const id = `gw_${user.id}_handback`;
    const body = { event_name: 'api_requests', identifier: id, timestamp: Math.floor(Date.now() / 1000), payload: { stripe_customer_id: 'cus_handback', value: '2' } };
    await db.sql("INSERT INTO webhook_deliveries (id, user_id, type, body, max_attempts, traceparent) VALUES ($1, $2, 'stripe.meter_event', $3, 5, NULL)", [id, user.id, JSON.stringify(body)]);
    // Two claim passes begun after the insert, the message due in both: neither takes it.
    await plain.services.deliveries.settled();
    await plain.services.deliveries.settled();
    expect(await row(id)).toEqual({ status: 'pending', attempts: 0, last_error: null, lease: null, last_attempt_at: null });

    // The billed instance joins while the plain one still runs.
    const env = { STRIPE_SECRET_KEY: 'rk_test_fake', STRIPE_WEBHOOK_SECRET: 'whsec_handback', STRIPE_API_BASE: stripe.url, APP_URL: 'http://127.0.0.1:9' };
    const mail = "mail: { smtp: '', from: 'G <g@example.test>', resetUrl: 'https://app.example.test/r?token={token}', verifyUrl: 'https://app.example.test/v?token={token}' }\n";
    const config = testConfigFromYaml(`${docsExample('billing', 'overage')}${mail}`, env);
    billed = await startTestGateway({ ...config, storage: { ...config.storage, ...db.storage } });
    await eventually(async () => (await row(id))?.status === 'delivered', 10_000);
    expect(await row(id)).toMatchObject({ attempts: 1, last_error: null });
    expect(stripe.meterSum('cus_handback')).toBe(2);
  });
});
