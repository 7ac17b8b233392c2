// Traces (issue 31, CONTRACT §17) as a collector sees them: an OTLP/HTTP receiver started here
// takes the gateway's exports. A request is a server span named after its route, with the
// pipeline's stages and the upstream call as children; the upstream gets the upstream span's
// traceparent; an incoming trace is continued, its sampling flag trusted only when configured; no
// credential, email or query string in any attribute; a collector that is down costs requests
// nothing and its drops are counted in /metrics.
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { tracingSettings } from '../../src/telemetry/tracing.js';
import { docsExample } from '../helpers/docs.js';
import WebSocket from 'ws';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { startWsUpstream, type WsUpstream } from '../helpers/wsUpstream.js';
import {
  bearer, closeSql, configProblems, describeWithServices, eventually, makeUser, marker, startDecidingGateway, startTestGateway, testClock, testConfig, throwawayDatabase,
  type TestGateway,
} from '../helpers/gateway.js';
import { startReceiver, verifiedEvent } from '../helpers/webhookReceiver.js';
import { startCollector, type OtlpSpan } from '../helpers/otlp.js';
import { sparePort } from '../helpers/ports.js';

const attr = (span: OtlpSpan, key: string) => {
  const value = span.attributes.find((a) => a.key === key)?.value;
  return value === undefined ? undefined : (value.stringValue ?? (value.intValue === undefined ? value.boolValue : Number(value.intValue)));
};

