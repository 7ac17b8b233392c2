// The daily guard when Postgres fails the very UPDATE that would count a use (spec §8, CONTRACT
// §6): the request gets the 503, nothing is counted, and the user's day is still there once
// Postgres answers again, on every instance. Real faults: the user's row is locked from outside so
// the gateway's UPDATE waits, and its backend is then terminated by the operator's SQL, or the
// wait outlasts the query timeout.
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { postgresDatabase } from '../../src/storage/database/db.js';
import { utcDay } from '../../src/time.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import {
  bearer, closeSql, describeWithServices, eventually, makeUser, marker, ownRedisPrefix, sql, startTestGateway, startTwoGateways, testConfig, testServices, usage, whileFeedTrusted,
  type TestGateway,
} from '../helpers/gateway.js';
import type { HttpResponse } from '../helpers/http.js';

const LIMIT_1 = { error: 'Limite quotidienne atteinte (plan free: 1 course/jour)', upgrade_url: '/api/v1/subscription/upgrade' };
const UNAVAILABLE = { error: 'Service temporairement indisponible' };
const COUNTING_UPDATE = "datname = current_database() AND query LIKE 'WITH cur AS%daily_usage%' AND wait_event_type = 'Lock'";

describeWithServices('daily guard when Postgres fails the counting UPDATE', () => {
  let upstream: EchoUpstream;
  let a: TestGateway;
  let b: TestGateway;
  let locker: pg.Client;

  const routes = () => ({
    upstreams: { app: { url: upstream.url } },
    routes: [{ path: '/race', upstream: 'app', auth: 'required', dailyLimit: true }],
  });
  const use = (gw: TestGateway, m: string, access: string) => gw.get(`/race/${m}`, { headers: bearer(access) });

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    [a, b] = await startTwoGateways(testConfig(routes()));
    locker = new pg.Client({ connectionString: testServices!.postgres });
    await locker.connect();
  });

  afterAll(async () => {
    await locker?.end();
    await Promise.all([a?.close(), b?.close()]);
    await upstream?.close();
    await closeSql();
  });

  it('counts nothing, refuses no later request for it, and admits the day\'s use once Postgres answers', async () => {
    let user!: Awaited<ReturnType<typeof makeUser>>;
    let m = '';
    const race = (gw: TestGateway) => gw.get(`/race/${m}`, { headers: bearer(user.access) });
    // The refusals below come from the Redis gate, which a change feed resuming bypasses (Postgres
    // then decides): measured again, on a fresh user, when the feed was disturbed meanwhile.
    await whileFeedTrusted([a, b], async () => {
      user = await makeUser(a);
      m = marker();
      // Hold the user's row so the admitting UPDATE waits, while a burst comes in on both instances.
      await locker.query('BEGIN');
      try {
        await locker.query('SELECT id FROM users WHERE id = $1 FOR UPDATE', [user.id]);
        const answered: HttpResponse[] = [];
        const burst = [a, b, a, b, a, b].map((gw) => race(gw).then((r) => { answered.push(r); return r; }));
        // Every request but the one Postgres holds is answered before its backend goes: one of the
        // burst still on its way when the failure drops the gate would reach Postgres after it.
        await eventually(async () => answered.length === 5 && (await sql(`SELECT 1 FROM pg_stat_activity WHERE ${COUNTING_UPDATE}`)).length === 1, 15_000);
        // The operator's hand, or a failover: the backend running that UPDATE goes away.
        await sql(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE ${COUNTING_UPDATE}`);
        const answers = await Promise.all(burst);

        // The one request that reached Postgres gets the storage error; the others were refused while
        // it was in flight. None reached the upstream, and nothing was counted.
        expect(answers.filter((r) => r.status === 503).map((r) => r.json)).toEqual([UNAVAILABLE]);
        for (const r of answers.filter((x) => x.status !== 503)) expect(r).toMatchObject({ status: 429, json: LIMIT_1 });
      } finally {
        await locker.query('ROLLBACK');
      }
    });
    expect(upstream.count(m)).toBe(0);
    expect(await sql('SELECT daily_usage, last_usage_date FROM users WHERE id = $1', [user.id])).toEqual([{ daily_usage: 0, last_usage_date: null }]);

    // Postgres answers again: the day's one use is there, on either instance, then no more.
    const retry = await race(b);
    expect(retry.status).toBe(200);
    expect(upstream.count(m)).toBe(1);
    for (const gw of [a, b]) expect(await race(gw)).toMatchObject({ status: 429, json: LIMIT_1 });
    expect(upstream.count(m)).toBe(1);
    const [row] = await sql<{ daily_usage: number }>('SELECT daily_usage FROM users WHERE id = $1', [user.id]);
    expect(row!.daily_usage).toBe(1);
  });

  it('does not use up the day of a request answered 503 because its counting UPDATE waited past the query timeout', async () => {
    // A short client-side timeout keeps the test fast (production: QUERY_TIMEOUT_MS). The user's
    // row is held by an operator's open transaction, so the counting UPDATE waits for it.
    const db = postgresDatabase(testServices!.postgres, { queryTimeoutMs: 500, poolSize: 5 });
    const gw = await startTestGateway(testConfig({ ...routes(), storage: { redisKeyPrefix: ownRedisPrefix('slow-update') } }), { db });
    try {
      const user = await makeUser(gw);
      const m = marker();
      await locker.query('BEGIN');
      await locker.query('SELECT id FROM users WHERE id = $1 FOR UPDATE', [user.id]);
      expect(await use(gw, m, user.access)).toMatchObject({ status: 503, json: UNAVAILABLE });
      await locker.query('ROLLBACK');
      // Queued behind anything still waiting for the row, so this reads what it left behind.
      const { rows } = await locker.query("SELECT daily_usage, to_char(last_usage_date, 'YYYY-MM-DD') AS last_usage_date FROM users WHERE id = $1 FOR UPDATE", [user.id]);
      expect(rows).toEqual([{ daily_usage: 0, last_usage_date: null }]);
      expect(upstream.count(m)).toBe(0);

      // The client retries: the day's one use is still there.
      expect((await use(gw, m, user.access)).status).toBe(200);
      expect(await use(gw, m, user.access)).toMatchObject({ status: 429, json: LIMIT_1 });
      expect(upstream.count(m)).toBe(1);
      expect(await usage(user.id)).toEqual({ daily_usage: 1, last_usage_date: utcDay(new Date()) });
    } finally {
      await gw.close();
      await db.close();
    }
  });
});
