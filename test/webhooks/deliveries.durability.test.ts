// Durable webhook deliveries (CONTRACT §9): a message stored by one instance is delivered by
// whichever instance is alive. After a SIGKILL in the middle of an attempt, the lease lapses and
// another instance delivers it, with the same webhook-id, once; after a SIGTERM, the attempt cut
// short is handed back and another instance delivers it at once, nothing abandoned; with two
// instances and many messages, each message is attempted by one instance at a time and delivered
// once. Finished messages are kept 7 days. Every test runs its instances on a database of its own,
// so that it knows which instances exist: on the run's database any test gateway could step in.
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, expect, it } from 'vitest';
import {
  bearer, closeSql, describeWithServices, eventually, makeUser, newEmail, newPassword, rawTestConfig, startTestGateway, startTwoGateways, testConfig,
  throwawayDatabase, type TestGateway, type ThrowawayDatabase,
} from '../helpers/gateway.js';
import { spawnGateway, type GatewayProcess } from '../helpers/gatewayProcess.js';
import { request } from '../helpers/http.js';
import { outboxRows, outcomes, settledRows, startReceiver, type Behaviour, type Receiver } from '../helpers/webhookReceiver.js';

describeWithServices('durable webhook deliveries', () => {
  let tmp: ThrowawayDatabase;
  const cleanups: Array<() => Promise<unknown>> = [];
  beforeEach(async () => { tmp = await throwawayDatabase({ migrated: true }); });
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    await tmp.drop();
    await closeSql();
  });

  const receiver = async (behaviour: Behaviour) => {
    const r = await startReceiver(undefined, behaviour);
    cleanups.push(() => r.close());
    return r;
  };
  const spawn = async (webhooks: Record<string, unknown> = {}) => {
    const gw = await spawnGateway(rawTestConfig({ storage: tmp.storage, webhooks }));
    cleanups.push(() => gw.stop());
    return gw;
  };
  const inProcess = async (webhooks: Record<string, unknown> = {}) => {
    const gw = await startTestGateway(testConfig({ storage: tmp.storage, webhooks }));
    cleanups.push(() => gw.close());
    return gw;
  };

  /** A pro user with a webhook to `r`, made through the API of the gateway process `gw` (it stores webhook.test). */
  async function proUserWithWebhook(gw: GatewayProcess, r: Receiver): Promise<number> {
    const email = newEmail();
    const password = newPassword();
    const id = (await request(gw.url, 'POST', '/api/v1/auth/register', { json: { email, password } })).json.user_id as number;
    await tmp.sql("UPDATE users SET plan = 'pro' WHERE id = $1", [id]);
    const access = (await request(gw.url, 'POST', '/api/v1/auth/login', { json: { email, password } })).json.access_token as string;
    expect((await request(gw.url, 'POST', '/api/v1/user/webhook', { json: { url: r.url }, headers: bearer(access) })).status).toBe(201);
    return id;
  }

  it('a message accepted by an instance killed with SIGKILL mid-attempt is delivered by another, once, with the same webhook-id', async () => {
    const r = await receiver((_d, n) => (n === 0 ? 'hang' : 200));
    // webhooks.timeout 2 s: the lease (an attempt's longest, plus a margin) lapses after 9 s.
    const a = await spawn({ timeout: '2s' });
    const userId = await proUserWithWebhook(a, r);
    // A holds the attempt of webhook.test, which the receiver does not answer: then A dies.
    await eventually(() => r.hanging === 1);
    a.child.kill('SIGKILL');
    expect(await a.exited).toEqual({ code: null, signal: 'SIGKILL' });
    expect(await outboxRows(userId, tmp.sql)).toMatchObject([{ type: 'webhook.test', status: 'pending', attempts: 1 }]);

    await inProcess({ timeout: '2s' });
    const [row] = await settledRows(userId, tmp.sql, 20_000);
    expect(row).toEqual({ id: r.deliveries[0]!.headers['webhook-id'], type: 'webhook.test', status: 'delivered', attempts: 2, last_error: null });
    expect(r.deliveries.map((d) => [d.headers['webhook-id'], d.body])).toEqual([[row!.id, r.deliveries[0]!.body], [row!.id, r.deliveries[0]!.body]]);
    // Delivered once: one 2xx, and nothing is sent again (B's poll runs every second).
    await new Promise((resolve) => setTimeout(resolve, 2000));
    expect(r.deliveries.map((d) => d.answer)).toEqual(['hang', 200]);
  });

  it('SIGTERM hands the attempt in flight back: another instance delivers it at once, nothing is abandoned', async () => {
    const r = await receiver((_d, n) => (n === 0 ? 'hang' : 200));
    // webhooks.timeout 5 s: A's own timeout, or its lease (15 s), would take far longer than the hand-back.
    const a = await spawn({ timeout: '5s' });
    const userId = await proUserWithWebhook(a, r);
    await eventually(() => r.hanging === 1);
    await inProcess({ timeout: '5s' });
    a.child.kill('SIGTERM');
    expect(await a.exited).toEqual({ code: 0, signal: null });
    // A's hand-back is announced: B attempts it well before A's timeout would have ended the first attempt.
    await eventually(() => r.deliveries.length === 2, 4000);
    const [row] = await settledRows(userId, tmp.sql);
    // The attempt cut short is not counted: nobody knows how it ended (the webhook-id tells the receiver).
    expect(row).toEqual({ id: r.deliveries[0]!.headers['webhook-id'], type: 'webhook.test', status: 'delivered', attempts: 1, last_error: null });
    expect(r.deliveries[1]!.headers['webhook-id']).toBe(row!.id);
    expect(a.logs.map((l) => l.msg)).toContain('shutting down: webhook attempts in flight handed back to the other instances');
    expect(a.logs.filter((l) => /abandon/i.test(l.msg))).toEqual([]);
  });

  it('two instances share the work: each message is attempted by one instance at a time and delivered once', async () => {
    // Each message fails its first attempt (503) and succeeds at its second, each answer a little slow.
    const answered = new Map<string, number>();
    const r = await receiver((d) => {
      const id = String(d.headers['webhook-id']);
      answered.set(id, (answered.get(id) ?? 0) + 1);
      return { status: answered.get(id) === 1 ? 503 : 200, delayMs: 30 };
    });
    const [a, b] = await startTwoGateways(testConfig({ storage: tmp.storage }));
    cleanups.push(() => a.close(), () => b.close());
    const users: number[] = [];
    for (let i = 0; i < 8; i++) {
      const user = await makeUser(a, { plan: 'pro' });
      expect((await a.post('/api/v1/user/webhook', { url: r.url }, { headers: bearer(user.access) })).status).toBe(201);
      users.push(user.id);
    }
    // Every message is stored through A; B hears of them through the change feed.
    for (const id of users) for (let n = 0; n < 5; n++) await a.services.events.emit(id, 'security.alert', { n });
    const rows = (await Promise.all(users.map((id) => settledRows(id, tmp.sql, 20_000)))).flat();
    expect(rows).toHaveLength(48);
    expect(rows.every((row) => row.status === 'delivered' && row.attempts === 2 && row.last_error === 'HTTP 503')).toBe(true);
    const ids = rows.map((row) => row.id);
    for (const id of ids) expect(r.withId(id).map((d) => d.answer), id).toEqual([503, 200]);
    expect(r.deliveries).toHaveLength(96);
    // Never two attempts of one message at once, though both instances took part.
    expect(r.overlaps).toBe(0);
    const [ofA, ofB] = await Promise.all([outcomes(a.services.metrics), outcomes(b.services.metrics)]);
    expect((ofA.success ?? 0) + (ofB.success ?? 0)).toBe(48);
    expect((ofA.server_error ?? 0) + (ofB.server_error ?? 0)).toBe(48);
    expect(ofA.success).toBeGreaterThan(0);
    expect(ofB.success).toBeGreaterThan(0);
  });

  it('keeps finished messages 7 days: an instance purges older ones when it starts, never a pending one', async () => {
    const first = await inProcess();
    const user = await makeUser(first);
    await first.close();
    const row = (name: string, status: string, finishedDaysAgo: number | null) => tmp.sql(
      `INSERT INTO webhook_deliveries (id, user_id, type, body, max_attempts, status, created_at, next_attempt_at, finished_at)
       VALUES ($1, $2, 'x', '{}', 1, $3, now() - interval '8 days', now() + interval '1 hour', now() - $4 * interval '1 day')`,
      [name, user.id, status, finishedDaysAgo],
    );
    const tag = randomUUID().slice(0, 8);
    await row(`msg_old_delivered_${tag}`, 'delivered', 8);
    await row(`msg_old_failed_${tag}`, 'failed', 7.01);
    await row(`msg_old_skipped_${tag}`, 'skipped', 30);
    await row(`msg_recent_${tag}`, 'delivered', 6.9);
    await row(`msg_pending_${tag}`, 'pending', null);
    const ids = async () => (await outboxRows(user.id, tmp.sql)).map((r) => r.id).sort();
    expect(await ids()).toHaveLength(5);
    const second: TestGateway = await inProcess();
    await eventually(async () => (await ids()).length === 2);
    expect(await ids()).toEqual([`msg_pending_${tag}`, `msg_recent_${tag}`]);
    expect(second.logs.join('')).toContain('"purged":3');
  });
});