describe('telemetry settings', () => {
  it('the YAML wins; the OTEL_* variables fill what it leaves unset; no endpoint, no tracing', () => {
    const yaml = { trustIncoming: false };
    expect(tracingSettings(yaml, {})).toBeUndefined();
    expect(tracingSettings(yaml, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/', OTEL_SERVICE_NAME: 'edge', OTEL_TRACES_SAMPLER_ARG: '0.25' }))
      .toEqual({ endpoint: 'http://collector:4318', serviceName: 'edge', sampleRatio: 0.25, trustIncoming: false, protocol: 'http/protobuf' });
    expect(tracingSettings({ ...yaml, endpoint: 'http://mine:4318', serviceName: 'gw', sampleRatio: 1, protocol: 'http/json' }, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SERVICE_NAME: 'edge', OTEL_TRACES_SAMPLER_ARG: '0.25', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' }))
      .toEqual({ endpoint: 'http://mine:4318', serviceName: 'gw', sampleRatio: 1, trustIncoming: false, protocol: 'http/json' });
    // The protocol: the traces variable first, then the general one; grpc is not spoken here.
    const protocol = (env: Record<string, string>) => tracingSettings(yaml, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', ...env })?.protocol;
    expect(protocol({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' })).toBe('http/json');
    expect(protocol({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' })).toBe('http/protobuf');
    expect(protocol({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toBe('http/protobuf');
    expect(tracingSettings(yaml, { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces' })?.endpoint).toBe('http://c:4318');
    expect(tracingSettings(yaml, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' })).toBeUndefined();
  });

  it('docs/tracing.md\'s example: off without OTEL_EXPORTER_OTLP_ENDPOINT, on with it', () => {
    const example = docsExample('tracing', 'tracing');
    expect(tracingSettings(parseConfig(example, 'docs/tracing.md', {}).telemetry.otlp, {})).toBeUndefined();
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };
    expect(tracingSettings(parseConfig(example, 'docs/tracing.md', env).telemetry.otlp, env))
      .toEqual({ endpoint: 'http://collector:4318', serviceName: 'auth-gateway', sampleRatio: 1, trustIncoming: false, protocol: 'http/protobuf' });
  });

  it('gateway check reads telemetry.otlp as CONTRACT §17 writes it, and refuses what it cannot use', () => {
    expect(configProblems('telemetry:\n  otlp:\n    endpoint: "http://127.0.0.1:4318"\n    serviceName: auth-gateway\n    sampleRatio: 1\n    trustIncoming: false\n')).toEqual([]);
    expect(configProblems('telemetry: { otlp: { endpoint: "" } }')).toEqual([]);
    expect(configProblems('telemetry: { otlp: { sampleRatio: "0.5" } }')).toEqual([]);
    expect(configProblems('telemetry: { otlp: { sampleRatio: 2 } }')[0]).toMatch(/^telemetry\.otlp\.sampleRatio: /);
    expect(configProblems('telemetry: { otlp: { endpoint: "collector:4318" } }')[0]).toMatch(/^telemetry\.otlp\.endpoint: expected an http:\/\/ or https:\/\/ URL/);
  });
});

describeWithServices('traces over OTLP/HTTP', () => {
  let collector: Awaited<ReturnType<typeof startCollector>>;
  let upstream: EchoUpstream;
  let wsUpstream: WsUpstream;
  let gw: TestGateway;
  const routes = () => [
    { path: '/traced', upstream: 'app', auth: 'required', plans: ['free', 'pro'], dailyLimit: true },
    { path: '/open', upstream: 'app', auth: 'none' },
    { path: '/metered', upstream: 'app', auth: 'required', rateLimit: true, dailyLimit: true },
    { path: '/live', upstream: 'live', auth: 'required', websocket: true },
  ];
  const config = (otlp: object) => testConfig({
    plans: { limits: { free: { daily: 1000, perMinute: 1000 } } }, telemetry: { otlp }, upstreams: { app: { url: upstream.url }, live: { url: wsUpstream.url } }, routes: routes(),
  });
  const traceOf = (traceId: string) => collector.spans.filter((s) => s.traceId === traceId);

  beforeAll(async () => {
    [collector, upstream, wsUpstream] = await Promise.all([startCollector(), startEchoUpstream(), startWsUpstream()]);
    gw = await startTestGateway(config({ endpoint: collector.url, serviceName: 'gateway-under-test' }));
  });
  afterAll(async () => {
    await gw?.close();
    await Promise.all([collector?.close(), upstream?.close(), wsUpstream?.close()]);
    await closeSql();
  });

  it('a request: a server span named after its route, its stages and the upstream call as children, the upstream told the trace', async () => {
    const user = await makeUser(gw);
    const m = marker();
    const res = await gw.get(`/traced/${m}?secret_query=${m}`, { headers: bearer(user.access) });
    expect(res.status).toBe(200);
    const traceparent = String(upstream.last(m)!.headers.traceparent);
    const [, traceId, parentId, flags] = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(traceparent)!;
    expect(flags).toBe('01');
    // By name, not by count: a stage's storage calls are spans too, and the server span ends last (it may come in a later export).
    const expected = ['GET /traced', 'gateway.authenticate', 'gateway.daily_limit', 'gateway.plan', 'upstream'];
    await eventually(() => expected.every((name) => traceOf(traceId!).some((s) => s.name === name)), 5000);
    const spans = traceOf(traceId!);
    const server = spans.find((s) => s.name === 'GET /traced')!;
    expect(server.kind).toBe(2); // SERVER
    expect(server.parentSpanId ?? '').toBe('');
    expect({
      method: attr(server, 'http.request.method'), status: attr(server, 'http.response.status_code'), path: attr(server, 'url.path'),
      route: attr(server, 'http.route'), gatewayRoute: attr(server, 'gateway.route'), decision: attr(server, 'gateway.decision'), user: attr(server, 'enduser.id'),
    }).toEqual({ method: 'GET', status: 200, path: `/traced/${m}`, route: '/traced', gatewayRoute: '/traced', decision: 'allow', user: String(user.id) });
    const children = spans.filter((s) => s.parentSpanId === server.spanId).map((s) => s.name).sort();
    expect(children).toEqual(['gateway.authenticate', 'gateway.daily_limit', 'gateway.plan', 'upstream']);
    // Each stage's outcome: authenticate says how the caller came in, the others that they let it on.
    const outcomes = Object.fromEntries(spans.filter((s) => s.parentSpanId === server.spanId && s.name !== 'upstream').map((s) => [s.name, attr(s, 'gateway.outcome')]));
    expect(outcomes).toEqual({ 'gateway.authenticate': 'authenticated', 'gateway.daily_limit': 'allow', 'gateway.plan': 'allow' });
    const call = spans.find((s) => s.name === 'upstream')!;
    expect(call.kind).toBe(3); // CLIENT
    expect(call.spanId).toBe(parentId);
    // Neither the token nor the email nor the query string is in anything exported.
    const exported = collector.bodies.join('\n');
    for (const secret of [user.access, user.email, 'secret_query']) expect(exported).not.toContain(secret);
    expect(exported).toContain('gateway-under-test');
  });

  it('exports protobuf by default (OTLP\'s default), JSON with protocol: http/json, the same spans either way', async () => {
    expect(collector.contentTypes.length).toBeGreaterThan(0);
    expect(new Set(collector.contentTypes)).toEqual(new Set(['application/x-protobuf']));
    const json = await startTestGateway(config({ endpoint: collector.url, protocol: 'http/json' }));
    try {
      const traceId = 'd4'.padStart(32, '0');
      expect((await json.get(`/open/${marker()}`, { headers: { traceparent: `00-${traceId}-${'3'.repeat(16)}-01` } })).status).toBe(200);
      await eventually(() => traceOf(traceId).length >= 2, 5000);
      expect(collector.contentTypes).toContain('application/json');
      expect(traceOf(traceId).map((s) => s.name).sort()).toEqual(['GET /open', 'upstream']);
    } finally {
      await json.close();
    }
  });

  it('a stage\'s Redis and Postgres calls are its children, named as OpenTelemetry names database calls', async () => {
    const user = await makeUser(gw);
    gw.services.identities.forgetUser(user.id); // the lookup a cache miss makes, traced
    const m = marker();
    expect((await gw.get(`/metered/${m}`, { headers: bearer(user.access) })).status).toBe(200);
    const [, traceId] = /^00-([0-9a-f]{32})-/.exec(String(upstream.last(m)!.headers.traceparent))!;
    await eventually(() => traceOf(traceId!).length >= 8, 5000);
    const spans = traceOf(traceId!);
    const under = (stage: string) => {
      const parent = spans.find((s) => s.name === stage)!;
      return spans.filter((s) => s.parentSpanId === parent.spanId)
        .map((s) => ({ name: s.name, kind: s.kind, system: attr(s, 'db.system.name'), operation: attr(s, 'db.operation.name'), table: attr(s, 'db.collection.name') }));
    };
    expect(under('gateway.authenticate')).toEqual([{ name: 'SELECT users', kind: 3, system: 'postgresql', operation: 'SELECT', table: 'users' }]);
    expect(under('gateway.per_minute_limit')).toEqual([{ name: 'EVALSHA', kind: 3, system: 'redis', operation: 'EVALSHA', table: undefined }]);
    // A first use of the day: the Redis gate, then a block of uses reserved in Postgres.
    expect(under('gateway.daily_limit')).toEqual([
      { name: 'EVAL', kind: 3, system: 'redis', operation: 'EVAL', table: undefined },
      { name: 'UPDATE users', kind: 3, system: 'postgresql', operation: 'UPDATE', table: 'users' },
    ]);
  });

  it('a webhook message continues the trace of the request that caused it: the attempt is a client span, the receiver gets its traceparent', async () => {
    const db = await throwawayDatabase({ migrated: true });
    const receiver = await startReceiver();
    const own = await startTestGateway(testConfig({ storage: db.storage, telemetry: { otlp: { endpoint: collector.url } } }));
    try {
      const user = await makeUser(own, { plan: 'pro' });
      const traceId = 'e5'.padStart(32, '0');
      const res = await own.post('/api/v1/user/webhook', { url: receiver.url }, { headers: { ...bearer(user.access), traceparent: `00-${traceId}-${'4'.repeat(16)}-01` } });
      expect(res.status).toBe(201);
      await verifiedEvent(receiver, '/hook', 'webhook.test', res.json.secret);
      const delivered = String(receiver.ofType('webhook.test')[0]!.headers.traceparent);
      const [, deliveredTrace, attemptSpan] = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(delivered)!;
      expect(deliveredTrace).toBe(traceId);
      await eventually(() => traceOf(traceId).some((s) => s.spanId === attemptSpan), 5000);
      const request = traceOf(traceId).find((s) => s.name === 'POST /api/v1/user/webhook')!;
      const attempt = traceOf(traceId).find((s) => s.spanId === attemptSpan)!;
      expect({ name: attempt.name, kind: attempt.kind, parent: attempt.parentSpanId, type: attr(attempt, 'gateway.webhook.type'), status: attr(attempt, 'http.response.status_code') })
        .toEqual({ name: 'POST webhook', kind: 3, parent: request.spanId, type: 'webhook.test', status: 200 });
      expect(await db.sql('SELECT traceparent FROM webhook_deliveries WHERE user_id = $1', [user.id])).toEqual([{ traceparent: `00-${traceId}-${request.spanId}-01` }]);
    } finally {
      await own.close();
      await receiver.close();
      await db.drop();
    }
  });

  it('a denial: the span says which, and so does the stage that refused; nothing is called upstream', async () => {
    const m = marker();
    const traceId = 'f6'.padStart(32, '0');
    const res = await gw.get(`/traced/${m}`, { headers: { traceparent: `00-${traceId}-${'5'.repeat(16)}-01` } });
    expect(res.status).toBe(401);
    await eventually(() => collector.spans.some((s) => s.name === 'GET /traced' && attr(s, 'gateway.decision') === 'tokenInvalid'), 5000);
    await eventually(() => traceOf(traceId).some((s) => s.name === 'gateway.authenticate'), 5000);
    // No credential is told as an invalid one (telemetryName), and no stage after the refusal ran.
    expect(traceOf(traceId).filter((s) => s.name.startsWith('gateway.')).map((s) => [s.name, attr(s, 'gateway.outcome')])).toEqual([['gateway.authenticate', 'tokenInvalid']]);
    expect(upstream.count(m)).toBe(0);
  });

  it('a decision for a proxy: a span named after the route asked about, its stages as children, the proxy\'s trace continued', async () => {
    const deciding = await startDecidingGateway({
      plans: { limits: { free: { daily: 1000 } } }, telemetry: { otlp: { endpoint: collector.url } },
      upstreams: { app: { url: upstream.url }, live: { url: wsUpstream.url } }, routes: routes(),
    });
    try {
      const user = await makeUser(deciding);
      const m = marker();
      const traceId = 'c3'.padStart(32, '0');
      const proxySpan = '2'.repeat(16);
      const allowed = await deciding.decide('GET', `/decisions/traced/${m}?q=${m}`, { headers: { ...bearer(user.access), traceparent: `00-${traceId}-${proxySpan}-01` } });
      expect(allowed.status).toBe(200);
      expect((await deciding.decide('GET', `/decisions/traced/${m}`)).status).toBe(401);
      const decided = (s: (typeof collector.spans)[number]) =>
        s.name === 'GET /traced' && attr(s, 'gateway.decision') === 'tokenInvalid' && String(attr(s, 'url.path')).startsWith('/decisions/');
      await eventually(() => traceOf(traceId).length >= 4 && collector.spans.some(decided), 5000);
      const span = traceOf(traceId).find((s) => s.name === 'GET /traced')!;
      expect(span.kind).toBe(2); // SERVER
      expect(span.parentSpanId).toBe(proxySpan);
      expect({ path: attr(span, 'url.path'), decision: attr(span, 'gateway.decision'), user: attr(span, 'enduser.id'), status: attr(span, 'http.response.status_code') })
        .toEqual({ path: `/decisions/traced/${m}`, decision: 'allow', user: String(user.id), status: 200 });
      expect(traceOf(traceId).filter((s) => s.parentSpanId === span.spanId).map((s) => s.name).sort()).toEqual(['gateway.authenticate', 'gateway.daily_limit', 'gateway.plan']);
      expect(upstream.count(m)).toBe(0);
    } finally {
      await deciding.close();
    }
  });

  it('a WebSocket upgrade: the handshake with the upstream is the upstream span, and carries its traceparent and the client\'s tracestate', async () => {
    const user = await makeUser(gw);
    const traceId = 'e5'.padStart(32, '0');
    const m = marker();
    const socket = new WebSocket(`${gw.url.replace(/^http/, 'ws')}/live/${m}`, {
      headers: { ...bearer(user.access), traceparent: `00-${traceId}-${'2'.repeat(16)}-01`, tracestate: 'vendor=opaque' },
    });
    await new Promise<void>((resolve, reject) => { socket.once('open', () => resolve()); socket.once('error', reject); });
    socket.close();
    const handshake = wsUpstream.last(m)!;
    const [, seenTrace, parentId] = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(String(handshake.headers.traceparent))!;
    expect(seenTrace).toBe(traceId);
    expect(handshake.headers.tracestate).toBe('vendor=opaque');
    await eventually(() => traceOf(traceId).some((s) => s.name === 'GET /live') && traceOf(traceId).some((s) => s.name === 'upstream'), 5000);
    const server = traceOf(traceId).find((s) => s.name === 'GET /live')!;
    const call = traceOf(traceId).find((s) => s.name === 'upstream')!;
    expect([call.spanId, call.parentSpanId, call.kind]).toEqual([parentId, server.spanId, 3]);
    expect([attr(server, 'http.response.status_code'), attr(server, 'gateway.decision'), attr(server, 'enduser.id')]).toEqual([101, 'allow', String(user.id)]);
    expect(collector.bodies.join('\n')).not.toContain(user.access);
  });

  it('a plain request passes the client\'s tracestate on with the gateway\'s traceparent; an API key or Basic credentials are never exported', async () => {
    const m = marker();
    const key = `gw_${'k'.repeat(43)}`;
    const basic = `Basic ${Buffer.from(`someone:${m}-password`).toString('base64')}`;
    const traceId = 'f6'.padStart(32, '0');
    const res = await gw.get(`/open/${m}`, { headers: { 'x-api-key': key, authorization: basic, traceparent: `00-${traceId}-${'4'.repeat(16)}-01`, tracestate: 'a=1,b=2' } });
    expect(res.status).toBe(200);
    expect(upstream.last(m)!.headers.tracestate).toBe('a=1,b=2');
    expect(String(upstream.last(m)!.headers.traceparent)).toMatch(new RegExp(`^00-${traceId}-(?!4{16})[0-9a-f]{16}-01$`));
    await eventually(() => traceOf(traceId).length >= 2, 5000);
    const exported = collector.bodies.join('\n');
    for (const secret of [key, basic, `${m}-password`, Buffer.from(`someone:${m}-password`).toString('base64')]) expect(exported).not.toContain(secret);
  });

  it('a malformed traceparent starts a new trace, and its tracestate, which belongs to no trace now, is not passed on', async () => {
    for (const traceparent of [`00-${'0'.repeat(32)}-${'4'.repeat(16)}-01`, '00-not-a-trace-01', `00-${'ab'.repeat(16)}-${'0'.repeat(16)}-01`]) {
      const m = marker();
      const res = await gw.get(`/open/${m}`, { headers: { traceparent, tracestate: 'vendor=stale' } });
      expect(res.status).toBe(200);
      const sent = upstream.last(m)!.headers;
      expect(String(sent.traceparent)).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
      expect(sent.traceparent).not.toContain('abababab');
      expect(sent.tracestate).toBeUndefined();
    }
  });

  it('continues an incoming trace; its sampled flag decides only with trustIncoming', async () => {
    const incoming = (traceId: string) => ({ traceparent: `00-${traceId}-${'1'.repeat(16)}-01` });
    const id = (n: number) => n.toString(16).padStart(32, '0');
    const [never, trusting] = await Promise.all([
      startTestGateway(config({ endpoint: collector.url, sampleRatio: 0 })),
      startTestGateway(config({ endpoint: collector.url, sampleRatio: 0, trustIncoming: true })),
    ]);
    try {
      const a = marker();
      const b = marker();
      expect((await never.get(`/open/${a}`, { headers: incoming(id(0xa1)) })).status).toBe(200);
      expect((await trusting.get(`/open/${b}`, { headers: incoming(id(0xb2)) })).status).toBe(200);
      // The trace id is continued either way: the upstream sees it.
      expect(String(upstream.last(a)!.headers.traceparent)).toMatch(new RegExp(`^00-${id(0xa1)}-[0-9a-f]{16}-00$`));
      expect(String(upstream.last(b)!.headers.traceparent)).toMatch(new RegExp(`^00-${id(0xb2)}-[0-9a-f]{16}-01$`));
      await eventually(() => traceOf(id(0xb2)).length >= 2, 5000);
      expect(traceOf(id(0xb2)).find((s) => s.name === 'GET /open')!.parentSpanId).toBe('1'.repeat(16));
      await new Promise((resolve) => setTimeout(resolve, 1500)); // past an export interval
      expect(traceOf(id(0xa1))).toEqual([]);
    } finally {
      await Promise.all([never.close(), trusting.close()]);
    }
  });

  it('a collector that does not answer: requests go on untraced for a pause, counted as dropped; traces resume once it answers', async () => {
    const nowhere = await sparePort();
    // The pause follows the instance's clock: moved past it rather than waited for.
    const clock = testClock();
    const down = await startTestGateway(config({ endpoint: `http://127.0.0.1:${nowhere}` }), { clock });
    let late: http.Server | undefined;
    try {
      const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => down.get(`/open/${marker()}-${i}`)));
      expect(answers.map((r) => r.status)).toEqual(Array(20).fill(200));
      await eventually(async () => /gateway_trace_spans_total\{outcome="dropped"\} ([1-9]\d*)/.test(await down.services.metrics.registry.metrics()), 8000);
      const stats = down.services.tracing!.stats;
      expect(stats.exported).toBe(0);
      // Paused: no span is made, the upstream gets no traceparent, each request counts as dropped.
      const dropped = stats.dropped;
      const m = marker();
      expect((await down.get(`/open/${m}`)).status).toBe(200);
      expect(upstream.last(m)!.headers.traceparent).toBeUndefined();
      expect(stats.dropped).toBe(dropped + 1);
      // The collector comes up: after the pause, spans reach it.
      late = http.createServer((req, res) => { req.resume(); req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}')); });
      await new Promise<void>((resolve) => late!.listen(nowhere, '127.0.0.1', resolve));
      clock.advance(60_000); // past the longest pause
      await eventually(async () => {
        await down.get(`/open/${marker()}`);
        return stats.exported > 0;
      }, 5000, 250);
    } finally {
      await down.close();
      await new Promise((resolve) => (late ? late.close(resolve) : resolve(undefined)));
    }
  }, 30_000);
});
