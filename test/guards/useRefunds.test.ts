// UseRefunds (src/pipeline/guards/refunds.ts, CONTRACT §23) on the run's Postgres, without a
// proxied request around it: a use given back drops the counter's Redis gates at once (the
// triggers' NOTIFY does too, a moment later, which end-to-end tests cannot tell apart); one the cap
// or the policy keeps drops nothing; and a database that cannot be written leaves the use counted,
// logged with whose it was, without throwing into the answer. End to end: refunds.test.ts.
import { Writable } from 'node:stream';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { UseRefunds } from '../../src/pipeline/index.js';
import { postgresDatabase } from '../../src/storage/database/index.js';
import type { Counter } from '../../src/storage/usage/index.js';
import { createLogger } from '../../src/telemetry/logger.js';
import { utcDay, utcMonth } from '../../src/time.js';
import { closeSql, describeWithServices, makeUser, sql, startTestGateway, testConfig, testServices, type TestGateway } from '../helpers/gateway.js';

const POLICY = { statuses: [503], unreachable: true, capPerDay: 1 };

describeWithServices('UseRefunds', () => {
  let gw: TestGateway;
  beforeAll(async () => { gw = await startTestGateway(testConfig({ plans: { limits: { counted: { daily: 5, monthly: 50 } } } })); });
  afterAll(async () => {
    await gw?.close();
    await closeSql();
  });

  function refunds(db = gw.services.db) {
    const forgotten: Counter[] = [];
    const lines: Array<Record<string, unknown>> = [];
    const sink = new Writable({ write(chunk, _enc, done) { lines.push(JSON.parse(String(chunk)) as Record<string, unknown>); done(); } });
    const useRefunds = new UseRefunds({ db, forget: async (counter) => { forgotten.push(counter); }, clock: () => new Date(), log: createLogger('info', sink) });
    return { useRefunds, forgotten, lines };
  }

  async function countedToday(): Promise<{ counter: Counter; use: { counter: Counter; day: string; daily: boolean; month: string; monthly: boolean } }> {
    const user = await makeUser(gw, { plan: 'counted' });
    const now = new Date();
    await sql('UPDATE users SET daily_usage = 2, last_usage_date = $2, monthly_usage = 2, last_usage_month = $3 WHERE id = $1', [user.id, utcDay(now), utcMonth(now)]);
    const counter: Counter = { ownerType: 'user', id: user.id };
    return { counter, use: { counter, day: utcDay(now), daily: true, month: utcMonth(now), monthly: true } };
  }
  const usage = async (id: number) => (await sql<{ daily_usage: number; monthly_usage: number }>('SELECT daily_usage, monthly_usage FROM users WHERE id = $1', [id]))[0];

  it('gives a use back and drops its gates; past the cap, nothing moves and nothing is dropped', async () => {
    const { useRefunds, forgotten } = refunds();
    const { counter, use } = await countedToday();
    await useRefunds.afterUpstream(use, POLICY, { status: 503 });
    expect(forgotten).toEqual([counter]);
    expect(await usage(counter.id)).toEqual({ daily_usage: 1, monthly_usage: 1 });
    await useRefunds.afterUpstream(use, POLICY, { failure: 'unreachable' });
    expect(forgotten).toEqual([counter]);
    expect(await usage(counter.id)).toEqual({ daily_usage: 1, monthly_usage: 1 });
  });

  it('gives nothing back for an outcome the policy does not list, or without a policy', async () => {
    const { useRefunds, forgotten } = refunds();
    const { counter, use } = await countedToday();
    await useRefunds.afterUpstream(use, POLICY, { status: 500 });
    await useRefunds.afterUpstream(use, undefined, { status: 503 });
    expect(forgotten).toEqual([]);
    expect(await usage(counter.id)).toEqual({ daily_usage: 2, monthly_usage: 2 });
  });

  it('leaves the use counted when the database cannot be written: logged with whose use it was, never thrown', async () => {
    const closed = postgresDatabase(testServices!.postgres);
    await closed.close();
    const { useRefunds, forgotten, lines } = refunds(closed);
    const { counter, use } = await countedToday();
    await expect(useRefunds.afterUpstream(use, POLICY, { status: 503 })).resolves.toBeUndefined();
    expect(forgotten).toEqual([]);
    expect(lines).toEqual([expect.objectContaining({ level: 40, msg: 'refund: the use could not be given back; it stays counted', ownerType: 'user', id: counter.id, err: expect.any(Object) })]);
    expect(await usage(counter.id)).toEqual({ daily_usage: 2, monthly_usage: 2 });
  });
});
