// The uses a daily-limit block reserved and did not serve, on their way back to Postgres
// (src/pipeline/guards/dailyLimit/handBacks.ts): each handed back exactly once, however the
// sweeps, close() and new leftovers interleave with a hand-back held up at its row.
import pino from 'pino';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { HandBacks } from '../../src/pipeline/guards/dailyLimit/handBacks.js';
import { utcDay, utcMonth } from '../../src/time.js';
import { closeSql, describeWithServices, makeUser, sql, startTestGateway, testConfig, usage, type TestGateway } from '../helpers/gateway.js';
import { holdUserRow } from '../helpers/rowLock.js';

describeWithServices('daily limit hand-backs', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway(testConfig());
  });
  afterAll(async () => {
    await gw?.close();
    await closeSql();
  });

  /** A user counted `uses` today, and hand-backs of the gateway's database. */
  async function counted(uses: number) {
    const user = await makeUser(gw);
    await sql("UPDATE users SET daily_usage = $2, last_usage_date = (now() AT TIME ZONE 'UTC')::date WHERE id = $1", [user.id, uses]);
    const handBacks = new HandBacks(gw.services.db, pino({ level: 'silent' }), { usesInDoubt: 0 });
    const now = new Date();
    return { user, handBacks, day: utcDay(now), month: utcMonth(now) };
  }

  it('a leftover owed while a hand-back waits at its row goes back too, once: a flush begun meanwhile (close()) sends it after, not the first again', async () => {
    const { user, handBacks, day, month } = await counted(100);
    handBacks.add(String(user.id), day, 10, 0);
    const held = await holdUserRow(user.id);
    const sweep = handBacks.flush(day, month); // sends 10, waits at the row
    await held.waiters(1);
    handBacks.add(String(user.id), day, 5, 0); // another block expired meanwhile
    const closing = handBacks.flush(day, month); // close(): hands back what is owed
    await held.release();
    await Promise.all([sweep, closing]);
    expect(handBacks.pending).toBe(false);
    expect((await usage(user.id)).daily_usage).toBe(85);
  });

  it('a leftover owed while the only hand-back waits at its row stays owed, and goes back at the next flush', async () => {
    const { user, handBacks, day, month } = await counted(100);
    handBacks.add(String(user.id), day, 10, 0);
    const held = await holdUserRow(user.id);
    const sweep = handBacks.flush(day, month);
    await held.waiters(1);
    handBacks.add(String(user.id), day, 5, 0);
    await held.release();
    await sweep;
    expect((await usage(user.id)).daily_usage).toBe(90);
    expect(handBacks.pending).toBe(true);
    await handBacks.flush(day, month);
    expect((await usage(user.id)).daily_usage).toBe(85);
    expect(handBacks.pending).toBe(false);
  });
});
