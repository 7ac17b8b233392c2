// deploy/monitoring (CONTRACT §28): the Prometheus alert rules pass `promtool check rules` and
// their unit tests (`promtool test rules`, Debian's prometheus package), each rule has a case that
// fires it, and every metric the rules and the Grafana dashboard name is one a live gateway's
// /metrics exports: the built CLI, started as an operator starts it, scraped on its metrics
// listener after some traffic.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ROOT } from '../helpers/cli.js';
import { docsBlock } from '../helpers/docs.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { closeSql, describeWithServices, ownRedisPrefix, TEST_JWT_SECRET, testServices, throwawayDatabase, type ThrowawayDatabase } from '../helpers/gateway.js';
import { spawnGateway, type GatewayProcess } from '../helpers/gatewayProcess.js';
import { request } from '../helpers/http.js';
import { sparePort } from '../helpers/ports.js';

const DIR = path.join(ROOT, 'deploy/monitoring');
const rules = parse(readFileSync(path.join(DIR, 'alerts.yaml'), 'utf8')) as { groups: Array<{ rules: Array<{ alert: string; expr: string }> }> };
const ruleList = rules.groups.flatMap((g) => g.rules);
const unitTests = parse(readFileSync(path.join(DIR, 'alerts.test.yaml'), 'utf8')) as { tests: Array<{ alert_rule_test: Array<{ alertname: string; exp_alerts?: unknown[] }> }> };
const dashboard = JSON.parse(readFileSync(path.join(DIR, 'grafana-dashboard.json'), 'utf8')) as { panels: Array<{ title: string; targets: Array<{ expr: string }> }> };

const installed = spawnSync('promtool', ['--version'], { stdio: 'ignore' }).status === 0;
if (!installed && process.env.REQUIRE_SERVICES === '1') throw new Error('REQUIRE_SERVICES=1 but promtool is not installed (Debian: apt-get install prometheus)');

// PromQL's words that are not metrics: aggregation modifiers and operators.
const KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'and', 'or', 'unless', 'bool', 'offset']);

/** The metric names a PromQL expression reads: not functions, labels, label values, ranges or keywords. */
export function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""') // label values
    .replace(/\{[^}]*\}/g, '') // matchers
    .replace(/\[[^\]]*\]/g, '') // ranges
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ''); // grouping labels
  return [...bare.matchAll(/(?<![\w$.])([A-Za-z_:][\w:]*)\b(?!\s*\()/g)].map((m) => m[1]!).filter((name) => !KEYWORDS.has(name));
}

describe('the PromQL reader of this file', () => {
  it('finds the metrics, and only them', () => {
    expect(metricNames('histogram_quantile(0.99, sum by (le, route) (rate(gateway_request_duration_seconds_bucket{job=~"$job"}[$__rate_interval]))) > 1'))
      .toEqual(['gateway_request_duration_seconds_bucket']);
    expect(metricNames('time() - max(gateway_billing_meter_last_report_timestamp_seconds > 0) > 600 and on () up{job="x"} == 0'))
      .toEqual(['gateway_billing_meter_last_report_timestamp_seconds', 'up']);
  });
});

describe.runIf(installed)('deploy/monitoring/alerts.yaml with promtool, as docs/operating.md runs it', () => {
  const [check, test] = docsBlock('operating', 'promtool').trim().split('\n').map((line) => line.split(' '));

  it('passes promtool check rules', () => {
    expect(check).toEqual(['promtool', 'check', 'rules', 'deploy/monitoring/alerts.yaml']);
    const checked = spawnSync(check![0]!, check!.slice(1), { cwd: ROOT, encoding: 'utf8' });
    expect(checked.stderr).toBe('');
    expect(checked.stdout).toContain(`SUCCESS: ${ruleList.length} rules found`);
    expect(checked.status).toBe(0);
  });

  it('passes its unit tests, promtool test rules', () => {
    expect(test).toEqual(['promtool', 'test', 'rules', 'deploy/monitoring/alerts.test.yaml']);
    const tested = spawnSync(test![0]!, test!.slice(1), { cwd: ROOT, encoding: 'utf8' });
    expect(tested.stdout + tested.stderr).toContain('SUCCESS');
    expect(tested.status, tested.stdout + tested.stderr).toBe(0);
  });
});

