// An OTLP trace export decoded by opentelemetry-proto's field numbers (trace/v1/trace.proto), the
// way a collector reads it: what the tests' receivers make of the gateway's protobuf bodies; and
// startCollector, such a receiver.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

// opentelemetry-proto, as far as a trace export goes: each message's fields by number, as
// [name, kind]. Defaults (0, empty) are left out, as proto3 leaves them out on the wire.
export type Kind = 'string' | 'hex' | 'uint' | 'int64' | 'fixed64' | 'fixed32' | 'double' | 'bool' | Schema;
export interface Schema { [field: number]: [string, Kind, 'repeated'?] }
const ANY_VALUE: Schema = { 1: ['stringValue', 'string'], 2: ['boolValue', 'bool'], 3: ['intValue', 'int64'], 4: ['doubleValue', 'double'] };
const KEY_VALUE: Schema = { 1: ['key', 'string'], 2: ['value', ANY_VALUE] };
const SPAN: Schema = {
  1: ['traceId', 'hex'], 2: ['spanId', 'hex'], 3: ['traceState', 'string'], 4: ['parentSpanId', 'hex'], 5: ['name', 'string'], 6: ['kind', 'uint'],
  7: ['startTimeUnixNano', 'fixed64'], 8: ['endTimeUnixNano', 'fixed64'], 9: ['attributes', KEY_VALUE, 'repeated'], 10: ['droppedAttributesCount', 'uint'],
  11: ['events', {}, 'repeated'], 12: ['droppedEventsCount', 'uint'], 13: ['links', {}, 'repeated'], 14: ['droppedLinksCount', 'uint'],
  15: ['status', { 2: ['message', 'string'], 3: ['code', 'uint'] }], 16: ['flags', 'fixed32'],
};
export const EXPORT_TRACE_REQUEST: Schema = {
  1: ['resourceSpans', {
    1: ['resource', { 1: ['attributes', KEY_VALUE, 'repeated'], 2: ['droppedAttributesCount', 'uint'] }],
    2: ['scopeSpans', { 1: ['scope', { 1: ['name', 'string'], 2: ['version', 'string'] }], 2: ['spans', SPAN, 'repeated'], 3: ['schemaUrl', 'string'] }, 'repeated'],
    3: ['schemaUrl', 'string'],
  }, 'repeated'],
};

/** A protobuf message decoded by its schema; unknown fields fail the test. */
export function decodeProtobuf(buf: Buffer, schema: Schema): Record<string, unknown> {
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
      value = kind === 'hex' ? bytes.toString('hex') : kind === 'string' ? bytes.toString('utf8') : decodeProtobuf(bytes, kind as Schema);
    } else throw new Error(`wire type ${wire}`);
    const isDefault = value === 0 || value === '0' || value === '' || value === false || (typeof value === 'object' && Object.keys(value as object).length === 0 && !repeated);
    if (repeated) ((out[name] ??= []) as unknown[]).push(value);
    else if (!isDefault) out[name] = value;
  }
  return out;
}


/** The spans of a protobuf export, in the shape of OTLP/JSON's (attribute values as `{ stringValue }`, `{ intValue: "200" }`, …). */
export function protobufSpans(body: Buffer): Array<Record<string, unknown>> {
  type Decoded = Record<string, unknown>;
  const request = decodeProtobuf(body, EXPORT_TRACE_REQUEST);
  return ((request.resourceSpans ?? []) as Decoded[]).flatMap((rs) => ((rs.scopeSpans ?? []) as Decoded[]).flatMap((ss) => (ss.spans ?? []) as Decoded[]))
    .map((span) => ({ parentSpanId: '', kind: 0, attributes: [], ...span }));
}

export interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: Array<{ key: string; value: Record<string, unknown> }>;
}

/** An OTLP/HTTP receiver, protobuf and JSON alike: every span it was sent, the raw bodies and their content types. */
export async function startCollector() {
  const spans: OtlpSpan[] = [];
  const bodies: string[] = [];
  const contentTypes: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const type = String(req.headers['content-type']);
      if (req.url === '/v1/traces') {
        contentTypes.push(type);
        bodies.push(body.toString('utf8'));
        if (type.startsWith('application/json')) {
          const doc = JSON.parse(body.toString('utf8')) as { resourceSpans: Array<{ scopeSpans: Array<{ spans: OtlpSpan[] }> }> };
          for (const rs of doc.resourceSpans) for (const ss of rs.scopeSpans) spans.push(...ss.spans);
        } else if (type === 'application/x-protobuf') spans.push(...(protobufSpans(body) as unknown as OtlpSpan[]));
      }
      res.writeHead(200, { 'content-type': type === 'application/x-protobuf' ? type : 'application/json' }).end(type === 'application/x-protobuf' ? '' : '{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    bodies,
    contentTypes,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
