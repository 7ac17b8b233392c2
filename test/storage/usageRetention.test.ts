// The hourly sweep (src/housekeeping.ts) purges usage records past their retention
// (src/storage/usage/usageRetention.ts): refunds a week after their day, reported metered uses of months
// before last month, API key usage after 90 days. What billing still needs stays: this week's
// refunds, last month's and this month's metered uses, uses not yet reported whatever their age,
// the last 90 days of key usage, and each owner's daily counts of this month and the twelve before
// (CONTRACT §30: the usage endpoints show 12 months, so the oldest is always whole).
import { randomUUID } from 'node:crypto';
import { expect, it } from 'vitest';
import { blockGateway } from '../helpers/blockGateway.js';
import { describeWithServices, makeUser, sql } from '../helpers/gateway.js';
import { DAY_MS, utcDay, utcMonth } from '../../src/time.js';

describeWithServices('usage records past their retention', () => {
  const gateway = blockGateway();

  const daysAgo = (n: number) => utcDay(new Date(Date.now() - n * DAY_MS));
  /** The first day of the month `n` months before this one. */
  const monthsAgo = (n: number) => { const d = new Date(utcMonth(new Date())); d.setUTCMonth(d.getUTCMonth() - n); return utcMonth(d); };

  it('go at the next sweep; what billing and reporting still read stays', async () => {
    const gw = gateway();
    const user = await makeUser(gw);
    for (const day of [daysAgo(0), daysAgo(7), daysAgo(8), daysAgo(40)]) await sql('INSERT INTO usage_refunds (user_id, day, refunds) VALUES ($1, $2, 1)', [user.id, day]);
    const tag = randomUUID();
    // Reported: the meter event's identifier, or 'refunded' for a group all given back (meterReporter.ts).
    const reported = `gw_${tag}`;
    const metered: Array<[string, string | null]> = [
      [monthsAgo(0), reported], [monthsAgo(1), reported], [monthsAgo(2), reported], [monthsAgo(2), 'refunded'], [monthsAgo(2), null], [monthsAgo(14), reported],
    ];
    for (const [month, delivery] of metered) await sql('INSERT INTO metered_uses (user_id, month, delivery_id) VALUES ($1, $2, $3)', [user.id, month, delivery]);
    const [key] = await sql<{ id: number }>('INSERT INTO api_tokens (user_id, token_hash) VALUES ($1, $2) RETURNING id', [user.id, `retention-${tag}`]);
    for (const day of [daysAgo(0), daysAgo(30), daysAgo(90), daysAgo(91), daysAgo(400)]) {
      await sql('INSERT INTO api_key_usage (key_id, day, requests, denied) VALUES ($1, $2, 3, 1)', [key!.id, day]);
    }

    const dayOfMonthsAgo = (n: number, day: string) => `${monthsAgo(n).slice(0, 8)}${day}`;
    const ownerDays = [daysAgo(0), monthsAgo(12), dayOfMonthsAgo(13, '28'), dayOfMonthsAgo(14, '01')];
    for (const day of ownerDays) await sql('INSERT INTO usage_days (user_id, day, uses, denied) VALUES ($1, $2, 2, 1)', [user.id, day]);
    const [org] = await sql<{ id: number }>("INSERT INTO organizations (name) VALUES ('retention') RETURNING id");
    for (const day of ownerDays) await sql('INSERT INTO org_usage_days (org_id, day, uses, denied) VALUES ($1, $2, 2, 1)', [org!.id, day]);

    const purged = await gw.services.housekeeping.sweep();

    expect(purged.usage_refunds).toBeGreaterThanOrEqual(2);
    expect(purged.metered_uses).toBeGreaterThanOrEqual(3);
    expect(purged.api_key_usage).toBeGreaterThanOrEqual(2);
    const refunds = await sql<{ day: string }>("SELECT to_char(day, 'YYYY-MM-DD') AS day FROM usage_refunds WHERE user_id = $1 ORDER BY day DESC", [user.id]);
    expect(refunds.map((r) => r.day)).toEqual([daysAgo(0), daysAgo(7)]);
    const uses = await sql<{ month: string; delivery_id: string | null }>(
      "SELECT to_char(month, 'YYYY-MM-DD') AS month, delivery_id FROM metered_uses WHERE user_id = $1 ORDER BY month DESC, id", [user.id]);
    expect(uses).toEqual([
      { month: monthsAgo(0), delivery_id: reported }, { month: monthsAgo(1), delivery_id: reported }, { month: monthsAgo(2), delivery_id: null },
    ]);
    const keyDays = await sql<{ day: string }>("SELECT to_char(day, 'YYYY-MM-DD') AS day FROM api_key_usage WHERE key_id = $1 ORDER BY day DESC", [key!.id]);
    expect(keyDays.map((r) => r.day)).toEqual([daysAgo(0), daysAgo(30), daysAgo(90)]);
    const kept = [daysAgo(0), monthsAgo(12)];
    expect((await sql<{ day: string }>("SELECT to_char(day, 'YYYY-MM-DD') AS day FROM usage_days WHERE user_id = $1 ORDER BY day DESC", [user.id])).map((r) => r.day)).toEqual(kept);
    expect((await sql<{ day: string }>("SELECT to_char(day, 'YYYY-MM-DD') AS day FROM org_usage_days WHERE org_id = $1 ORDER BY day DESC", [org!.id])).map((r) => r.day)).toEqual(kept);
    expect(purged.usage_days).toBeGreaterThanOrEqual(2);
    expect(gw.logs.some((l) => l.includes('usage records past their retention purged'))).toBe(true);

    // A second sweep finds nothing more of this user's to take.
    await gw.services.housekeeping.sweep();
    expect(await sql('SELECT 1 FROM metered_uses WHERE user_id = $1', [user.id])).toHaveLength(3);
  });
});