describe('deploy/monitoring, what it covers', () => {
  it('alerts on what CONTRACT §28 lists, each rule fired by a unit test', () => {
    expect(ruleList.map((r) => r.alert)).toEqual([
      'GatewayInstanceDown', 'GatewayHighErrorRatio', 'GatewayHighLatency', 'GatewayPostgresUnavailable', 'GatewayRedisDown',
      'GatewayOutboxBacklog', 'GatewayDeliveriesFailing', 'GatewayHookUndelivered', 'GatewayBillingReporterLag', 'GatewayCertificateExpiresSoon',
    ]);
    const fired = new Set(unitTests.tests.flatMap((t) => t.alert_rule_test.filter((c) => c.exp_alerts?.length).map((c) => c.alertname)));
    expect([...fired].sort()).toEqual(ruleList.map((r) => r.alert).sort());
  });
});

describeWithServices('the metrics deploy/monitoring names, against a live /metrics', () => {
  let upstream: EchoUpstream;
  let db: ThrowawayDatabase;
  let gw: GatewayProcess;
  const token = 'monitoring-test-token-0123456789';
  let metricsUrl: string;

  beforeAll(async () => {
    [upstream, db] = await Promise.all([startEchoUpstream(), throwawayDatabase()]);
    const port = await sparePort();
    metricsUrl = `http://127.0.0.1:${port}`;
    gw = await spawnGateway([
      'server: { host: 127.0.0.1, port: 0 }',
      `storage: ${JSON.stringify({ postgres: db.url, redis: testServices!.redis, redisKeyPrefix: ownRedisPrefix('monitoring') })}`,
      `auth: { jwt: { secret: "${TEST_JWT_SECRET}" } }`,
      'admin: { port: 0 }',
      `metrics: { host: 127.0.0.1, port: ${port}, token: ${token} }`,
      `upstreams: { app: { url: "${upstream.url}" } }`,
      'routes: [{ path: /open, upstream: app, auth: none }, { path: /guarded, upstream: app, auth: required }]',
    ].join('\n'), { startTimeoutMs: 60_000 });
  }, 90_000);
  afterAll(async () => {
    await gw?.stop();
    await upstream?.close();
    await db?.drop();
    await closeSql();
  });

  it('exports every metric the alert rules and the dashboard query', async () => {
    expect((await request(gw.url, 'GET', '/open/x')).status).toBe(200);
    expect((await request(gw.url, 'GET', '/guarded/x')).status).toBe(401);
    expect((await request(gw.url, 'GET', '/nowhere')).status).toBe(404);
    const scraped = await request(metricsUrl, 'GET', '/metrics', { headers: { authorization: `Bearer ${token}` } });
    expect(scraped.status).toBe(200);
    expect(scraped.text).toContain('\ngateway_storage_up{store="postgres"} 1\ngateway_storage_up{store="redis"} 1\n');
    // A metric is exported when the scrape declares it; a histogram's series are its _bucket, _sum and _count.
    const types = new Map([...scraped.text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
    const exported = (name: string) => types.has(name) || types.get(name.replace(/_(bucket|sum|count)$/, '')) === 'histogram';
    const queries = [
      ...ruleList.map((r) => ({ where: `alerts.yaml ${r.alert}`, expr: r.expr })),
      ...dashboard.panels.flatMap((p) => p.targets.map((t) => ({ where: `dashboard "${p.title}"`, expr: t.expr }))),
    ];
    expect(dashboard.panels.length).toBeGreaterThan(10);
    for (const { where, expr } of queries) {
      const names = metricNames(expr);
      expect(names.length, `${where}: ${expr}`).toBeGreaterThan(0);
      // `up` is Prometheus' own, one per scraped target.
      for (const name of names) if (name !== 'up') expect(exported(name), `${where} names ${name}, which /metrics does not export`).toBe(true);
    }
  });
});
