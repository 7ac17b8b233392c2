// Graceful shutdown of the built CLI: a request in flight when SIGTERM (or SIGINT) arrives gets
// its normal response, no new connection is accepted, and the process exits 0 once it has closed
// its listeners, the Postgres pool, Redis and the LISTEN connection.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startHoldingUpstream, type HoldingUpstream } from '../helpers/echoUpstream.js';
import {
  bearer, closeSql, describeWithServices, eventually, makeUser, marker, rawTestConfig, sql, startTestGateway, testConfig, testServices, type TestGateway,
} from '../helpers/gateway.js';
import { spawnGateway } from '../helpers/gatewayProcess.js';
import { request } from '../helpers/http.js';

describeWithServices('graceful shutdown (SIGTERM, SIGINT)', () => {
  let upstream: HoldingUpstream;
  let helper: TestGateway; // an in-process gateway on the same database, to make users
  beforeAll(async () => {
    upstream = await startHoldingUpstream();
    helper = await startTestGateway(testConfig());
  });
  afterAll(async () => {
    await helper?.close();
    await upstream?.close();
    await closeSql();
  });

  const config = () => rawTestConfig({
    upstreams: { slow: { url: upstream.url, timeout: '30s' } },
    routes: [
      { path: '/open', upstream: 'slow', auth: 'none' },
      { path: '/guarded', upstream: 'slow', auth: 'required' },
    ],
  });

  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`${signal}: slow proxied requests in flight complete normally, then the process exits 0`, async () => {
      const gw = await spawnGateway(config());
      const user = await makeUser(helper);
      const m = marker();
      const hold = upstream.hold(m);
      // One anonymous and one authenticated request, both parked at the upstream.
      const open = request(gw.url, 'GET', `/open/${m}/a`);
      const guarded = request(gw.url, 'GET', `/guarded/${m}/b`, { headers: bearer(user.access) });
      await eventually(() => hold.held() === 2, 10_000);

      gw.child.kill(signal);
      await gw.waitForLog((l) => l.msg === 'shutting down: finishing requests in flight' && l.signal === signal);
      // The listener closes: new connections are refused while the old requests finish.
      const outcome = () => request(gw.url, 'GET', '/healthz').then(() => 'answered', (err: NodeJS.ErrnoException) => err.code);
      await eventually(async () => (await outcome()) === 'ECONNREFUSED', 5000);
      expect(gw.child.exitCode).toBeNull();

      hold.release();
      const [a, b] = await Promise.all([open, guarded]);
      expect(a.status).toBe(200);
      expect(a.json).toEqual({ released: m, path: `/open/${m}/a` });
      expect(b.status).toBe(200);
      expect(b.json).toEqual({ released: m, path: `/guarded/${m}/b` });
      expect(upstream.last(`${m}/b`)!.headers['x-user-id']).toBe(String(user.id));

      expect(await gw.exited).toEqual({ code: 0, signal: null });
      expect(gw.logs.some((l) => l.msg === 'shut down')).toBe(true);
    });
  }

  it('SIGTERM drains for server.shutdownDelay first: /readyz 503, new connections served and closed after their answer; SIGINT does not wait', async () => {
    const gw = await spawnGateway({ ...config(), server: { ...(config().server as object), shutdownDelay: '1500ms' } });
    const m = marker();
    const keptAlive = await request(gw.url, 'GET', `/open/${m}/before`, { freshConnection: false });
    expect(keptAlive.status).toBe(200);
    expect(keptAlive.headers.connection).toBe('keep-alive');
    const started = Date.now();
    gw.child.kill('SIGTERM');
    await gw.waitForLog((l) => l.msg === 'draining: /readyz answers 503, responses close their connections');
    const ready = await request(gw.url, 'GET', '/readyz', { freshConnection: true });
    expect(ready.status).toBe(503);
    expect(ready.json).toEqual({ error: 'Service temporairement indisponible', status: 'draining', checks: { postgres: 'ok', redis: 'ok' } });
    // Still served during the delay, on a new connection too, and told to close it.
    const during = await request(gw.url, 'GET', `/open/${m}/during`, { freshConnection: true });
    expect(during.status).toBe(200);
    expect(during.headers.connection).toBe('close');
    expect(await gw.exited).toEqual({ code: 0, signal: null });
    expect(Date.now() - started).toBeGreaterThanOrEqual(1500);
    expect(upstream.count(`${m}/during`)).toBe(1);

    const quick = await spawnGateway({ ...config(), server: { ...(config().server as object), shutdownDelay: '30s' } });
    const stopAt = Date.now();
    quick.child.kill('SIGINT');
    expect(await quick.exited).toEqual({ code: 0, signal: null });
    expect(Date.now() - stopAt).toBeLessThan(10_000);
  });

  it('closes its Postgres connections (pool and LISTEN) on the way out', async () => {
    // Tagged with an application_name of its own, so other gateways on the run's database do not count.
    const app = `gw-ops-${marker()}`;
    const url = new URL(testServices!.postgres);
    url.searchParams.set('application_name', app);
    const gw = await spawnGateway({ ...config(), storage: { ...(config().storage as object), postgres: url.toString() } });
    const count = async () => (await sql<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1', [app]))[0]!.n;
    const listening = async () => (await sql<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND query ILIKE 'LISTEN%'", [app]))[0]!.n;
    expect(await listening()).toBeGreaterThan(0);
    gw.child.kill('SIGTERM');
    expect(await gw.exited).toEqual({ code: 0, signal: null });
    await eventually(async () => (await count()) === 0, 5000);
  });

  it('keeps serving requests on the in-process listener until close() resolves, and close() is idempotent', async () => {
    const gw = await startTestGateway(testConfig({
      upstreams: { slow: { url: upstream.url, timeout: '30s' } },
      routes: [{ path: '/open', upstream: 'slow', auth: 'none' }],
    }));
    const m = marker();
    const hold = upstream.hold(m);
    const pending = request(gw.url, 'GET', `/open/${m}`);
    await eventually(() => hold.held() === 1);
    const closing = gw.close();
    const again = gw.close();
    hold.release();
    const res = await pending;
    expect(res.status).toBe(200);
    expect(res.headers.connection).toBe('close');
    await Promise.all([closing, again]);
  });
});
