// Upstreams failing: refusing connections, resetting before answering, dying mid-response or
// stalling. The gateway answers 502 / 504 from the catalog where it still can, cuts the response
// where headers already went out, and other routes and its own endpoints are not affected.
import http from 'node:http';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startHoldingUpstream, type HoldingUpstream } from '../helpers/echoUpstream.js';
import { closeSql, describeWithServices, eventually, marker, startTwoGateways, testConfig, type TestGateway } from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { refusedPort } from '../helpers/ports.js';

describeWithServices('upstream failures', () => {
  let healthy: HoldingUpstream;
  let faulty: HoldingUpstream;
  let gw: TestGateway;
  // A second instance on the same config, as behind a load balancer (the no-retry check runs on both).
  let gw2: TestGateway;

  beforeAll(async () => {
    [healthy, faulty] = await Promise.all([startHoldingUpstream(), startHoldingUpstream()]);
    // Per-path faults: /reset/ drops the connection unanswered, /die/ sends half a body then dies,
    // /stall/ never answers. Everything else is echoed.
    const echo = faulty.handle!;
    faulty.handle = (req, res, body) => {
      const url = req.url ?? '';
      if (url.includes('/reset/')) { req.socket.destroy(); return true; }
      if (url.includes('/die/')) {
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '1000' });
        res.write('partial');
        setTimeout(() => req.socket.destroy(), 20);
        return true;
      }
      if (url.includes('/stall/')) return true;
      return echo(req, res, body);
    };
    [gw, gw2] = await startTwoGateways(testConfig({
      upstreams: {
        healthy: { url: healthy.url, timeout: '30s' },
        faulty: { url: faulty.url, timeout: '500ms' },
        refusing: { url: `http://127.0.0.1:${await refusedPort()}` },
      },
      routes: [
        { path: '/ok', upstream: 'healthy', auth: 'none' },
        { path: '/faulty', upstream: 'faulty', auth: 'none' },
        { path: '/refusing', upstream: 'refusing', auth: 'none' },
      ],
    }));
  });
  afterAll(async () => {
    await Promise.all([gw?.close(), gw2?.close()]);
    await Promise.all([healthy?.close(), faulty?.close()]);
    await closeSql();
  });

  it('502 when the upstream refuses the connection', async () => {
    const res = await gw.get('/refusing/x');
    expect(res.status).toBe(502);
    expect(res.json).toEqual({ error: 'Service en amont indisponible' });
    expect(res.headers['x-request-id']).toEqual(expect.any(String));
  });

  it('502 when the upstream resets the connection before answering, sent once and never retried', async () => {
    for (const instance of [gw, gw2]) {
      // A reset after the upstream read the request: it may have acted on it, so a resend could
      // run it twice. GET included: the gateway cannot know the upstream's GET is safe.
      for (const method of ['GET', 'POST', 'DELETE']) {
        const m = marker();
        const res = await instance.request(method, `/faulty/reset/${m}`, method === 'POST' ? { json: { a: 1 } } : {});
        expect(res.status, method).toBe(502);
        expect(res.json).toEqual({ error: 'Service en amont indisponible' });
        expect(faulty.count(m), `${method}: requests the upstream received`).toBe(1);
        expect(faulty.last(m)!.method).toBe(method);
      }
    }
  });

  it('504 when the upstream does not answer within its timeout', async () => {
    const res = await gw.request('POST', `/faulty/stall/${marker()}`, { json: { a: 1 } });
    expect(res.status).toBe(504);
    expect(res.json).toEqual({ error: 'Service en amont trop lent' });
  });

  it('cuts the response short when the upstream dies mid-body (never a fake complete answer)', async () => {
    const outcome = await new Promise<string>((resolve) => {
      const url = new URL(gw.url);
      http.get({ host: url.hostname, port: url.port, path: `/faulty/die/${marker()}`, agent: false }, (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (c: string) => { body += c; });
        res.on('end', () => resolve(`complete:${res.statusCode}:${body}`));
        res.on('error', () => resolve(`cut:${res.statusCode}:${body}`));
        res.on('aborted', () => resolve(`cut:${res.statusCode}:${body}`));
      }).on('error', () => resolve('cut:before headers'));
    });
    expect(outcome).toMatch(/^cut:/);
    // The gateway itself is fine and the same upstream still serves other requests.
    const m = marker();
    expect((await gw.get(`/faulty/${m}`)).status).toBe(200);
    expect(faulty.count(m)).toBe(1);
  });

  it('serves /healthz, /readyz and other routes while 100 requests are stalled on one upstream', async () => {
    const m = marker();
    const hold = healthy.hold(m);
    const stalled = Array.from({ length: 100 }, (_, i) => request(gw.url, 'GET', `/ok/${m}/${i}`, { timeout: 60_000 }));
    await eventually(() => hold.held() === 100, 20_000);

    let settled = 0;
    for (const p of stalled) void p.then(() => settled++, () => settled++);
    expect(await gw.get('/healthz')).toMatchObject({ status: 200, json: { status: 'ok' } });
    expect((await gw.get('/readyz')).status).toBe(200);
    expect((await gw.get('/refusing/x')).status).toBe(502);
    const other = marker();
    expect((await gw.get(`/faulty/${other}`)).status).toBe(200);
    // All of that was answered while every one of the 100 was still waiting.
    expect(settled).toBe(0);

    hold.release();
    const answers = await Promise.all(stalled);
    expect(answers.every((r) => r.status === 200)).toBe(true);
  });

  it('logs a failing upstream once per interval with a count, not once per request, and its recovery once', async () => {
    const failureLines = () => gw.logs.filter((l) => l.includes('"upstream":"refusing"') && l.includes('upstream failed'));
    const before = failureLines().length;
    const burst = await Promise.all(Array.from({ length: 50 }, () => gw.get('/refusing/x')));
    expect(burst.every((r) => r.status === 502)).toBe(true);
    // The first failure of the run was logged already (with its error); the 50 are counted.
    expect(before).toBeGreaterThanOrEqual(1);
    expect(failureLines().length - before).toBeLessThanOrEqual(1);
    // The faulty upstream failed above and answered since: said once, by name.
    const recovered = gw.logs.filter((l) => l.includes('upstream answers again'));
    expect(recovered.length).toBeGreaterThanOrEqual(1);
    expect(recovered.every((l) => l.includes('"upstream":"faulty"'))).toBe(true);
  });

  it('counts upstream failures in the metrics by upstream and kind', async () => {
    const metrics = await gw.services.metrics.registry.metrics();
    expect(metrics).toMatch(/gateway_upstream_errors_total\{upstream="refusing",kind="unavailable"\} [1-9]/);
    expect(metrics).toMatch(/gateway_upstream_errors_total\{upstream="faulty",kind="timeout"\} [1-9]/);
    expect(gw.logs.join('\n')).not.toContain('"statusCode":500');
  });
});
