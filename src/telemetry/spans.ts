// The gateway's spans: what a request's trace records, made here rather than by the SDK's
// TracerProvider. A request makes four spans or more. The SDK's spans (sampler and processor
// calls, attribute checks, hrtime tuples, context objects) and its protobuf serializer, which
// copies every span into the proto's object shape first, cost 31 µs per request of four spans;
// these plain records and otlp.ts, which writes them straight into an export's body, cost 13
// (measured apart, the same spans and attributes). Ids come from a pool of random bytes, times
// from one clock, attributes are kept as set.
import { SpanKind } from '@opentelemetry/api';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';

export { SpanKind };
export type AttributeValue = string | number | boolean;
export type Attributes = Record<string, AttributeValue>;

/** Where a span belongs: its trace, its parent, and whether the trace is recorded (sampled). */
export interface SpanParent {
  traceId: string;
  spanId: string;
  sampled: boolean;
  /** Received from a client (a traceparent header), not made here. */
  isRemote: boolean;
  /** The W3C tracestate that came with the trace, passed on as received. */
  traceState?: string;
}

/** OTLP's status codes: unset, ok, error. */
export const STATUS_ERROR = 2;

const ZERO_TRACE_ID = '0'.repeat(32);
let pool = '';
let pooled = 0;

/** Random ids in hex, cut from 4 KiB of random bytes made hex at once (one system call and one conversion per ~170 spans). */
function randomHex(bytes: number): string {
  if (pooled + 2 * bytes > pool.length) {
    pool = randomBytes(4096).toString('hex');
    pooled = 0;
  }
  const hex = pool.substring(pooled, (pooled += 2 * bytes));
  return hex === ZERO_TRACE_ID || hex === '0000000000000000' ? randomHex(bytes) : hex; // all zeroes is invalid
}

export const newTraceId = (): string => randomHex(16);
export const newSpanId = (): string => randomHex(8);

// Times as performance.now() (exact to the nanosecond's thousandth), made Unix time when encoded:
// nanoseconds since 1970 exceed a double's precision, so they are written as whole microseconds
// (a safe integer) and the nanoseconds beyond them.
const ORIGIN_US = Math.round(performance.timeOrigin * 1000);
/** `at` (a performance.now() reading) as Unix microseconds and the nanoseconds past them. */
export function unixTime(at: number): { micros: number; nanos: number } {
  const ns = Math.round(at * 1e6);
  return { micros: ORIGIN_US + Math.floor(ns / 1000), nanos: ns % 1000 };
}

export class GatewaySpan {
  readonly spanId = newSpanId();
  readonly startedAt = performance.now();
  endedAt = 0;
  status = 0;
  statusMessage: string | undefined;

  constructor(
    public name: string,
    readonly kind: SpanKind,
    readonly parent: SpanParent | undefined,
    readonly traceId: string,
    /** Recorded and exported; otherwise only its ids are passed on, with the sampled flag off. */
    readonly sampled: boolean,
    /** The span's own from now on: kept as given, not copied (callers pass a fresh literal). */
    readonly attributes: Attributes,
    private readonly ended: (span: GatewaySpan) => void,
  ) {}

  /** What a child of this span, or a traceparent made from it, belongs to. */
  get context(): SpanParent {
    return { traceId: this.traceId, spanId: this.spanId, sampled: this.sampled, isRemote: false, traceState: this.parent?.traceState };
  }

  /** The W3C traceparent naming this span. */
  get traceparent(): string {
    return `00-${this.traceId}-${this.spanId}-${this.sampled ? '01' : '00'}`;
  }

  setAttribute(key: string, value: AttributeValue): this {
    if (this.sampled && !this.endedAt) this.attributes[key] = value;
    return this;
  }

  setAttributes(attributes: Attributes): this {
    if (this.sampled && !this.endedAt) Object.assign(this.attributes, attributes);
    return this;
  }

  setStatus({ code, message }: { code: number; message?: string }): this {
    if (!this.endedAt) [this.status, this.statusMessage] = [code, message];
    return this;
  }

  updateName(name: string): this {
    if (!this.endedAt) this.name = name;
    return this;
  }

  end(): void {
    if (this.endedAt) return;
    this.endedAt = performance.now();
    if (this.sampled) this.ended(this);
  }
}
