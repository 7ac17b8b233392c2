// The gateway writes its OTLP export bodies itself (src/telemetry/otlp.ts). The oracle is the
// OpenTelemetry SDK's own serializers, given the same spans: both bodies, protobuf decoded by
// opentelemetry-proto's field numbers and JSON parsed, must say the same thing, field for field:
// ids, parent, trace state, name, kind, nanosecond times, every attribute type, status, flags,
// resource and scope.
import { hrTime, TraceState } from '@opentelemetry/core';
import { JsonTraceSerializer, ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import type { ReadableSpan } from '@opentelemetry/sdk-trace';
import { describe, expect, it } from 'vitest';
import { jsonExport, protobufExport, SCOPE_NAME } from '../../src/telemetry/otlp.js';
import { GatewaySpan, SpanKind, STATUS_ERROR, type SpanParent } from '../../src/telemetry/spans.js';
import { decodeProtobuf, EXPORT_TRACE_REQUEST } from '../helpers/otlp.js';

const SERVICE = 'edge-gateway';
const RESOURCE = { attributes: { 'service.name': SERVICE } }; // one object: the SDK groups spans by resource identity

/** The same span as the SDK's ReadableSpan. */
function readable(span: GatewaySpan): ReadableSpan {
  const traceState = span.parent?.traceState ? new TraceState(span.parent.traceState) : undefined;
  return {
    name: span.name,
    kind: span.kind,
    spanContext: () => ({ traceId: span.traceId, spanId: span.spanId, traceFlags: span.sampled ? 1 : 0, traceState }),
    parentSpanContext: span.parent && { traceId: span.traceId, spanId: span.parent.spanId, traceFlags: 1, isRemote: span.parent.isRemote },
    startTime: hrTime(span.startedAt), // the SDK's own clock arithmetic
    endTime: hrTime(span.endedAt),
    status: { code: span.status, ...(span.statusMessage ? { message: span.statusMessage } : {}) },
    attributes: span.attributes,
    links: [],
    events: [],
    duration: [0, 0],
    ended: true,
    resource: RESOURCE,
    instrumentationScope: { name: SCOPE_NAME },
    droppedAttributesCount: 0,
    droppedEventsCount: 0,
    droppedLinksCount: 0,
  } as unknown as ReadableSpan;
}

/** OTLP/JSON compared as proto3 reads it: int64 as strings (OTLP/JSON allows a number or a string), empty lists and zero fields left out. */
function normalizedJson(value: unknown, key?: string): unknown {
  if (Array.isArray(value)) return value.map((v) => normalizedJson(v));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      const n = normalizedJson(v, k);
      const empty = n === undefined || n === 0 || n === '' || n === '0' || (n !== null && typeof n === 'object' && !Array.isArray(n) && Object.keys(n).length === 0);
      if (!empty && !(Array.isArray(n) && n.length === 0)) out[k] = n;
    }
    return out;
  }
  return key === 'intValue' ? String(value) : value;
}

/** Each span with its resource and scope: how a collector reads a request, however it is grouped. Times apart (timesOf). */
function flattened(request: Record<string, unknown>) {
  type Decoded = Record<string, unknown>;
  return (request.resourceSpans as Decoded[]).flatMap((rs) => (rs.scopeSpans as Decoded[]).flatMap((ss) =>
    (ss.spans as Decoded[]).map(({ startTimeUnixNano: _s, endTimeUnixNano: _e, ...span }) => ({ resource: rs.resource, scope: ss.scope, span }))));
}

