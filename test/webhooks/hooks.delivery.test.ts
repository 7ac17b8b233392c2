// Operator hooks (CONTRACT §24) delivered through the outbox while the operator's backend fails,
// recovers, then turns slow, with two instances delivering: every event arrives, in order per
// subject (a message is not sent before the one before it is answered), with the same webhook-id
// and bytes on every attempt; the requests that caused them answer without waiting; a message given
// up after webhooks.retries lets the next one of its subject go.
import { afterAll, expect, it } from 'vitest';
import { closeSql, describeWithServices, eventually, makeUser, type TestUser } from '../helpers/gateway.js';
import { hookRows, startHookSetup, verifiedHook } from '../helpers/hookReceiver.js';
import { outcomes, type Delivery } from '../helpers/webhookReceiver.js';

const typeOf = (d: Delivery) => d.json.type;
const subjectOf = (d: Delivery) => `user:${d.json.data.user_id}`;

describeWithServices('operator hooks: delivery', () => {
  afterAll(closeSql);

  it('fails, recovers, then is slow: every event arrives once answered, in order per subject, retries with the same webhook-id, requests not slowed', async () => {
    let slow = false;
    let slowAnswers = 0;
    const RECEIVER_DELAY_MS = 1500;
    // The first four requests fail (500): each user's first message at least once.
    const s = await startHookSetup({
      instances: 2,
      webhooks: { retries: 4, timeout: '5s' },
      behaviour: (_d, n) => {
        if (n < 4) return 500;
        if (!slow) return 200;
        slowAnswers++;
        return { status: 200, delayMs: RECEIVER_DELAY_MS };
      },
    });
    try {
      const [a, b] = s.gateways as [typeof s.gateways[0], typeof s.gateways[0]];
      const users: TestUser[] = [];
      for (let i = 0; i < 3; i++) users.push(await makeUser(i % 2 ? b : a));
      const plan = async (u: TestUser, p: string) => expect((await s.admin('PUT', `/admin/v1/users/${u.id}/plan`, { plan: p })).status).toBe(200);
      const active = async (u: TestUser, on: boolean) => expect((await s.admin('PUT', `/admin/v1/users/${u.id}/active`, { active: on })).status).toBe(200);
      for (const u of users) {
        await plan(u, 'pro');
        await active(u, false);
      }
      // Failing, then recovering: wait for the failures, and some deliveries after them.
      await eventually(() => s.receiver.deliveries.filter((d) => d.answer === 200).length >= 3, 15_000);
      // Now slow: each answer takes 1.5 s; the changes that cause messages answer without waiting for any.
      slow = true;
      const timings: number[] = [];
      for (const u of users) {
        const start = Date.now();
        await plan(u, 'free');
        await active(u, true);
        timings.push(Date.now() - start);
      }
      await eventually(async () => (await hookRows(s.db)).every((r) => r.status !== 'pending'), 40_000, 100);
      expect(Math.max(...timings)).toBeLessThan(RECEIVER_DELAY_MS);
      // The six messages of those changes were all answered slowly, one subject at a time.
      expect(slowAnswers).toBeGreaterThanOrEqual(6);

      const rows = await hookRows(s.db);
      expect(rows).toHaveLength(3 * 5);
      expect(rows.map((r) => r.status)).toEqual(rows.map(() => 'delivered'));
      // The failures were retried: some message took more than one attempt.
      expect(s.receiver.deliveries.filter((d) => d.answer === 500)).toHaveLength(4);
      expect(rows.some((r) => r.attempts > 1)).toBe(true);
      for (const u of users) {
        const subject = `user:${u.id}`;
        const own = rows.filter((r) => r.subject === subject);
        expect(own.map((r) => r.type)).toEqual(['user.created', 'user.plan_changed', 'user.active_changed', 'user.plan_changed', 'user.active_changed']);
        const arrived = s.receiver.deliveries.filter((d) => subjectOf(d) === subject);
        // In order: the ids as they arrived, repeats (retries) folded, are the outbox's order, and
        // once a message's successor arrived it never came again (it had been answered 2xx).
        const folded = arrived.map((d) => d.headers['webhook-id']).filter((id, i, all) => i === 0 || all[i - 1] !== id);
        expect(folded).toEqual(own.map((r) => r.id));
        // Every attempt of a message carried the same id and the same signed bytes.
        for (const row of own) {
          const attempts = arrived.filter((d) => d.headers['webhook-id'] === row.id);
          expect(attempts).toHaveLength(row.attempts);
          expect(new Set(attempts.map((d) => d.body)).size).toBe(1);
          expect(attempts.at(-1)!.answer).toBe(200);
          for (const d of attempts) expect(verifiedHook(s.secrets[0]!, d).type).toBe(row.type);
        }
      }
      expect(s.receiver.overlaps).toBe(0);
      // Counted as hooks' attempts, on whichever instance made them: the 15 deliveries and the 4 failures.
      const counted = await Promise.all([a, b].map((gw) => outcomes(gw.services.metrics, 'hook')));
      const sum = (outcome: string) => counted.reduce((n, c) => n + (c[outcome] ?? 0), 0);
      expect([sum('success'), sum('server_error')]).toEqual([15, 4]);
    } finally {
      await s.close();
    }
  });

  it('a message given up after webhooks.retries lets the next one of its subject go', async () => {
    // Every user.plan_changed is refused (503); everything else is taken.
    const s = await startHookSetup({ webhooks: { retries: 1 }, behaviour: (d) => (typeOf(d) === 'user.plan_changed' ? 503 : 200) });
    try {
      const u = await makeUser(s.gateways[0]!);
      expect((await s.admin('PUT', `/admin/v1/users/${u.id}/plan`, { plan: 'pro' })).status).toBe(200);
      expect((await s.admin('PUT', `/admin/v1/users/${u.id}/active`, { active: false })).status).toBe(200);
      await eventually(async () => (await hookRows(s.db)).every((r) => r.status !== 'pending'), 15_000, 50);
      const rows = await hookRows(s.db);
      expect(rows.map((r) => [r.type, r.status, r.attempts, r.last_error])).toEqual([
        ['user.created', 'delivered', 1, null],
        ['user.plan_changed', 'failed', 2, 'HTTP 503'],
        ['user.active_changed', 'delivered', 1, null],
      ]);
      expect(s.receiver.deliveries.map((d) => [typeOf(d), d.answer])).toEqual([
        ['user.created', 200], ['user.plan_changed', 503], ['user.plan_changed', 503], ['user.active_changed', 200],
      ]);
    } finally {
      await s.close();
    }
  });
});
