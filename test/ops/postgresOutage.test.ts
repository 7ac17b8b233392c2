// Postgres going away under a running gateway: a TCP proxy the test controls sits between the
// gateway and the run's Postgres, and is cut (connections reset, new ones refused) and restored.
// What needs the database answers 503 (never 500, never a crash), /readyz says 503, the rest keeps
// working, and everything recovers without a restart, including the LISTEN connection.
import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import {
  bearer, closeSql, describeWithServices, eventually, makeUser, marker, newEmail, sql, startTestGateway, testConfig, testServices, type TestGateway, type TestUser,
} from '../helpers/gateway.js';
import { postgresTarget, startTcpProxy, throughProxy, type TcpProxy } from '../helpers/tcpProxy.js';

const UNAVAILABLE = { error: 'Service temporairement indisponible' };

describeWithServices('Postgres outage', () => {
  let proxy: TcpProxy;
  let upstream: EchoUpstream;
  let gw: TestGateway;
  let free: TestUser;
  let pro: TestUser;
  let apiKey: string;

  beforeAll(async () => {
    proxy = await startTcpProxy(postgresTarget());
    upstream = await startEchoUpstream();
    gw = await startTestGateway(testConfig({
      storage: { postgres: throughProxy(testServices!.postgres, proxy) },
      upstreams: { app: { url: upstream.url } },
      routes: [
        { path: '/daily', upstream: 'app', auth: 'required', dailyLimit: true },
        { path: '/pro', upstream: 'app', auth: 'required', plans: ['pro'] },
        { path: '/open', upstream: 'app', auth: 'none' },
      ],
    }));
    free = await makeUser(gw);
    pro = await makeUser(gw, { plan: 'pro' });
    apiKey = `gw_${randomBytes(24).toString('hex')}`;
    await sql('INSERT INTO api_tokens (user_id, token_hash) VALUES ($1, $2)', [pro.id, createHash('sha256').update(apiKey).digest('hex')]);
    // Warm the identity cache: while the LISTEN connection is down it must not be trusted anyway.
    expect((await gw.get(`/pro/${marker()}`, { headers: { 'x-api-key': apiKey } })).status).toBe(200);
  });
  afterAll(async () => {
    await gw?.close();
    await proxy?.close();
    await upstream?.close();
    await closeSql();
  });

  it('answers 503 where the database is needed, keeps the rest up, and recovers on its own', async () => {
    await proxy.cut();

    const ready = await gw.get('/readyz');
    expect(ready.status).toBe(503);
    expect(ready.json).toEqual({ ...UNAVAILABLE, status: 'unavailable', checks: { postgres: 'down', redis: 'ok' } });
    expect(await gw.get('/healthz')).toMatchObject({ status: 200, json: { status: 'ok' } });

    const needsDb = [
      gw.post('/api/v1/auth/register', { email: newEmail(), password: 'long-enough-password' }),
      gw.post('/api/v1/auth/login', { email: free.email, password: free.password }),
      gw.post('/api/v1/auth/refresh', { refresh_token: free.refresh }),
      gw.post('/api/v1/auth/logout', { refresh_token: free.refresh }),
      gw.get('/api/v1/user/me', { headers: bearer(free.access) }),
      gw.get(`/daily/${marker()}`, { headers: bearer(free.access) }),
      gw.get(`/pro/${marker()}`, { headers: bearer(pro.access) }),
      gw.get(`/pro/${marker()}`, { headers: { 'x-api-key': apiKey } }),
    ];
    for (const res of await Promise.all(needsDb)) {
      expect(res.status).toBe(503);
      expect(res.json).toEqual(UNAVAILABLE);
    }
    // A burst during the outage is logged as one line with a count, not one line (and a stack) per
    // request: issue 18 saw 9,349 lines from a 5 s stop.
    const burst = await Promise.all(Array.from({ length: 40 }, () => gw.get('/api/v1/user/me', { headers: bearer(free.access) })));
    expect(burst.every((res) => res.status === 503)).toBe(true);
    const outageLines = gw.logs.filter((l) => l.includes('storage unavailable'));
    expect(outageLines.length).toBeGreaterThanOrEqual(1);
    expect(outageLines.length).toBeLessThanOrEqual(2);
    // What needs no database still answers as usual.
    const m = marker();
    expect((await gw.get(`/open/${m}`)).status).toBe(200);
    expect(upstream.count(m)).toBe(1);
    expect((await gw.get(`/daily/${marker()}`)).json).toEqual({ error: 'Token invalide ou expiré' });
    expect((await gw.post('/api/v1/auth/login', {})).json).toEqual({ error: 'Email et mot de passe requis' });
    expect((await gw.post('/api/v1/auth/logout', {})).status).toBe(200);

    await proxy.restore();
    await eventually(async () => (await gw.get('/readyz')).status === 200, 10_000);
    expect((await gw.get('/readyz')).json).toEqual({ status: 'ok', checks: { postgres: 'ok', redis: 'ok' } });

    // Everything works again, on the same process.
    const login = await gw.post('/api/v1/auth/login', { email: free.email, password: free.password });
    expect(login.status).toBe(200);
    expect((await gw.post('/api/v1/auth/refresh', { refresh_token: login.json.refresh_token })).status).toBe(200);
    expect((await gw.get(`/daily/${marker()}`, { headers: bearer(free.access) })).status).toBe(200);
    expect((await gw.get(`/pro/${marker()}`, { headers: { 'x-api-key': apiKey } })).status).toBe(200);
    // The failed daily use was not counted: the one above was the first of the day.
    expect(await sql('SELECT daily_usage FROM users WHERE id = $1', [free.id])).toEqual([{ daily_usage: 1 }]);

    // The LISTEN connection is back: a plan changed by SQL reaches the cached identity.
    const listening = () => gw.logs.filter((l) => l.includes('change feed: listening for user, key and daily-usage changes')).length;
    await eventually(() => listening() >= 2, 10_000); // once at start, once after the outage
    expect((await gw.get(`/pro/${marker()}`, { headers: bearer(free.access) })).status).toBe(403);
    expect((await gw.get(`/pro/${marker()}`, { headers: bearer(free.access) })).status).toBe(403); // now cached
    await sql("UPDATE users SET plan = 'pro' WHERE id = $1", [free.id]);
    await eventually(async () => (await gw.get(`/pro/${marker()}`, { headers: bearer(free.access) })).status === 200);

    // The recovery is said once.
    expect(gw.logs.filter((l) => l.includes('storage answers again'))).toHaveLength(1);
    const logged = gw.logs.join('\n');
    expect(logged).not.toContain('"statusCode":500');
    expect(logged).not.toContain('unexpected error');
  });
});
