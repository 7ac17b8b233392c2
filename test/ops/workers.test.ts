// server.workers (issue 28, CONTRACT §18) on the built CLI: N processes serve one port, each a
// whole instance; the primary hands every worker the configuration it checked (at start and on
// SIGHUP, all or none), starts another worker when one dies, forwards SIGTERM (each drains), and
// answers /metrics and /readyz for every worker. Embedded storage refuses it.
import { availableParallelism } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { ADMIN_KEY, closeSql, configProblems, describeWithServices, eventually, marker, TEST_JWT_SECRET, throwawayDatabase, type ThrowawayDatabase } from '../helpers/gateway.js';
import { docsExample } from '../helpers/docs.js';
import { spawnGateway, type GatewayProcess, type LogLine } from '../helpers/gatewayProcess.js';
import { request } from '../helpers/http.js';
import { sparePort } from '../helpers/ports.js';
import { fleetReadiness, workerCount } from '../../src/fleet/primary.js';

describe('server.workers in the configuration', () => {
  it('needs storage.postgres for more than one worker, auto included', () => {
    const problem = 'server.workers: more than one worker needs storage.postgres: embedded storage is one process\'s';
    expect(configProblems('server: { workers: 2 }')).toEqual([problem]);
    expect(configProblems('server: { workers: auto }')).toEqual([problem]);
    expect(configProblems('server: { workers: 1 }')).toEqual([]);
    expect(configProblems('server: { workers: 2 }\nstorage: { postgres: postgres://db/gw }')).toEqual([]);
    expect(configProblems('server: { workers: "4" }\nstorage: { postgres: postgres://db/gw }')).toEqual([]); // as ${WORKERS} gives it
    expect(configProblems('server: { workers: 0 }\nstorage: { postgres: postgres://db/gw }')[0]).toMatch(/^server\.workers: Too small: expected number to be >=1/);
    expect(configProblems('server: { workers: many }\nstorage: { postgres: postgres://db/gw }')[0]).toMatch(/^server\.workers: expected a number of processes \(1 to 256\) or auto/);
  });

  it('auto is one per CPU this process may use, never fewer than one', () => {
    expect(workerCount(3)).toBe(3);
    expect(workerCount('auto')).toBeGreaterThanOrEqual(1);
    expect(workerCount('auto')).toBeLessThanOrEqual(availableParallelism());
  });

  it('the fleet is ready when every worker is: the worst state of each check wins, a missing worker is "workers: down"', () => {
    const ok = { status: 'ok', checks: { postgres: 'ok', redis: 'ok' } } as const;
    expect(fleetReadiness([ok, ok], 2)).toEqual({ status: 'ok', checks: { postgres: 'ok', redis: 'ok' } });
    expect(fleetReadiness([ok, { status: 'ok', checks: { postgres: 'ok', redis: 'readonly' } }], 2)).toEqual({ status: 'ok', checks: { postgres: 'ok', redis: 'readonly' } });
    expect(fleetReadiness([ok, { status: 'unavailable', checks: { postgres: 'down', redis: 'down' } }], 2)).toEqual({ status: 'unavailable', checks: { postgres: 'down', redis: 'down' } });
    expect(fleetReadiness([{ status: 'unavailable', checks: { postgres: 'down', redis: 'ok' } }, { status: 'draining', checks: { postgres: 'ok', redis: 'ok' } }], 2))
      .toEqual({ status: 'draining', checks: { postgres: 'down', redis: 'ok' } });
    expect(fleetReadiness([ok], 2)).toEqual({ status: 'unavailable', checks: { postgres: 'ok', redis: 'ok', workers: 'down' } });
  });
});

