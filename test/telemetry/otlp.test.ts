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

// opentelemetry-proto, as far as a trace export goes: each message's fields by number, as
// [name, kind]. Defaults (0, empty) are left out, as proto3 leaves them out on the wire.
type Kind = 'string' | 'hex' | 'uint' | 'int64' | 'fixed64' | 'fixed32' | 'double' | 'bool' | Schema;
interface Schema { [field: number]: [string, Kind, 'repeated'?] }
const ANY_VALUE: Schema = { 1: ['stringValue', 'string'], 2: ['boolValue', 'bool'], 3: ['intValue', 'int64'], 4: ['doubleValue', 'double'] };
const KEY_VALUE: Schema = { 1: ['key', 'string'], 2: ['value', ANY_VALUE] };
const SPAN: Schema = {
  1: ['traceId', 'hex'], 2: ['spanId', 'hex'], 3: ['traceState', 'string'], 4: ['parentSpanId', 'hex'], 5: ['name', 'string'], 6: ['kind', 'uint'],
  7: ['startTimeUnixNano', 'fixed64'], 8: ['endTimeUnixNano', 'fixed64'], 9: ['attributes', KEY_VALUE, 'repeated'], 10: ['droppedAttributesCount', 'uint'],
  11: ['events', {}, 'repeated'], 12: ['droppedEventsCount', 'uint'], 13: ['links', {}, 'repeated'], 14: ['droppedLinksCount', 'uint'],
  15: ['status', { 2: ['message', 'string'], 3: ['code', 'uint'] }], 16: ['flags', 'fixed32'],
};
const REQUEST: Schema = {
  1: ['resourceSpans', {
    1: ['resource', { 1: ['attributes', KEY_VALUE, 'repeated'], 2: ['droppedAttributesCount', 'uint'] }],
    2: ['scopeSpans', { 1: ['scope', { 1: ['name', 'string'], 2: ['version', 'string'] }], 2: ['spans', SPAN, 'repeated'], 3: ['schemaUrl', 'string'] }, 'repeated'],
    3: ['schemaUrl', 'string'],
  }, 'repeated'],
};

/** A protobuf message decoded by its schema; unknown fields fail the test. */
function decode(buf: Buffer, schema: Schema): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  let i = 0;
  const varint = () => {
    let value = 0n;
    for (let shift = 0n; ; shift += 7n) {
      const byte = buf[i++]!;
      value |= BigInt(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return value;
    }
  };
  while (i < buf.length) {
    const tag = Number(varint());
    const entry = schema[tag >> 3];
    if (!entry) throw new Error(`unknown field ${tag >> 3}`);
    const [name, kind, repeated] = entry;
    const wire = tag & 7;
    let value: unknown;
    if (wire === 0) {
      const raw = varint();
      value = kind === 'bool' ? raw === 1n : kind === 'int64' ? String(BigInt.asIntN(64, raw)) : Number(raw);
    } else if (wire === 1) {
      value = kind === 'double' ? buf.readDoubleLE(i) : String(buf.readBigUInt64LE(i));
      i += 8;
    } else if (wire === 5) {
      value = buf.readUInt32LE(i);
      i += 4;
    } else if (wire === 2) {
      const length = Number(varint());
      const bytes = buf.subarray(i, (i += length));
      value = kind === 'hex' ? bytes.toString('hex') : kind === 'string' ? bytes.toString('utf8') : decode(bytes, kind as Schema);
    } else throw new Error(`wire type ${wire}`);
    const isDefault = value === 0 || value === '0' || value === '' || value === false || (typeof value === 'object' && Object.keys(value as object).length === 0 && !repeated);
    if (repeated) ((out[name] ??= []) as unknown[]).push(value);
    else if (!isDefault) out[name] = value;
  }
  return out;
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
    const ours = decode(Buffer.from(protobufExport(made, SERVICE)), REQUEST);
    const sdk = decode(Buffer.from(ProtobufTraceSerializer.serializeRequest(made.map(readable))!), REQUEST);
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
