// The identity cache (storage/feed/identityCache.ts): no database round trip for a known user, yet a
// change made by SQL reaches every instance within a second, also across a lost LISTEN connection
// (a silent or late one: feedTrust.system.test.ts).
import { createHash, randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import {
  bearer, closeSql, describeWithServices, eventually, everywhereWithin, makeUser, marker, queriesDuring, sql, startTwoGateways, testConfig, testServices,
  throwawayDatabase, whileFeedTrusted,
  type TestGateway,
} from '../helpers/gateway.js';

/**
 * A TRUNCATE typed by hand, run again if Postgres chose it as a deadlock's victim (40P01), as its
 * author would: it locks the users table and every table CASCADE reaches while the gateways' own
 * background writes (usage flushes, housekeeping) hold some of them, and CI once saw the cycle.
 */
async function truncateByHand(client: pg.Client, statement: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await client.query(statement);
      return;
    } catch (err) {
      if ((err as { code?: string }).code !== '40P01' || attempt === 3) throw err;
    }
  }
}

describeWithServices('identity cache', () => {
  let upstream: EchoUpstream;
  let a: TestGateway;
  let b: TestGateway;
  // This file's instances, tagged: the test that cuts their LISTEN connections cuts no other
  // file's (they share the run's database, and the console's count of instances reads them).
  const tag = `gw-identity-cache-${marker()}`;

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    const tagged = new URL(testServices!.postgres);
    tagged.searchParams.set('application_name', tag);
    [a, b] = await startTwoGateways(testConfig({
      storage: { postgres: tagged.toString() },
      upstreams: { app: { url: upstream.url } },
      routes: [
        { path: '/private', upstream: 'app', auth: 'required' },
        { path: '/pro', upstream: 'app', auth: 'required', plans: ['pro'] },
      ],
    }));
  });

  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await upstream?.close();
    await closeSql();
  });

  const status = async (gw: TestGateway, path: string, headers: Record<string, string>) => (await gw.get(path, { headers })).status;

  it('serves a known user, by bearer or API key, without a database round trip', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const key = `gw_${randomBytes(24).toString('base64url')}`;
    await sql('INSERT INTO api_tokens (user_id, token_hash) VALUES ($1, $2)', [user.id, createHash('sha256').update(key).digest('hex')]);
    await whileFeedTrusted(a, async () => {
      const m = marker();
      for (const headers of [bearer(user.access), { 'x-api-key': key }]) {
        expect(await status(a, `/pro/${m}`, headers)).toBe(200); // first sight: read from Postgres
        const hits = a.services.identities.stats.hits;
        const queries = await queriesDuring(a, async () => {
          for (let i = 0; i < 10; i++) expect(await status(a, `/pro/${m}`, headers)).toBe(200);
        });
        expect(queries).toEqual([]);
        expect(a.services.identities.stats.hits).toBeGreaterThanOrEqual(hits + 10);
      }
      expect(upstream.count(m)).toBe(22);
    });
  });

  it('sees a plan or active flag changed by SQL on both instances within a second', async () => {
    const user = await makeUser(a);
    const m = marker();
    const auth = bearer(user.access);
    for (const gw of [a, b]) expect(await status(gw, `/pro/${m}`, auth)).toBe(403); // cached as free on both
    await sql("UPDATE users SET plan = 'pro' WHERE id = $1", [user.id]);
    await everywhereWithin([a, b], async (gw) => (await status(gw, `/pro/${m}`, auth)) === 200, 1000);
    const res = await b.get(`/pro/${m}`, { headers: auth });
    expect(res.json.headers['x-user-plan']).toBe('pro');

    await sql('UPDATE users SET is_active = 0 WHERE id = $1', [user.id]);
    await everywhereWithin([a, b], async (gw) => (await status(gw, `/private/${m}`, auth)) === 401, 1000);
    expect((await a.get(`/private/${m}`, { headers: auth })).json).toEqual({ error: 'Utilisateur introuvable' });

    await sql('UPDATE users SET is_active = 1 WHERE id = $1', [user.id]);
    await everywhereWithin([a, b], async (gw) => (await status(gw, `/private/${m}`, auth)) === 200, 1000);
  });

  it('answers a made-up API key from memory, yet accepts it everywhere within a second once SQL makes it a key', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const m = marker();
    const rawKey = () => `gw_${randomBytes(24).toString('base64url')}`;
    const sha = (raw: string) => createHash('sha256').update(raw).digest('hex');
    const [imported, renamed, revoked] = [rawKey(), rawKey(), rawKey()];
    const keyStatus = (gw: TestGateway, raw: string) => status(gw, `/private/${m}`, { 'x-api-key': raw });
    await sql('INSERT INTO api_tokens (user_id, token_hash, revoked) VALUES ($1, $2, 1)', [user.id, sha(revoked)]);

    // First sight on each instance is read from Postgres; after that, a client repeating
    // made-up or revoked keys costs no query.
    for (const gw of [a, b]) {
      for (const raw of [imported, renamed, revoked]) {
        const res = await gw.get(`/private/${m}`, { headers: { 'x-api-key': raw } });
        expect([res.status, res.json]).toEqual([401, { error: 'Token invalide ou expiré' }]);
      }
    }
    await whileFeedTrusted(a, async () => {
      // Seen again first: a change heard during the first sight keeps it from being cached.
      for (const raw of [imported, renamed, revoked]) expect(await keyStatus(a, raw)).toBe(401);
      const queries = await queriesDuring(a, async () => {
        for (let i = 0; i < 5; i++) for (const raw of [imported, renamed, revoked]) expect(await keyStatus(a, raw)).toBe(401);
      });
      expect(queries).toEqual([]);
    });

    // An operator imports a key with exactly that value (from the system the gateway replaces).
    await sql('INSERT INTO api_tokens (user_id, token_hash) VALUES ($1, $2)', [user.id, sha(imported)]);
    await everywhereWithin([a, b], async (gw) => (await keyStatus(gw, imported)) === 200, 1000);
    // The row is given another value: the new one works everywhere, the old one no longer does.
    await sql('UPDATE api_tokens SET token_hash = $2 WHERE token_hash = $1', [sha(imported), sha(renamed)]);
    await everywhereWithin([a, b], async (gw) => (await keyStatus(gw, renamed)) === 200 && (await keyStatus(gw, imported)) === 401, 1000);
    // A revoked key taken back into use.
    await sql('UPDATE api_tokens SET revoked = 0 WHERE token_hash = $1', [sha(revoked)]);
    await everywhereWithin([a, b], async (gw) => (await keyStatus(gw, revoked)) === 200, 1000);
    // The owner deactivated, then reactivated: the key follows the user, both ways.
    await sql('UPDATE users SET is_active = 0 WHERE id = $1', [user.id]);
    await everywhereWithin([a, b], async (gw) => (await keyStatus(gw, revoked)) === 401, 1000);
    await sql('UPDATE users SET is_active = 1 WHERE id = $1', [user.id]);
    await everywhereWithin([a, b], async (gw) => (await keyStatus(gw, revoked)) === 200, 1000);
    const res = await b.get(`/private/${m}`, { headers: { 'x-api-key': renamed } });
    expect(res.json.headers).toMatchObject({ 'x-user-id': String(user.id), 'x-auth-method': 'api-key' });
  });

  it('bypasses the cache while the LISTEN connection is lost, and recovers', async () => {
    const user = await makeUser(a);
    const m = marker();
    const auth = bearer(user.access);
    for (const gw of [a, b]) expect(await status(gw, `/pro/${m}`, auth)).toBe(403);

    await sql(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                WHERE application_name = $1 AND query LIKE 'LISTEN%'`, [tag]);
    await eventually(() => !a.services.identities.isLive && !b.services.identities.isLive, 1000, 1);
    // No notification can arrive now: the change is seen because the cache is not used.
    await sql("UPDATE users SET plan = 'pro' WHERE id = $1", [user.id]);
    for (const gw of [a, b]) expect(await status(gw, `/pro/${m}`, auth)).toBe(200);

    await eventually(() => a.services.identities.isLive && b.services.identities.isLive, 5000);
    // Listening again: hits come from memory, and changes still arrive within a second.
    await whileFeedTrusted(a, async () => {
      expect(await status(a, `/pro/${m}`, auth)).toBe(200);
      const queries = await queriesDuring(a, async () => expect(await status(a, `/pro/${m}`, auth)).toBe(200));
      expect(queries).toEqual([]);
    });
    await sql("UPDATE users SET plan = 'premium' WHERE id = $1", [user.id]);
    await everywhereWithin([a, b], async (gw) => (await status(gw, `/pro/${m}`, auth)) === 403, 1000);
  });

  it('forgets every user and key on both instances within a second when SQL empties the tables (TRUNCATE)', async () => {
    // A database of its own: TRUNCATE would empty the tables every other test file is using.
    const db = await throwawayDatabase({ migrated: true });
    const direct = new pg.Client({ connectionString: db.url });
    await direct.connect();
    const [c, d] = await startTwoGateways(testConfig({
      storage: { postgres: db.url, redisKeyPrefix: `${testServices!.redisPrefix}truncate:` },
      upstreams: { app: { url: upstream.url } },
      routes: [
        { path: '/private', upstream: 'app', auth: 'required' },
        { path: '/daily', upstream: 'app', auth: 'required', dailyLimit: true },
      ],
    }));
    try {
      const user = await makeUser(c);
      const key = `gw_${randomBytes(24).toString('base64url')}`;
      await direct.query('INSERT INTO api_tokens (user_id, token_hash) VALUES ($1, $2)', [user.id, createHash('sha256').update(key).digest('hex')]);
      const m = marker();
      for (const gw of [c, d]) {
        expect(await status(gw, `/private/${m}`, { 'x-api-key': key })).toBe(200);
        expect(await status(gw, `/private/${m}`, bearer(user.access))).toBe(200);
      }
      // The day used up: from now on Redis refuses this user id without asking Postgres.
      expect(await status(c, `/daily/${m}`, bearer(user.access))).toBe(200);
      expect(await status(d, `/daily/${m}`, bearer(user.access))).toBe(429);

      // Polls go to paths of their own: the ones answered before the change is heard reach the upstream.
      const poll = marker();
      await truncateByHand(direct, 'TRUNCATE api_tokens');
      await everywhereWithin([c, d], async (gw) => (await status(gw, `/private/${poll}`, { 'x-api-key': key })) === 401, 1000);
      expect(await status(d, `/private/${m}`, bearer(user.access))).toBe(200);

      await truncateByHand(direct, 'TRUNCATE users RESTART IDENTITY CASCADE');
      await everywhereWithin([c, d], async (gw) => (await status(gw, `/private/${poll}`, bearer(user.access))) === 401, 1000);
      // A newcomer gets the emptied table's first id again, and a day of its own.
      const newcomer = await makeUser(d);
      expect(newcomer.id).toBe(user.id);
      expect(await status(c, `/daily/${m}`, bearer(newcomer.access))).toBe(200);
      expect((await direct.query('SELECT daily_usage FROM users WHERE id = $1', [newcomer.id])).rows).toEqual([{ daily_usage: 1 }]);
      expect(upstream.count(m)).toBe(7);
    } finally {
      await Promise.all([c.close(), d.close()]);
      await direct.end();
      await db.drop();
    }
  });
});