/** Every start and end time in a body, in nanoseconds, in order. */
function timesOf(body: unknown): bigint[] {
  return [...JSON.stringify(body).matchAll(/"(?:start|end)TimeUnixNano":"?(\d+)/g)].map((m) => BigInt(m[1]!));
}

/**
 * The same instants to within a microsecond: performance.timeOrigin is a double of about 0.25 µs
 * precision at today's dates, which the SDK and the gateway round differently.
 */
function expectSameTimes(ours: bigint[], sdk: bigint[]): void {
  expect(ours).toHaveLength(sdk.length);
  expect(ours.length).toBeGreaterThan(0);
  ours.forEach((t, i) => expect(Number(t > sdk[i]! ? t - sdk[i]! : sdk[i]! - t)).toBeLessThanOrEqual(1000));
}

function spans(): GatewaySpan[] {
  const made: GatewaySpan[] = [];
  const end = (span: GatewaySpan) => made.push(span);
  const remote: SpanParent = { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7', sampled: true, isRemote: true, traceState: 'vendor=abc,other=1' };
  const server = new GatewaySpan('GET', SpanKind.SERVER, remote, remote.traceId, true, { 'http.request.method': 'GET', 'url.path': '/api/v1/réports' }, end);
  server.updateName('GET /api/v1/reports');
  const stage = new GatewaySpan('gateway.plan', SpanKind.INTERNAL, server.context, server.traceId, true, {}, end);
  stage.setAttributes({ 'gateway.outcome': 'allow', 'flag': true, 'off': false, 'count': 300, 'negative': -7, 'ratio': 0.25, 'big': 2 ** 40, long: 'x'.repeat(200), unicode: 'łukasz→✓' });
  stage.end();
  const upstream = new GatewaySpan('upstream', SpanKind.CLIENT, server.context, server.traceId, true, { 'gateway.upstream': 'app' }, end);
  upstream.setStatus({ code: STATUS_ERROR, message: 'ECONNREFUSED' }).end();
  const root = new GatewaySpan('POST webhook', SpanKind.CLIENT, undefined, 'a'.repeat(31) + '1', true, { 'http.response.status_code': 200 }, end);
  root.end();
  // Many attributes: a span longer than 127 bytes, and more than 16 KiB in all, so that lengths take
  // several bytes and the writer grows.
  for (let i = 0; i < 60; i++) stage.setAttribute(`ignored.after.end.${i}`, i); // ended: ignored
  const wide = new GatewaySpan('wide', SpanKind.INTERNAL, server.context, server.traceId, true, Object.fromEntries(Array.from({ length: 400 }, (_, i) => [`k${i}`, `value ${i}`])), end);
  wide.end();
  server.setAttribute('http.response.status_code', 502).setStatus({ code: STATUS_ERROR }).end();
  return made;
}

describe('OTLP export bodies', () => {
  it('protobuf: what the SDK\'s serializer writes for the same spans, field for field', () => {
    const made = spans();
    const ours = decodeProtobuf(Buffer.from(protobufExport(made, SERVICE)), EXPORT_TRACE_REQUEST);
    const sdk = decodeProtobuf(Buffer.from(ProtobufTraceSerializer.serializeRequest(made.map(readable))!), EXPORT_TRACE_REQUEST);
    expect(flattened(ours)).toEqual(flattened(sdk));
    expectSameTimes(timesOf(ours), timesOf(sdk));
    // The gateway sends one resource and one scope; the SDK may repeat them, which means the same.
    expect((ours.resourceSpans as unknown[]).length).toBe(1);
    const [resourceSpans] = ours.resourceSpans as Array<{ scopeSpans: Array<{ spans: Array<Record<string, unknown>> }> }>;
    expect(resourceSpans!.scopeSpans).toHaveLength(1);
    expect(resourceSpans!.scopeSpans[0]!.spans.map((s) => s.name)).toEqual(['gateway.plan', 'upstream', 'POST webhook', 'wide', 'GET /api/v1/reports']);
    // Spot checks, so that two serializers agreeing on nothing could not pass.
    const server = resourceSpans!.scopeSpans[0]!.spans[4]!;
    expect(server).toMatchObject({ traceId: '4bf92f3577b34da6a3ce929d0e0e4736', parentSpanId: '00f067aa0ba902b7', traceState: 'vendor=abc,other=1', kind: 2, flags: 0x301, status: { code: 2 } });
    const start = BigInt(server.startTimeUnixNano as string);
    expect(Number(start / 1_000_000n)).toBeGreaterThan(Date.now() - 60_000);
    expect(Number(start / 1_000_000n)).toBeLessThanOrEqual(Date.now());
    expect(BigInt(server.endTimeUnixNano as string)).toBeGreaterThanOrEqual(start);
  });

  it('JSON: what the SDK\'s serializer writes for the same spans', () => {
    const made = spans();
    const ours = JSON.parse(Buffer.from(jsonExport(made, SERVICE)).toString('utf8')) as unknown;
    const sdk = JSON.parse(Buffer.from(JsonTraceSerializer.serializeRequest(made.map(readable))!).toString('utf8')) as unknown;
    const withoutTimes = (body: unknown) => JSON.parse(JSON.stringify(body, (key, value: unknown) => (key.endsWith('UnixNano') ? undefined : value))) as unknown;
    expect(normalizedJson(withoutTimes(ours))).toEqual(normalizedJson(withoutTimes(sdk)));
    expectSameTimes(timesOf(ours), timesOf(sdk));
    expect(JSON.stringify(ours)).toContain('"traceId":"4bf92f3577b34da6a3ce929d0e0e4736"');
  });
});
