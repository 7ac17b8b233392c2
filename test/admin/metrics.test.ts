// /metrics on the admin listener counts exactly what was answered: requests by route, method and
// status, their latency histogram by route, and guard decisions by outcome. The same series on
// every scrape (a scrape changes nothing), growing only with traffic.
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { bearer, closeSql, describeWithServices, makeUser, marker, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';
import { request } from '../helpers/http.js';

/** The Prometheus text as `series → value`, e.g. `gateway_requests_total{route="/open",method="GET",status="200"}`. */
function parse(text: string): Map<string, number> {
  const series = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    series.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return series;
}

describeWithServices('metrics', () => {
  let upstream: EchoUpstream;
  let gw: TestGateway;
  let admin: FastifyInstance;
  let adminUrl: string;

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    gw = await startTestGateway(testConfig({
      upstreams: { app: { url: upstream.url } },
      routes: [
        { path: '/open', upstream: 'app', auth: 'none' },
        { path: '/paid', upstream: 'app', auth: 'required', plans: ['pro'] },
      ],
    }));
    admin = await buildAdminApp(gw.services);
    adminUrl = await admin.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await admin?.close();
    await gw?.close();
    await upstream?.close();
    await closeSql();
  });

  const scrape = async () => {
    const res = await request(adminUrl, 'GET', '/metrics');
    expect(res.status).toBe(200);
    return parse(res.text);
  };

  it('counts every answer by route, method and status, its latency by route, and every guard decision', async () => {
    const m = marker();
    const free = await makeUser(gw);
    for (let i = 0; i < 3; i++) expect((await gw.get(`/open/${m}`)).status).toBe(200);
    for (let i = 0; i < 2; i++) expect((await gw.post(`/open/${m}`, { i })).status).toBe(200);
    for (let i = 0; i < 2; i++) expect((await gw.get(`/paid/${m}`)).status).toBe(401);
    expect((await gw.get(`/paid/${m}`, { headers: bearer(free.access) })).status).toBe(403);

    const first = await scrape();
    expect(first.get('gateway_requests_total{route="/open",method="GET",status="200"}')).toBe(3);
    expect(first.get('gateway_requests_total{route="/open",method="POST",status="200"}')).toBe(2);
    expect(first.get('gateway_requests_total{route="/paid",method="GET",status="401"}')).toBe(2);
    expect(first.get('gateway_requests_total{route="/paid",method="GET",status="403"}')).toBe(1);
    expect(first.get('gateway_guard_decisions_total{route="/open",outcome="allowed"}')).toBe(5);
    expect(first.get('gateway_guard_decisions_total{route="/paid",outcome="tokenInvalid"}')).toBe(2);
    expect(first.get('gateway_guard_decisions_total{route="/paid",outcome="planInsufficient"}')).toBe(1);

    // The histogram: cumulative buckets ending at the count, and a positive sum.
    const buckets = [...first].filter(([k]) => k.startsWith('gateway_request_duration_seconds_bucket{') && k.endsWith(',route="/open"}'));
    expect(buckets.map(([k]) => /le="([^"]+)"/.exec(k)![1])).toEqual(
      ['0.001', '0.0025', '0.005', '0.01', '0.025', '0.05', '0.1', '0.25', '0.5', '1', '2.5', '5', '10', '+Inf']);
    const counts = buckets.map(([, v]) => v);
    expect(counts).toEqual([...counts].sort((x, y) => x - y));
    expect(counts.at(-1)).toBe(5);
    expect(first.get('gateway_request_duration_seconds_count{route="/open"}')).toBe(5);
    expect(first.get('gateway_request_duration_seconds_sum{route="/open"}')).toBeGreaterThan(0);
    expect(first.get('gateway_request_duration_seconds_count{route="/paid"}')).toBe(3);

    // A scrape changes nothing; more traffic only adds to the totals.
    const again = await scrape();
    for (const [k, v] of first) if (/^gateway_(requests_total|guard_decisions_total|request_duration_seconds)/.test(k)) expect(again.get(k), k).toBe(v);
    expect((await gw.get(`/open/${m}`)).status).toBe(200);
    const after = await scrape();
    expect(after.get('gateway_requests_total{route="/open",method="GET",status="200"}')).toBe(4);
    expect(after.get('gateway_request_duration_seconds_count{route="/open"}')).toBe(6);
    expect(after.get('gateway_guard_decisions_total{route="/open",outcome="allowed"}')).toBe(6);
    expect(upstream.count(m)).toBe(6);
  });
});
