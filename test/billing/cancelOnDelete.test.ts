// CONTRACT §23: "Deleting an account with an active subscription cancels it at period end first."
// docs/billing.md's example against the Stripe fake: the running subscriptions of the user are set
// cancel_at_period_end through Stripe's API before the rows go; Stripe failing keeps the account
// (503, try again); ended subscriptions are left alone. The same for an operator's erasure: the
// admin API (which the console and `gateway users delete --admin` call) and `gateway users delete`
// on the database.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import { ensureBuilt, gateway } from '../helpers/cli.js';
import { docsExample } from '../helpers/docs.js';
import { failingStatements } from '../helpers/failingDatabase.js';
import {
  ADMIN_KEY, bearer, closeSql, describeWithServices, loggedLines, makeUser, sql, startTestGateway, testConfigFromYaml, testServices, TEST_JWT_SECRET, type TestGateway, type TestUser,
} from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { startStripeFake, type StripeFake } from '../helpers/stripeFake.js';

describeWithServices('a deleted account stops its subscriptions at period end', () => {
  let stripe: StripeFake;
  let gw: TestGateway;
  let adminApp: FastifyInstance;
  let adminUrl: string;
  let dir: string;
  let env: Record<string, string>;

  beforeAll(async () => {
    ensureBuilt();
    stripe = await startStripeFake();
    env = { STRIPE_SECRET_KEY: 'rk_test_fake', STRIPE_WEBHOOK_SECRET: 'whsec_cancel_test', STRIPE_API_BASE: stripe.url, APP_URL: 'http://127.0.0.1:9' };
    gw = await startTestGateway(testConfigFromYaml(docsExample('billing', 'billing'), env));
    adminApp = await buildAdminApp(gw.services);
    adminUrl = await adminApp.listen({ host: '127.0.0.1', port: 0 });
    // The CLI's file: the same example, on the run's database.
    dir = mkdtempSync(path.join(tmpdir(), 'gw-cancel-'));
    writeFileSync(path.join(dir, 'gateway.yaml'), [
      docsExample('billing', 'billing'), 'storage:', `  postgres: ${JSON.stringify(testServices!.postgres)}`, 'auth:', '  jwt:', `    secret: ${JSON.stringify(TEST_JWT_SECRET)}`, '',
    ].join('\n'));
  }, 120_000);

  afterAll(async () => {
    await adminApp?.close();
    await gw?.close();
    await stripe?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
    await closeSql();
  });

  /** A subscription of the user, stored as the webhook would have and known to the fake. */
  async function subscribe(user: TestUser, status: 'active' | 'trialing' | 'past_due' | 'unpaid' | 'incomplete' | 'canceled'): Promise<string> {
    const id = `sub_${randomBytes(6).toString('hex')}`;
    const customer = `cus_${randomBytes(6).toString('hex')}`;
    stripe.setSubscription({ id, customer, status, prices: ['price_premium_monthly'] });
    await sql(`INSERT INTO billing_subscriptions (stripe_subscription_id, owner_type, owner_id, stripe_customer_id, status, price, prices)
               VALUES ($1, 'user', $2, $3, $4, 'price_premium_monthly', '{price_premium_monthly}')`, [id, user.id, customer, status]);
    return id;
  }
  const remove = (user: TestUser) => gw.request('DELETE', '/api/v1/user/me', { headers: bearer(user.access), json: { password: user.password } });
  const exists = async (id: number) => (await sql('SELECT id FROM users WHERE id = $1', [id])).length === 1;
  const updates = (sub: string) => stripe.calls.filter((c) => c.method === 'POST' && c.path === `/v1/subscriptions/${sub}`);

  const ownLines = (msg: string, id: number) => loggedLines(gw, msg).filter((l) => (l.owner as { id: number }).id === id);
  const erase = (user: TestUser) => request(adminUrl, 'DELETE', `/admin/v1/users/${user.id}`, { headers: bearer(ADMIN_KEY) });
  // The user's own deletion, and an operator's erasure (the admin API the console and `users delete --admin` call).
  const deletions = [{ by: 'the user', remove }, { by: 'an operator', remove: erase }];

  it.each(deletions)('$by: the active subscription set to cancel at period end, then the account deleted', async ({ remove: del }) => {
    const user = await makeUser(gw, { plan: 'premium' });
    const active = await subscribe(user, 'active');
    const ended = await subscribe(user, 'canceled');
    expect((await del(user)).status).toBe(200);
    expect(stripe.cancelAtPeriodEnd(active)).toBe(true);
    expect(updates(active).map((c) => c.form)).toEqual([{ cancel_at_period_end: 'true' }]);
    expect(updates(ended)).toEqual([]);
    expect(await exists(user.id)).toBe(false);
    // The operator's log says what was set to cancel, and for which owner: one running subscription of two.
    const told = ownLines('billing: subscriptions set to cancel at period end before the owner is deleted', user.id);
    expect(told.map((l) => [l.level, l.owner, l.subscriptions])).toEqual([[30, { type: 'user', id: user.id }, 1]]);
  });

  it.each(deletions)('$by: the account kept when Stripe cannot be told (503), deleted on the next try', async ({ remove: del }) => {
    const user = await makeUser(gw, { plan: 'premium' });
    const active = await subscribe(user, 'active');
    stripe.failNext(1);
    const refused = await del(user);
    expect([refused.status, refused.json]).toEqual([503, { error: 'Service de paiement indisponible' }]);
    expect(await exists(user.id)).toBe(true);
    expect(stripe.cancelAtPeriodEnd(active)).toBe(false);
    const kept = ownLines('billing: a subscription could not be set to cancel at period end; the owner is kept', user.id);
    expect(kept.map((l) => [l.level, l.owner])).toEqual([[40, { type: 'user', id: user.id }]]);
    expect((await del(user)).status).toBe(200);
    expect(stripe.cancelAtPeriodEnd(active)).toBe(true);
    expect(await exists(user.id)).toBe(false);
  });

  it('a database fault while the subscriptions are read is the gateway\'s 500, not Stripe\'s 503; the account kept', async () => {
    const user = await makeUser(gw, { plan: 'premium' });
    const active = await subscribe(user, 'active');
    const restore = failingStatements(gw.services.db, /FROM billing_subscriptions/, () => new Error('the test\'s bug'));
    try {
      const res = await remove(user);
      expect([res.status, res.json.error]).toEqual([500, 'Erreur interne']);
    } finally {
      restore();
    }
    expect([await exists(user.id), stripe.cancelAtPeriodEnd(active)]).toEqual([true, false]);
    expect(ownLines('billing: a subscription could not be set to cancel at period end; the owner is kept', user.id)).toEqual([]);
  });

  it('every subscription Stripe still bills or retries billing is set to cancel (trialing, past_due); none that it no longer bills', async () => {
    const user = await makeUser(gw, { plan: 'premium' });
    const billed = [await subscribe(user, 'trialing'), await subscribe(user, 'past_due')];
    const done = [await subscribe(user, 'unpaid'), await subscribe(user, 'incomplete'), await subscribe(user, 'canceled')];
    expect((await remove(user)).status).toBe(200);
    for (const sub of billed) expect(updates(sub).map((c) => c.form), sub).toEqual([{ cancel_at_period_end: 'true' }]);
    for (const sub of done) expect(updates(sub), sub).toEqual([]);
    expect(await exists(user.id)).toBe(false);
  });

  it('deletes an account without a subscription without calling Stripe', async () => {
    const user = await makeUser(gw);
    const before = stripe.calls.length;
    expect((await remove(user)).status).toBe(200);
    expect(stripe.calls.length).toBe(before);
    // Nothing was set to cancel: nothing logged as if it had been.
    expect(ownLines('billing: subscriptions set to cancel at period end before the owner is deleted', user.id)).toEqual([]);
  });

  it('`gateway users delete` on the database does the same: Stripe told first, the account kept while it cannot be', async () => {
    const user = await makeUser(gw, { plan: 'premium' });
    const active = await subscribe(user, 'active');
    const cli = () => gateway(['users', 'delete', user.email, '--config', path.join(dir, 'gateway.yaml')], { cwd: dir, env });
    stripe.failNext(1);
    const refused = await cli();
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain(`user ${user.id} (${user.email}): kept: Stripe could not be told to cancel its subscriptions at period end`);
    expect(await exists(user.id)).toBe(true);
    const run = await cli();
    expect(run).toEqual({ code: 0, stdout: `user ${user.id} (${user.email}): deleted, with its sessions, API keys, webhook and links\n`, stderr: '' });
    expect(stripe.cancelAtPeriodEnd(active)).toBe(true);
    expect(await exists(user.id)).toBe(false);
  });
});
