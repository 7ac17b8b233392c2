// Behind PgBouncer in transaction mode (issue 18, CONTRACT §9), with the docs' example
// pgbouncer.ini: every guarantee holds. A counting UPDATE blocked on a locked row is cancelled by
// Postgres before the 503 (so it never counts), and the change feed, on storage.postgresDirect,
// keeps the identity cache trusted and fresh.
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { postgresDatabase } from '../../src/storage/database/db.js';
import { docsExample } from '../helpers/docs.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import {
  bearer, closeSql, everywhereWithin, makeUser, marker, ownRedisPrefix, queriesDuring, sql, startTestGateway, startTwoGateways, testConfig, testServices, usage, whileFeedTrusted,
} from '../helpers/gateway.js';
import { startPgBouncer, type PgBouncer } from '../helpers/pgbouncer.js';
import { describeWithProxy } from '../helpers/proxies.js';

describeWithProxy('pgbouncer')('behind PgBouncer (transaction mode)', () => {
  let bouncer: PgBouncer;
  let upstream: EchoUpstream;
  const routes = () => ({
    upstreams: { app: { url: upstream.url } },
    routes: [
      { path: '/daily', upstream: 'app', dailyLimit: true },
      { path: '/pro', upstream: 'app', plans: ['pro'] },
    ],
  });

  beforeAll(async () => {
    [bouncer, upstream] = await Promise.all([startPgBouncer(), startEchoUpstream()]);
  });

  afterAll(async () => {
    await upstream?.close();
    await bouncer?.stop();
    await closeSql();
  });

  it('answers 503 to a daily request blocked on a locked row, and does not count it', async () => {
    // A short client-side timeout keeps the test fast (production: 5 s, the server's 4 s).
    const db = postgresDatabase(bouncer.url, { queryTimeoutMs: 500, listenUrl: testServices!.postgres, poolSize: 5 });
    const gw = await startTestGateway(testConfig({ ...routes(), storage: { redisKeyPrefix: ownRedisPrefix('bouncer-lock') } }), { db });
    const locker = new pg.Client({ connectionString: testServices!.postgres });
    await locker.connect();
    try {
      const user = await makeUser(gw);
      const m = marker();
      await locker.query('BEGIN');
      await locker.query('SELECT id FROM users WHERE id = $1 FOR UPDATE', [user.id]);
      const blocked = await gw.get(`/daily/${m}`, { headers: bearer(user.access) });
      expect(blocked.status).toBe(503);
      expect(blocked.json).toEqual({ error: 'Service temporairement indisponible' });
      await locker.query('ROLLBACK');
      // Queued behind anything still waiting for the row, so this reads what it left behind.
      const { rows } = await locker.query('SELECT daily_usage FROM users WHERE id = $1 FOR UPDATE', [user.id]);
      expect(rows).toEqual([{ daily_usage: 0 }]);
      expect((await gw.get(`/daily/${m}`, { headers: bearer(user.access) })).status).toBe(200);
      expect(upstream.count(m)).toBe(1);
    } finally {
      await locker.end();
      await gw.close();
      await db.close();
    }
  });

  it('sees a plan change and a lowered daily count made by SQL within a second on every instance, from a trusted cache', async () => {
    // The storage settings of docs/production.md, as written, on this test's PgBouncer and Postgres.
    const { storage } = parseConfig(docsExample('production', 'pgbouncer'), 'docs', { DATABASE_URL: bouncer.url, DATABASE_DIRECT_URL: testServices!.postgres });
    const [a, b] = await startTwoGateways(testConfig({ ...routes(), storage: { postgres: storage.postgres, postgresDirect: storage.postgresDirect } }));
    try {
      await everywhereWithin([a, b], (gw) => gw.services.identities.isLive, 3000);
      const user = await makeUser(a);
      const m = marker();
      for (const gw of [a, b]) expect((await gw.get(`/pro/${m}`, { headers: bearer(user.access) })).status).toBe(403);
      await sql("UPDATE users SET plan = 'pro' WHERE id = $1", [user.id]);
      await everywhereWithin([a, b], async (gw) => (await gw.get(`/pro/${m}`, { headers: bearer(user.access) })).status === 200, 1000);

      await sql("UPDATE users SET plan = 'free' WHERE id = $1", [user.id]);
      await everywhereWithin([a, b], async (gw) => (await gw.get(`/pro/${m}`, { headers: bearer(user.access) })).status === 403, 1000);
      const d = marker();
      expect((await a.get(`/daily/${d}`, { headers: bearer(user.access) })).status).toBe(200);
      for (const gw of [a, b]) expect((await gw.get(`/daily/${d}`, { headers: bearer(user.access) })).status).toBe(429);
      await sql('UPDATE users SET daily_usage = 0 WHERE id = $1', [user.id]);
      const poll = marker();
      await everywhereWithin([a], async (gw) => (await gw.get(`/daily/${poll}`, { headers: bearer(user.access) })).status === 200, 1000);
      expect((await usage(user.id)).daily_usage).toBe(1);
      // Served from memory: the cache trusts its feed, so a known user costs no query.
      for (const gw of [a, b]) {
        expect(gw.services.identities.isLive).toBe(true);
        await whileFeedTrusted(gw, async () => {
          await gw.get(`/pro/${marker()}`, { headers: bearer(user.access) });
          const queries = await queriesDuring(gw, async () => {
            for (let i = 0; i < 3; i++) expect((await gw.get(`/pro/${marker()}`, { headers: bearer(user.access) })).status).toBe(403);
          });
          expect(queries).toEqual([]);
        });
      }
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('without postgresDirect, knows its LISTEN hears nothing through the pooler and reads the database instead', async () => {
    const gw = await startTestGateway(testConfig({ ...routes(), storage: { postgres: bouncer.url } }));
    try {
      const user = await makeUser(gw);
      const m = marker();
      expect((await gw.get(`/pro/${m}`, { headers: bearer(user.access) })).status).toBe(403);
      await everywhereWithin([gw], (g) => !g.services.identities.isLive, 3000);
      // Still right, at the price of a query per request (docs/production.md says to set postgresDirect).
      await sql("UPDATE users SET plan = 'pro' WHERE id = $1", [user.id]);
      expect((await gw.get(`/pro/${m}`, { headers: bearer(user.access) })).status).toBe(200);
    } finally {
      await gw.close();
    }
  });
});
