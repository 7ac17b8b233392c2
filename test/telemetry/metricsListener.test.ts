// The metrics listener (CONTRACT §28): metrics.host:metrics.port serves /metrics alone, so that a
// cluster's Prometheus scrapes it while the admin listener stays on loopback; with metrics.token a
// scrape needs that bearer token (401 from the catalog otherwise). No series carries a user, an
// organization, a key, an email or an address as a label: routes, methods, plans, statuses and
// outcomes only, checked here on every label of a scrape taken after traffic of every kind.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkWarnings } from '../../src/cli/check.js';
import { withEnvironment } from '../../src/config/environment.js';
import { HTTP_METHODS } from '../../src/config/schema.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { bearer, closeSql, configProblems, describeWithServices, makeUser, marker, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { sparePort } from '../helpers/ports.js';

const TOKEN = 'scrape-token-0123456789abcdef';

/** Each series of a Prometheus text as its name and labels (the label values unescaped). */
export function seriesOf(text: string): Array<{ name: string; labels: Record<string, string> }> {
  return text.split('\n').filter((line) => line && !line.startsWith('#')).map((line) => {
    const open = line.indexOf('{');
    const name = open === -1 ? line.slice(0, line.indexOf(' ')) : line.slice(0, open);
    const labels: Record<string, string> = {};
    if (open !== -1) {
      for (const m of line.slice(open, line.lastIndexOf('}')).matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[m[1]!] = JSON.parse(`"${m[2]!}"`) as string;
    }
    return { name, labels };
  });
}

describe('metrics in the configuration', () => {
  it('is off by default; METRICS_HOST, METRICS_PORT and METRICS_TOKEN set it', () => {
    expect(testConfig().metrics).toEqual({ host: '127.0.0.1', port: 0 });
    const { raw, problems } = withEnvironment({}, { METRICS_HOST: '0.0.0.0', METRICS_PORT: '9464', METRICS_TOKEN: TOKEN });
    expect(problems).toEqual([]);
    expect(raw).toEqual({ metrics: { host: '0.0.0.0', port: 9464, token: TOKEN } });
    expect(withEnvironment({}, { METRICS_PORT: 'nine' }).problems).toEqual(['METRICS_PORT: expected a port number, got "nine"']);
  });

  it('refuses a token shorter than 16 characters; an empty one is none', () => {
    expect(configProblems('metrics: { port: 9464, token: short }')).toEqual(['metrics.token: expected at least 16 characters (for example `openssl rand -base64 32`), or empty for none']);
    expect(configProblems('metrics: { port: 9464, token: "" }')).toEqual([]);
    expect(testConfig({ metrics: { port: 9464, token: '' } }).metrics.token).toBeUndefined();
  });

  it('gateway check warns for a listener off loopback without a token, and only then', () => {
    const warned = (metrics: object) => checkWarnings(testConfig({ metrics })).filter((w) => w.startsWith('metrics.'));
    expect(warned({ host: '0.0.0.0', port: 9464 })).toEqual([
      'metrics.host: 0.0.0.0 is not loopback and metrics.token is not set: anyone who reaches port 9464 reads /metrics; '
      + 'set metrics.token (METRICS_TOKEN) and give it to Prometheus as its bearer token, or keep the port on a network only Prometheus reaches',
    ]);
    expect(warned({ host: '0.0.0.0', port: 9464, token: TOKEN })).toEqual([]);
    expect(warned({ host: '127.0.0.1', port: 9464 })).toEqual([]);
    expect(warned({ host: '::1', port: 9464 })).toEqual([]);
    expect(warned({ host: '0.0.0.0', port: 0 })).toEqual([]);
  });
});

describeWithServices('the metrics listener', () => {
  let upstream: EchoUpstream;
  let open: TestGateway;
  let guarded: TestGateway;
  const routes = [
    { path: '/open', upstream: 'app', auth: 'none' },
    { path: '/paid', upstream: 'app', auth: 'required', plans: ['pro'], dailyLimit: true },
  ];

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    const [a, b] = await Promise.all([sparePort(), sparePort()]);
    const config = (metrics: object) => testConfig({ metrics, upstreams: { app: { url: upstream.url } }, routes, apiKeys: { plans: 'all' } });
    open = await startTestGateway(config({ host: '127.0.0.1', port: a }));
    guarded = await startTestGateway(config({ host: '127.0.0.1', port: b, token: TOKEN }));
  });
  afterAll(async () => {
    await open?.close();
    await guarded?.close();
    await upstream?.close();
    await closeSql();
  });

  it('serves /metrics alone, the admin listener\'s series, on its own port', async () => {
    expect(open.metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect((await open.get(`/open/${marker()}`)).status).toBe(200);
    const res = await request(open.metricsUrl!, 'GET', '/metrics');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
    expect(res.text).toMatch(/^gateway_requests_total\{route="\/open",method="GET",status="200"\} [1-9]/m);
    // Nothing else: no admin API, no health, no console, no OpenAPI document.
    for (const path of ['/admin/v1/users', '/readyz', '/healthz', '/console/', '/openapi.json', '/api/v1/auth/login']) {
      const other = await request(open.metricsUrl!, 'GET', path);
      expect(other.status, path).toBe(404);
      expect(other.json, path).toEqual({ error: 'Route introuvable' });
    }
  });

  it('with metrics.token, a scrape needs it as a bearer token: else 401 from the catalog', async () => {
    const url = guarded.metricsUrl!;
    for (const authorization of [undefined, 'Bearer wrong-token-0123456789abc', `Bearer ${TOKEN}x`, `Basic ${TOKEN}`, TOKEN, 'Bearer ']) {
      const res = await request(url, 'GET', '/metrics', { headers: authorization === undefined ? {} : { authorization } });
      expect(res.status, authorization).toBe(401);
      expect(res.json, authorization).toEqual({ error: 'Jeton de métriques invalide' });
      expect(res.headers['www-authenticate']).toBe('Bearer realm="gateway-metrics"');
      expect(res.text).not.toContain('gateway_');
    }
    const res = await request(url, 'GET', '/metrics', { headers: bearer(TOKEN) });
    expect(res.status).toBe(200);
    expect(res.text).toContain('# TYPE gateway_requests_total counter');
  });

  it('says what the alert rules read: Postgres and Redis up, the outbox\'s oldest pending message', async () => {
    const text = (await request(guarded.metricsUrl!, 'GET', '/metrics', { headers: bearer(TOKEN) })).text;
    expect(text).toContain('\ngateway_storage_up{store="postgres"} 1\n');
    expect(text).toContain('\ngateway_storage_up{store="redis"} 1\n');
    // The outbox is the run's shared database's: what other files left pending is counted too.
    expect(Number(/^gateway_outbox_oldest_pending_seconds (\S+)$/m.exec(text)?.[1])).toBeGreaterThanOrEqual(0);
    // No TLS: no certificate; no billing: no pass (0, which the lag alert leaves alone).
    expect(text).not.toMatch(/^gateway_tls_certificate_expiry_timestamp_seconds/m);
    expect(text).toContain('\ngateway_billing_meter_last_report_timestamp_seconds 0\n');
  });

  it('no label carries a user, an organization, a key, an email or an address, after traffic of every kind', async () => {
    const user = await makeUser(guarded, { plan: 'pro' });
    const free = await makeUser(guarded);
    const key = (await guarded.post('/api/v1/user/api-keys', { name: 'scraped' }, { headers: bearer(user.access) })).json.key as string;
    expect(key).toBeTruthy();
    const m = marker();
    const traffic = [
      guarded.get(`/paid/${m}`, { headers: bearer(user.access) }),
      guarded.get(`/paid/${m}`, { headers: { 'x-api-key': key } }),
      guarded.get(`/paid/${m}`, { headers: bearer(free.access) }),
      guarded.get(`/paid/${encodeURIComponent(user.email)}`, { headers: bearer('not.a.token') }),
      guarded.get(`/open/${encodeURIComponent(user.email)}/${user.id}`),
      guarded.get(`/nowhere/${encodeURIComponent(user.email)}`),
      guarded.get('/api/v1/user/me', { headers: bearer(user.access) }),
      guarded.post('/api/v1/auth/login', { email: user.email, password: 'wrong-password' }),
    ];
    expect((await Promise.all(traffic)).map((r) => r.status)).toEqual([200, 200, 403, 401, 200, 404, 200, 401]);

    const text = (await request(guarded.metricsUrl!, 'GET', '/metrics', { headers: bearer(TOKEN) })).text;
    const secrets = [user.email, free.email, key, key.slice(0, 12), user.access, '127.0.0.1', m];
    const allowed: Record<string, (value: string) => boolean> = {
      // A configured route, an own endpoint, or fastify's catch-all for what matched none.
      route: (v) => v === 'unmatched' || (v.startsWith('/') && !v.includes('@')),
      method: (v) => (HTTP_METHODS as readonly string[]).includes(v),
      status: (v) => /^[1-5]\d\d$/.test(v),
      plan: (v) => ['free', 'pro', 'enterprise'].includes(v),
      upstream: (v) => v === 'app',
      // Words of the gateway's own: outcomes, results, kinds, limits; the build's and Node's versions; GC and heap kinds.
      ...Object.fromEntries(['outcome', 'result', 'kind', 'limit', 'space', 'type'].map((name) => [name, (v: string) => /^[a-z][A-Za-z_]*$/.test(v)])),
      version: (v) => /^v?\d+\.\d+\.\d+/.test(v),
      node: (v) => /^\d+\.\d+\.\d+/.test(v),
      le: (v) => v === '+Inf' || Number.isFinite(Number(v)),
      major: (v) => /^\d+$/.test(v), minor: (v) => /^\d+$/.test(v), patch: (v) => /^\d+$/.test(v),
      listener: (v) => ['public', 'admin'].includes(v),
      store: (v) => ['postgres', 'redis'].includes(v),
    };
    const series = seriesOf(text);
    expect(series.length).toBeGreaterThan(20);
    const routesSeen = new Set(series.flatMap((s) => s.labels.route ?? []));
    expect([...routesSeen]).toEqual(expect.arrayContaining(['/paid', '/open', '/*', '/api/v1/user/me', '/api/v1/auth/login']));
    for (const { name, labels } of series) {
      for (const [label, value] of Object.entries(labels)) {
        expect(allowed[label], `${name}: label ${label} is none of routes, methods, plans, statuses and outcomes`).toBeDefined();
        expect(allowed[label]!(value), `${name}{${label}="${value}"}`).toBe(true);
        for (const secret of secrets) expect(value.includes(secret), `${name}{${label}="${value}"} carries ${secret}`).toBe(false);
      }
    }
  });
});
