// Postgres going silent under a running gateway: the proxy between them stops moving bytes but
// closes nothing, as a firewall dropping packets or a network partition does. Nothing fails on its
// own then, so without client-side query timeouts every request that needs the database would
// hang. What needs the database must answer the catalog 503 instead, and work again, on the same
// process, once bytes flow.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { errorBody } from '../../src/errors/index.js';
import { postgresDatabase, type Database } from '../../src/storage/database/db.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { bearer, closeSql, describeWithServices, eventually, makeUser, marker, newEmail, startTestGateway, testConfig, testServices, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { postgresTarget, startTcpProxy, throughProxy, type TcpProxy } from '../helpers/tcpProxy.js';

const UNAVAILABLE = errorBody('storageUnavailable');

describeWithServices('Postgres blackholed', () => {
  let proxy: TcpProxy;
  let upstream: EchoUpstream;
  let db: Database;
  let gw: TestGateway;
  let user: TestUser;

  beforeAll(async () => {
    proxy = await startTcpProxy(postgresTarget());
    upstream = await startEchoUpstream();
    const url = throughProxy(testServices!.postgres, proxy);
    // A short timeout keeps the test fast; production uses QUERY_TIMEOUT_MS.
    db = postgresDatabase(url, { queryTimeoutMs: 500, poolSize: 5 });
    gw = await startTestGateway(testConfig({
      storage: { postgres: url },
      upstreams: { app: { url: upstream.url } },
      routes: [{ path: '/app', upstream: 'app', auth: 'required' }],
    }), { db });
    user = await makeUser(gw);
    // Cached now: a cached identity must not outlive a LISTEN connection that went silent.
    expect((await gw.get(`/app/${marker()}`, { headers: bearer(user.access) })).status).toBe(200);
  });
  afterAll(async () => {
    proxy?.forward();
    await gw?.close();
    await db?.close();
    await proxy?.close();
    await upstream?.close();
    await closeSql();
  });

  it('answers 503 where the database is needed instead of hanging, and recovers once bytes flow again', async () => {
    proxy.blackhole();

    const needsDb = await Promise.all([
      gw.post('/api/v1/auth/login', { email: user.email, password: user.password }),
      gw.post('/api/v1/auth/refresh', { refresh_token: user.refresh }), // a transaction
      gw.post('/api/v1/auth/register', { email: newEmail(), password: 'long-enough-password' }),
      gw.get('/api/v1/user/me', { headers: bearer(user.access) }),
    ]);
    for (const res of needsDb) {
      expect(res.status).toBe(503);
      expect(res.json).toEqual(UNAVAILABLE);
    }
    // Timed-out connections were dropped, not left to jam the pool: the next request answers the same.
    const again = await gw.post('/api/v1/auth/login', { email: user.email, password: user.password });
    expect([again.status, again.json]).toEqual([503, UNAVAILABLE]);
    // The LISTEN connection notices too, so the cached identity stops being served.
    await eventually(async () => (await gw.get(`/app/${marker()}`, { headers: bearer(user.access) })).status === 503, 15_000, 100);
    expect(await gw.get('/healthz')).toMatchObject({ status: 200, json: { status: 'ok' } });

    proxy.forward();

    // The same process, no restart.
    const login = await gw.post('/api/v1/auth/login', { email: user.email, password: user.password });
    expect(login.status).toBe(200);
    expect((await gw.post('/api/v1/auth/refresh', { refresh_token: login.json.refresh_token })).status).toBe(200);
    expect((await gw.get('/api/v1/user/me', { headers: bearer(user.access) })).json).toMatchObject({ user_id: user.id, email: user.email });
    expect((await gw.get(`/app/${marker()}`, { headers: bearer(user.access) })).status).toBe(200);
    const listening = () => gw.logs.filter((l) => l.includes('change feed: listening for user, key and daily-usage changes')).length;
    await eventually(() => listening() >= 2, 10_000); // once at start, once after the outage

    const logged = gw.logs.join('\n');
    expect(logged).not.toContain('"statusCode":500');
    expect(logged).not.toContain('unexpected error');
  });
});
