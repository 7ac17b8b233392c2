// Issue 71 (CONTRACT §29): `gateway users set-plan` and `gateway orgs set-plan` on an owner whose
// plan billing manages exit 1 and change nothing, unless --override; on the database directly and
// through a running gateway's admin API (--admin). The built CLI in its own process; the owners'
// subscriptions are rows as billing stores them (no Stripe call is made by a plan change).
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import { cliFolder, type CliFolder } from '../helpers/cliFolder.js';
import { ADMIN_KEY, closeSql, describeWithServices, makeUser, sql, startTestGateway, testConfig, testServices, type TestGateway } from '../helpers/gateway.js';

const STRIPE = {
  secretKey: 'rk_test_cli', webhookSecrets: ['whsec_Y2xpLW92ZXJyaWRl'], prices: { price_premium_monthly: 'premium' },
  successUrl: 'https://app.example.com/billing?done=1', cancelUrl: 'https://app.example.com/billing',
};
const NOTE = ' (an override of billing\'s plan: it holds until billing computes another plan)';
const refusal = (who: string) => `gateway: ${who}: kept: its plan is managed by billing (a subscription gives premium); `
  + 'set premium, or pass --override to hold another plan until billing computes a plan other than premium\n';

describeWithServices('set-plan --override (CONTRACT §29)', () => {
  let folder: CliFolder;
  let gw: TestGateway;
  let adminUrl: string;
  let closeAdmin: () => Promise<void>;

  const cli = (...args: string[]) => folder.cli(args);

  beforeAll(async () => {
    folder = cliFolder('gw-cli-override-', testServices!.postgres, [
      `  apiKey: ${JSON.stringify(ADMIN_KEY)}`,
      `billing: ${JSON.stringify({ stripe: STRIPE })}`,
    ]);
    gw = await startTestGateway(testConfig({ billing: { stripe: STRIPE } }));
    const admin = await buildAdminApp(gw.services);
    adminUrl = await admin.listen({ host: '127.0.0.1', port: 0 });
    closeAdmin = () => admin.close();
  }, 120_000);
  afterAll(async () => {
    await closeAdmin?.();
    await gw?.close();
    folder?.remove();
    await closeSql();
  });

  /** A premium subscription, active, as billing stores it once Stripe said so. */
  async function subscribed(type: 'user' | 'org', id: number): Promise<void> {
    const tag = randomBytes(6).toString('hex');
    await sql(`INSERT INTO billing_subscriptions (stripe_subscription_id, owner_type, owner_id, stripe_customer_id, status, price, prices)
      VALUES ($1, $2, $3, $4, 'active', 'price_premium_monthly', '{price_premium_monthly}')`, [`sub_${tag}`, type, id, `cus_${tag}`]);
    await sql(type === 'user' ? 'UPDATE users SET plan = $2 WHERE id = $1' : 'UPDATE organizations SET plan = $2 WHERE id = $1', [id, 'premium']);
  }
  const audit = (type: string, where: string, id: number) => sql(`SELECT actor, data FROM audit_events WHERE type = $1 AND ${where} = $2 ORDER BY id`, [type, String(id)]);

  it.each(['directly', 'through --admin'])('users set-plan %s: refused, then held with --override', async (via) => {
    const user = await makeUser(gw);
    await subscribed('user', user.id);
    const admin = via === 'directly' ? [] : ['--admin', adminUrl];
    const who = `user ${user.id} (${user.email})`;
    expect(await cli('users', 'set-plan', user.email, 'pro', ...admin)).toEqual({ code: 1, stdout: '', stderr: refusal(who) });
    expect(await sql('SELECT plan FROM users WHERE id = $1', [user.id])).toEqual([{ plan: 'premium' }]);
    const held = await cli('users', 'set-plan', user.email, 'pro', '--override', ...admin);
    expect(held).toEqual({ code: 0, stdout: `${who}: plan premium → pro${NOTE}\n`, stderr: '' });
    expect(await sql('SELECT plan FROM users WHERE id = $1', [user.id])).toEqual([{ plan: 'pro' }]);
    // The CLI on direct storage is actor cli; through --admin, what authenticated: the shared key is admin (CONTRACT §33).
    const actor = via === 'directly' ? 'cli' : 'admin';
    expect(await audit('admin.plan_changed', 'user_id::text', user.id)).toEqual([{ actor, data: { plan: 'pro', override: true } }]);
    expect(await sql("SELECT billing_plan FROM billing_plan_overrides WHERE owner_type = 'user' AND owner_id = $1", [user.id])).toEqual([{ billing_plan: 'premium' }]);
  });

  it.each(['directly', 'through --admin'])('orgs set-plan %s: refused, then held with --override', async (via) => {
    const id = (await sql<{ id: number }>("INSERT INTO organizations (name, created_at) VALUES ('Billed Co', now()) RETURNING id"))[0]!.id;
    await subscribed('org', id);
    const admin = via === 'directly' ? [] : ['--admin', adminUrl];
    const who = `organization ${id}`;
    expect(await cli('orgs', 'set-plan', String(id), 'pro', ...admin)).toEqual({ code: 1, stdout: '', stderr: refusal(who) });
    expect(await sql('SELECT plan FROM organizations WHERE id = $1', [id])).toEqual([{ plan: 'premium' }]);
    const held = await cli('orgs', 'set-plan', String(id), 'pro', '--override', ...admin);
    const said = via !== 'directly' ? `${who} "Billed Co": plan set to pro${NOTE}\n` : `${who} "Billed Co": plan premium → pro${NOTE}\n`;
    expect(held).toEqual({ code: 0, stdout: said, stderr: '' });
    expect(await sql('SELECT plan FROM organizations WHERE id = $1', [id])).toEqual([{ plan: 'pro' }]);
    const actor = via === 'directly' ? 'cli' : 'admin';
    expect(await audit('admin.org_plan_changed', "data->>'org_id'", id)).toEqual([{ actor, data: { org_id: id, plan: 'pro', previous: 'premium', override: true } }]);
    // The plan billing computes ends the override, no --override needed.
    expect((await cli('orgs', 'set-plan', String(id), 'premium', ...admin)).code).toBe(0);
    expect(await sql("SELECT billing_plan FROM billing_plan_overrides WHERE owner_type = 'org' AND owner_id = $1", [id])).toEqual([]);
  });
});