describeWithServices('server.workers: 2 on the built CLI, as docs/production.md configures it', () => {
  let upstream: EchoUpstream;
  let db: ThrowawayDatabase;
  let gw: GatewayProcess;
  let adminUrl: string;
  let adminPort: number;
  let metricsPort: number;
  const METRICS_TOKEN = 'fleet-scrape-token-0123456789';

  // The docs' example as written, and the sections it leaves to the reader (JSON is YAML).
  const file = (routes: object[]) => [
    docsExample('production', 'workers'),
    `auth: ${JSON.stringify({ jwt: { secret: TEST_JWT_SECRET }, rateLimit: { max: 0 } })}`,
    `admin: ${JSON.stringify({ host: '127.0.0.1', port: adminPort, apiKey: ADMIN_KEY })}`,
    'metrics: { host: 127.0.0.1, port: ${METRICS_PORT}, token: ${METRICS_TOKEN} }',
    `upstreams: ${JSON.stringify({ app: { url: upstream.url } })}`,
    `routes: ${JSON.stringify(routes)}`,
  ].join('\n');
  const ROUTES = [{ path: '/open', upstream: 'app', auth: 'none' }, { path: '/guarded', upstream: 'app', auth: 'required' }];
  const workerLines = (msg: string) => gw.logs.filter((l) => l.msg === msg && typeof l.worker === 'number');
  /** Requests on a connection each: the primary hands connections to the workers in turn. */
  const burst = (n: number, path: string) => Promise.all(Array.from({ length: n }, () => request(gw.url, 'GET', path, { freshConnection: true })));

  beforeAll(async () => {
    [upstream, db, adminPort, metricsPort] = await Promise.all([startEchoUpstream(), throwawayDatabase(), sparePort(), sparePort()]);
    // Its own database: the workers migrate it together, and no other test's webhooks are near.
    gw = await spawnGateway(file(ROUTES), { env: { GATEWAY_WORKERS: '2', DATABASE_URL: db.url, REDIS_URL: '', PORT: '0', HOST: '127.0.0.1', METRICS_PORT: String(metricsPort), METRICS_TOKEN } });
    adminUrl = gw.adminUrl!;
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await upstream?.close();
    await db?.drop();
    await closeSql();
  });

  it('says once that the gateway listens, with the workers it runs; each worker says it too', async () => {
    const listening = gw.logs.filter((l) => l.msg === 'gateway listening');
    expect(listening).toHaveLength(1);
    expect(listening[0]).toMatchObject({ workers: 2, storage: 'postgres', url: gw.url, admin: adminUrl });
    expect(listening[0]!.worker).toBeUndefined();
    // Each process writes its own lines: a worker's may come just after the primary's.
    await eventually(() => new Set(workerLines('worker listening').map((l) => l.pid)).size === 2, 5000);
  });

  it('serves from both workers, and /metrics counts every worker\'s requests', async () => {
    const before = gw.logs.length;
    const answers = await burst(20, '/guarded/x');
    expect(answers.map((r) => r.status)).toEqual(Array(20).fill(401));
    // Each denial is a line of the worker that answered it.
    await eventually(() => gw.logs.slice(before).filter((l) => l.msg === 'request denied').length === 20, 5000);
    const deniedBy = new Set(gw.logs.slice(before).filter((l) => l.msg === 'request denied').map((l) => l.worker));
    expect(deniedBy.size).toBe(2);

    const metrics = await request(adminUrl, 'GET', '/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.text).toContain('gateway_requests_total{route="/guarded",method="GET",status="401"} 20\n');
    expect(metrics.text).toMatch(/gateway_build_info\{version="[^"]+",node="[^"]+"\} 1\n/);

    // The metrics listener (CONTRACT §28), served by every worker: the same sums, whichever worker
    // a scrape's connection reaches; its token on each.
    const scrapes = await Promise.all(Array.from({ length: 4 }, () => request(`http://127.0.0.1:${metricsPort}`, 'GET', '/metrics', { headers: { authorization: `Bearer ${METRICS_TOKEN}` }, freshConnection: true })));
    for (const scrape of scrapes) {
      expect(scrape.status).toBe(200);
      expect(scrape.text).toContain('gateway_requests_total{route="/guarded",method="GET",status="401"} 20\n');
    }
    const refused = await Promise.all(Array.from({ length: 4 }, () => request(`http://127.0.0.1:${metricsPort}`, 'GET', '/metrics', { freshConnection: true })));
    expect(refused.map((r) => [r.status, r.json])).toEqual(Array(4).fill([401, { error: 'Jeton de métriques invalide' }]));
  });

  it('/readyz answers for every worker', async () => {
    const ready = await request(adminUrl, 'GET', '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.json).toEqual({ status: 'ok', checks: { postgres: 'ok', redis: 'off' } });
  });

  it('the console\'s session and one-time sign-in links hold whichever worker a connection reaches', async () => {
    // A connection each: the primary hands them to the workers in turn.
    const fresh = (method: string, path: string, options: { headers?: Record<string, string>; json?: unknown } = {}) => request(adminUrl, method, path, { ...options, freshConnection: true });
    const signedIn = await fresh('POST', '/console/session', { json: { key: ADMIN_KEY } });
    expect(signedIn.status).toBe(200);
    const cookie = String(signedIn.headers['set-cookie']).split(';')[0]!;
    const seen = await Promise.all(Array.from({ length: 8 }, () => fresh('GET', '/console/session', { headers: { cookie } })));
    expect(seen.map((r) => r.status)).toEqual(Array(8).fill(200));
    expect(new Set(seen.map((r) => r.json.csrf))).toEqual(new Set([signedIn.json.csrf]));

    const ticket = /#ticket=([\w-]+)$/.exec((await fresh('POST', '/console/tickets', { headers: { authorization: `Bearer ${ADMIN_KEY}` } })).json.url)![1]!;
    const uses = [];
    // From the console's page: its Origin (CONTRACT §26).
    for (let i = 0; i < 4; i++) uses.push((await fresh('POST', '/console/session', { headers: { origin: adminUrl }, json: { ticket } })).status);
    expect(uses).toEqual([200, 401, 401, 401]);

    // Sign-out ends it on every worker.
    expect((await fresh('DELETE', '/console/session', { headers: { cookie, 'x-csrf-token': signedIn.json.csrf } })).status).toBe(200);
    const after = await Promise.all(Array.from({ length: 4 }, () => fresh('GET', '/console/session', { headers: { cookie } })));
    expect(after.map((r) => r.status)).toEqual(Array(4).fill(401));
  });

  it('starts another worker when one dies, and keeps serving meanwhile', async () => {
    const pids = workerLines('worker listening').map((l) => l.pid as number);
    const victim = pids[0]!;
    process.kill(victim, 'SIGKILL');
    const stopped = await gw.waitForLog((l) => l.msg === 'worker stopped: starting another' && l.signal === 'SIGKILL');
    expect(stopped.worker).toBeTypeOf('number');
    const m = marker();
    const during = await burst(10, `/open/${m}`);
    expect(during.map((r) => r.status)).toEqual(Array(10).fill(200));
    expect(upstream.count(m)).toBe(10);
    await eventually(() => new Set(workerLines('worker listening').map((l) => l.pid)).size === 3, 20_000);
    const replacement = workerLines('worker listening').at(-1)!;
    expect(replacement.pid).not.toBe(victim);
    expect((await request(adminUrl, 'GET', '/readyz')).status).toBe(200);
  }, 30_000);

  it('SIGHUP: the primary reads the file once, every worker applies it; a refused file changes none', async () => {
    const reloaded = () => workerLines('configuration reloaded');
    const seen = reloaded().length;
    gw.writeConfig(file([...ROUTES, { path: '/added', upstream: 'app', auth: 'none' }]));
    gw.child.kill('SIGHUP');
    await eventually(() => reloaded().length === seen + 2, 10_000);
    expect(new Set(reloaded().slice(seen).map((l) => l.worker)).size).toBe(2);
    const m = marker();
    expect((await burst(6, `/added/${m}`)).map((r) => r.status)).toEqual(Array(6).fill(200));

    const refusedLines = () => gw.logs.filter((l: LogLine) => l.msg === 'configuration reload refused: keeping the running configuration');
    gw.writeConfig(file([{ path: '/added', upstream: 'nowhere', auth: 'none' }]));
    gw.child.kill('SIGHUP');
    await eventually(() => refusedLines().length === 1, 10_000);
    expect(refusedLines()[0]!.worker).toBeUndefined(); // the primary's line: no worker read the file
    expect(reloaded().length).toBe(seen + 2);
    expect((await burst(6, `/added/${marker()}`)).map((r) => r.status)).toEqual(Array(6).fill(200));
  }, 30_000);

  it('SIGTERM: every worker drains (/readyz 503, server.shutdownDelay: 5s by default), then the primary exits 0', async () => {
    gw.child.kill('SIGTERM');
    await eventually(() => workerLines('draining: /readyz answers 503, responses close their connections').length === 2, 5000);
    const draining = await request(adminUrl, 'GET', '/readyz', { freshConnection: true });
    expect(draining.status).toBe(503);
    expect(draining.json).toEqual({ error: 'Service temporairement indisponible', status: 'draining', checks: { postgres: 'ok', redis: 'off' } });
    // Still answering while draining.
    expect((await request(gw.url, 'GET', `/open/${marker()}`, { freshConnection: true })).status).toBe(200);
    expect(await gw.exited).toEqual({ code: 0, signal: null });
    expect(workerLines('shut down')).toHaveLength(2);
    expect(gw.logs.at(-1)).toMatchObject({ msg: 'shut down' });
    expect(gw.logs.at(-1)!.worker).toBeUndefined();
  }, 30_000);
});
