// The body of an OTLP/HTTP export (ExportTraceServiceRequest, opentelemetry-proto's
// trace/v1/trace.proto): one resource (the service's name), one scope (the gateway), and the
// spans, written straight from GatewaySpan records in protobuf (OTLP's default) or JSON
// (OTLP/JSON: ids in hex, 64-bit integers as strings). The SDK's serializers first copy every
// span into the proto's object shape, which cost more than making the spans.
import { unixTime, type AttributeValue, type Attributes, type GatewaySpan } from './spans.js';

export const SCOPE_NAME = 'auth-gateway';

// OTLP's SpanKind counts from UNSPECIFIED = 0; @opentelemetry/api's from INTERNAL = 0.
const otlpKind = (span: GatewaySpan) => span.kind + 1;
// Span.flags: the W3C trace flags, and whether the parent is known to be remote (bits 8 and 9).
const otlpFlags = (span: GatewaySpan) => (span.sampled ? 1 : 0) | 0x100 | (span.parent?.isRemote ? 0x200 : 0);

const HEX = new Uint8Array(128);
for (let i = 0; i < 16; i++) HEX['0123456789abcdef'.charCodeAt(i)] = HEX['0123456789ABCDEF'.charCodeAt(i)] = i;

/** A protobuf message being written: fields appended to one growing buffer. */
class ProtoWriter {
  private buf = Buffer.allocUnsafe(16 * 1024);
  private pos = 0;

  private room(bytes: number): void {
    if (this.pos + bytes <= this.buf.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + bytes));
    this.buf.copy(grown, 0, 0, this.pos);
    this.buf = grown;
  }

  private varint(value: number): void {
    this.room(10);
    this.pos = this.varintAt(this.pos, value);
  }

  /** Writes `value` as a varint at `at` (room made by the caller); where it ends. */
  private varintAt(at: number, value: number): number {
    while (value > 0x7f) {
      this.buf[at++] = (value & 0x7f) | 0x80;
      value = Math.floor(value / 128);
    }
    this.buf[at] = value;
    return at + 1;
  }

  private tag(field: number, wire: 0 | 1 | 2 | 5): void {
    this.varint((field << 3) | wire);
  }

  uint(field: number, value: number): void {
    this.tag(field, 0);
    this.varint(value);
  }

  /** int64 as a varint: a negative value takes ten bytes (two's complement). */
  int64(field: number, value: number): void {
    if (value >= 0) return this.uint(field, value);
    this.tag(field, 0);
    let rest = BigInt.asUintN(64, BigInt(value));
    this.room(10);
    while (rest > 0x7fn) {
      this.buf[this.pos++] = Number(rest & 0x7fn) | 0x80;
      rest >>= 7n;
    }
    this.buf[this.pos++] = Number(rest);
  }

  private uint32(value: number): void {
    this.buf[this.pos++] = value & 0xff;
    this.buf[this.pos++] = (value >>> 8) & 0xff;
    this.buf[this.pos++] = (value >>> 16) & 0xff;
    this.buf[this.pos++] = value >>> 24;
  }

  /** A performance.now() reading as fixed64 Unix nanoseconds, in two 32-bit halves (no BigInt). */
  time(field: number, at: number): void {
    const { micros, nanos } = unixTime(at);
    const low = (micros % 2 ** 32) * 1000 + nanos; // < 2^42: exact
    this.tag(field, 1);
    this.room(8);
    this.uint32(low % 2 ** 32);
    this.uint32(Math.floor(micros / 2 ** 32) * 1000 + Math.floor(low / 2 ** 32));
  }

  fixed32(field: number, value: number): void {
    this.tag(field, 5);
    this.room(4);
    this.uint32(value);
  }

  double(field: number, value: number): void {
    this.tag(field, 1);
    this.room(8);
    this.pos = this.buf.writeDoubleLE(value, this.pos);
  }

  // Short ASCII strings and ids are copied byte by byte: Buffer#write's call into C++ costs more
  // than the copy for the few dozen bytes of a span's names and attributes.
  string(field: number, value: string): void {
    this.tag(field, 2);
    if (value.length < 128) {
      this.room(1 + value.length);
      const lengthAt = this.pos++;
      let i = 0;
      for (; i < value.length; i++) {
        const code = value.charCodeAt(i);
        if (code > 0x7f) break;
        this.buf[this.pos++] = code;
      }
      if (i === value.length) {
        this.buf[lengthAt] = i;
        return;
      }
      this.pos = lengthAt; // not ASCII: written whole below
    }
    const length = Buffer.byteLength(value);
    this.varint(length);
    this.room(length);
    this.pos += this.buf.write(value, this.pos, 'utf8');
  }

  /** Bytes given in hex (trace and span ids, which the gateway makes or has checked). */
  hex(field: number, value: string): void {
    const length = value.length >> 1;
    this.tag(field, 2);
    this.varint(length);
    this.room(length);
    for (let i = 0; i < value.length; i += 2) this.buf[this.pos++] = (HEX[value.charCodeAt(i)]! << 4) | HEX[value.charCodeAt(i + 1)]!;
  }

  /**
   * Opens a nested message: its fields follow, then end() with what this returned puts its length
   * before them. One byte is kept for the length; a longer one moves the body along (a few hundred
   * bytes for a span). Not a callback: a closure per attribute would cost more than its bytes.
   */
  begin(field: number): number {
    this.tag(field, 2);
    this.room(1);
    return this.pos++;
  }

  end(lengthAt: number): void {
    const length = this.pos - lengthAt - 1;
    let lengthBytes = 1;
    for (let rest = length; rest > 0x7f; rest = Math.floor(rest / 128)) lengthBytes++;
    if (lengthBytes > 1) {
      this.room(lengthBytes - 1);
      this.buf.copyWithin(lengthAt + lengthBytes, lengthAt + 1, this.pos);
      this.pos += lengthBytes - 1;
    }
    this.varintAt(lengthAt, length);
  }

  /** Starts a new message: the buffer is reused from one export to the next. */
  reset(): void {
    this.pos = 0;
  }

  /** The message written since reset(), copied out. */
  take(): Uint8Array {
    return Buffer.from(this.buf.subarray(0, this.pos));
  }
}

// KeyValue { key = 1; value = 2 (AnyValue { string = 1, bool = 2, int = 3, double = 4 }) }
function protoAttributes(w: ProtoWriter, field: number, attributes: Attributes): void {
  for (const key in attributes) {
    const value = attributes[key]!;
    const keyValue = w.begin(field);
    w.string(1, key);
    const anyValue = w.begin(2);
    if (typeof value === 'string') w.string(1, value);
    else if (typeof value === 'boolean') w.uint(2, value ? 1 : 0);
    else if (Number.isSafeInteger(value)) w.int64(3, value);
    else w.double(4, value);
    w.end(anyValue);
    w.end(keyValue);
  }
}

// Span { trace_id 1, span_id 2, trace_state 3, parent_span_id 4, name 5, kind 6,
//        start_time_unix_nano 7, end_time_unix_nano 8, attributes 9, status 15, flags 16 }
function protoSpan(w: ProtoWriter, span: GatewaySpan): void {
  const message = w.begin(2);
  w.hex(1, span.traceId);
  w.hex(2, span.spanId);
  if (span.parent?.traceState) w.string(3, span.parent.traceState);
  if (span.parent) w.hex(4, span.parent.spanId);
  w.string(5, span.name);
  w.uint(6, otlpKind(span));
  w.time(7, span.startedAt);
  w.time(8, span.endedAt);
  protoAttributes(w, 9, span.attributes);
  if (span.status) {
    const status = w.begin(15);
    if (span.statusMessage) w.string(2, span.statusMessage);
    w.uint(3, span.status);
    w.end(status);
  }
  w.fixed32(16, otlpFlags(span));
  w.end(message);
}

const writer = new ProtoWriter();

/** ExportTraceServiceRequest { resource_spans 1: ResourceSpans { resource 1, scope_spans 2: ScopeSpans { scope 1, spans 2 } } } */
export function protobufExport(spans: readonly GatewaySpan[], serviceName: string): Uint8Array {
  writer.reset(); // also after an export that threw halfway
  const resourceSpans = writer.begin(1);
  const resource = writer.begin(1);
  protoAttributes(writer, 1, { 'service.name': serviceName });
  writer.end(resource);
  const scopeSpans = writer.begin(2);
  const scope = writer.begin(1);
  writer.string(1, SCOPE_NAME);
  writer.end(scope);
  for (const span of spans) protoSpan(writer, span);
  writer.end(scopeSpans);
  writer.end(resourceSpans);
  return writer.take();
}

const jsonTime = (at: number) => {
  const { micros, nanos } = unixTime(at);
  return `${micros}${String(nanos).padStart(3, '0')}`;
};
const jsonValue = (value: AttributeValue) =>
  typeof value === 'string' ? { stringValue: value }
    : typeof value === 'boolean' ? { boolValue: value }
      : Number.isSafeInteger(value) ? { intValue: String(value) } : { doubleValue: value };
const jsonAttributes = (attributes: Attributes) => Object.keys(attributes).map((key) => ({ key, value: jsonValue(attributes[key]!) }));

/** The same request in OTLP/JSON (a field left undefined is left out by JSON.stringify: no spreads, which cost more than the rest). */
export function jsonExport(spans: readonly GatewaySpan[], serviceName: string): Uint8Array {
  return Buffer.from(JSON.stringify({
    resourceSpans: [{
      resource: { attributes: jsonAttributes({ 'service.name': serviceName }) },
      scopeSpans: [{
        scope: { name: SCOPE_NAME },
        spans: spans.map((span) => ({
          traceId: span.traceId,
          spanId: span.spanId,
          traceState: span.parent?.traceState || undefined,
          parentSpanId: span.parent?.spanId,
          name: span.name,
          kind: otlpKind(span),
          startTimeUnixNano: jsonTime(span.startedAt),
          endTimeUnixNano: jsonTime(span.endedAt),
          attributes: jsonAttributes(span.attributes),
          status: span.status ? { code: span.status, message: span.statusMessage || undefined } : {},
          flags: otlpFlags(span),
        })),
      }],
    }],
  }));
}
