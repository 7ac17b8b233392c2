// Traces (CONTRACT §17), with the OpenTelemetry JS SDK: a server span per request, named after the
// route it matched, with a child span per pipeline stage (and under it, each Redis or Postgres
// call the stage makes) and one for the upstream call, whose traceparent the upstream receives.
// A webhook message remembers the traceparent of the request that caused it: each delivery
// attempt is a client span in that trace, and the receiver gets its traceparent. Exported over
// OTLP/HTTP (protobuf, or JSON) to {endpoint}/v1/traces.
//
// Contexts are passed by hand (RequestTrace), not through a context manager: the gateway knows
// where each stage starts and ends, and an AsyncLocalStorage on every request would cost the hot
// path even when tracing is off. Off (no endpoint), none of this runs: no hook, no span. The one
// AsyncLocalStorage (serving) holds the trace of a request served by the gateway's own handlers,
// which store webhook messages deep in their transactions; proxied requests never enter it.
//
// Sampling is the gateway's: an incoming traceparent is continued (its trace id kept), but its
// sampled flag decides only with trustIncoming, so that a client cannot make every request of
// its own recorded. Spans wait in a bounded queue; when it is full, or an export fails, they are
// dropped and counted (gateway_trace_spans_total{outcome="dropped"}). A collector that is down or
// slow costs requests nothing: after a failed export, requests are not traced at all for a pause
// (5 s, doubling up to a minute while exports keep failing; each such request counts as a dropped
// span), so the spans nobody can receive are not even made.
import { ROOT_CONTEXT, SpanKind, trace, TraceFlags, type Attributes, type Context, type Span, type TextMapGetter } from '@opentelemetry/api';
import { ExportResultCode, W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { SamplingDecision, TraceIdRatioBasedSampler, TracerProvider, type ReadableSpan, type Sampler, type SamplingResult, type SpanExporter, type SpanProcessor } from '@opentelemetry/sdk-trace';
import { AsyncLocalStorage } from 'node:async_hooks';
import type { IncomingHttpHeaders } from 'node:http';
import { OTLP_PROTOCOLS, type OtlpProtocol } from '../config/schema.js';
import type { StoreCall, StoreCalls } from '../storage/storeCalls.js';

export interface TracingSettings {
  /** The collector's OTLP/HTTP base URL (http://collector:4318); traces go to {endpoint}/v1/traces. */
  endpoint: string;
  serviceName: string;
  sampleRatio: number;
  trustIncoming: boolean;
  /** The body of an export: protobuf, OTLP's default, or JSON. */
  protocol: OtlpProtocol;
}

const isOtlpProtocol = (value: string | undefined): value is OtlpProtocol => (OTLP_PROTOCOLS as readonly string[]).includes(value ?? '');

/** telemetry.otlp as written, the standard OTEL_* variables filling what it leaves unset (the YAML wins); undefined: tracing off. */
export function tracingSettings(otlp: { endpoint?: string; serviceName?: string; sampleRatio?: number; trustIncoming: boolean; protocol?: OtlpProtocol }, env: NodeJS.ProcessEnv = process.env): TracingSettings | undefined {
  const tracesUrl = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  const endpoint = otlp.endpoint || (tracesUrl ? tracesUrl.replace(/\/v1\/traces\/?$/, '') : env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim());
  if (!endpoint || env.OTEL_SDK_DISABLED === 'true') return undefined;
  const envRatio = Number(env.OTEL_TRACES_SAMPLER_ARG);
  return {
    endpoint: endpoint.replace(/\/+$/, ''),
    serviceName: otlp.serviceName || env.OTEL_SERVICE_NAME?.trim() || 'auth-gateway',
    sampleRatio: otlp.sampleRatio ?? (env.OTEL_TRACES_SAMPLER_ARG && envRatio >= 0 && envRatio <= 1 ? envRatio : 1),
    trustIncoming: otlp.trustIncoming,
    // The traces-specific variable first, as the SDKs read it; grpc (another port, another
    // transport) is not spoken here, and leaves the default.
    protocol: otlp.protocol ?? [env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, env.OTEL_EXPORTER_OTLP_PROTOCOL].map((v) => v?.trim()).find(isOtlpProtocol) ?? 'http/protobuf',
  };
}

/** A request's trace: its server span, and what starts its children. */
export interface RequestTrace {
  readonly span: Span;
  /** A child of the request's span: a pipeline stage, or the upstream call (kind CLIENT). */
  start(name: string, attributes?: Attributes, kind?: SpanKind): Span;
  /** The Redis and Postgres calls of a stage, as children of its span. */
  calls(stage: Span): StoreCalls;
  /** Writes `span`'s traceparent (and tracestate) into headers bound upstream. */
  inject(span: Span, headers: Record<string, unknown>): void;
  /** The gateway route the request was decided for: the span's name and `gateway.route`. */
  route?: string;
  /** `allow`, or the catalog name of the denial (`gateway.decision`). */
  decision?: string;
}

export interface TracingStats {
  exported: number;
  dropped: number;
}

const QUEUE_MAX = 2048;
const BATCH_MAX = 512;
const EXPORT_EVERY_MS = 1000;
const EXPORT_TIMEOUT_MS = 5000;
const PAUSE_MIN_MS = 5000;
const PAUSE_MAX_MS = 60_000;

const headerGetter: TextMapGetter<IncomingHttpHeaders> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => carrier[key],
};
const headerSetter = { set: (carrier: unknown, key: string, value: string) => { (carrier as Record<string, unknown>)[key] = value; } };

/** The trace of the request an own handler is serving (Tracing.carry); made on first use. */
let serving: AsyncLocalStorage<RequestTrace> | undefined;

/** The traceparent of the request being served by an own handler, when it is traced: what a webhook message it stores keeps. */
export function servedTraceparent(): string | undefined {
  const served = serving?.getStore();
  if (!served) return undefined;
  const carrier: Record<string, string> = {};
  served.inject(served.span, carrier);
  return carrier.traceparent;
}

function failed(span: Span, type: string): void {
  span.setAttribute('error.type', type);
  span.setStatus({ code: 2 /* ERROR */ });
}

/** A span of our own making, and how to hand its traceparent on. */
export interface ClientSpan {
  readonly span: Span;
  inject(headers: Record<string, unknown>): void;
}

export class Tracing {
  readonly stats: TracingStats = { exported: 0, dropped: 0 };
  private readonly provider: TracerProvider;
  private readonly tracer;
  private readonly propagator = new W3CTraceContextPropagator();
  /** While exports fail: no tracing until then, and how long the next pause lasts. */
  private pausedUntil = 0;
  private pauseMs = PAUSE_MIN_MS;

  constructor(settings: TracingSettings, exporter: SpanExporter = otlpExporter(settings)) {
    this.provider = new TracerProvider({
      resource: resourceFromAttributes({ 'service.name': settings.serviceName }),
      sampler: new GatewaySampler(settings.sampleRatio, settings.trustIncoming),
      spanProcessors: [new BoundedExport(exporter, this.stats, (ok) => this.exported(ok))],
    });
    this.tracer = this.provider.getTracer('auth-gateway');
  }

  private exported(ok: boolean): void {
    if (ok) {
      this.pauseMs = PAUSE_MIN_MS;
      return;
    }
    this.pausedUntil = Date.now() + this.pauseMs;
    this.pauseMs = Math.min(PAUSE_MAX_MS, this.pauseMs * 2);
  }

  /** Whether spans are made now: not while exports fail (each span not made counts as dropped). */
  private paused(): boolean {
    if (this.pausedUntil === 0) return false;
    if (Date.now() < this.pausedUntil) {
      this.stats.dropped++;
      return true;
    }
    this.pausedUntil = 0;
    return false;
  }

  private inject(span: Span, headers: Record<string, unknown>): void {
    this.propagator.inject(trace.setSpan(ROOT_CONTEXT, span), headers, headerSetter);
  }

  /** The server span of a request, continuing the client's trace when it sent a traceparent; none while exports fail. */
  begin(method: string, path: string, headers: IncomingHttpHeaders): RequestTrace | undefined {
    if (this.paused()) return undefined;
    const parent = headers.traceparent === undefined ? ROOT_CONTEXT : this.propagator.extract(ROOT_CONTEXT, headers, headerGetter);
    const span = this.tracer.startSpan(method, { kind: SpanKind.SERVER, attributes: { 'http.request.method': method, 'url.path': path } }, parent);
    const context = trace.setSpan(parent, span);
    return {
      span,
      start: (name, attributes, kind = SpanKind.INTERNAL) => this.tracer.startSpan(name, { kind, attributes }, context),
      calls: (stage) => (call, work) => this.storeCall(trace.setSpan(context, stage), call, work),
      inject: (child, headers) => this.inject(child, headers),
    };
  }

  private async storeCall<T>(parent: Context, { system, operation, collection }: StoreCall, work: () => Promise<T>): Promise<T> {
    const span = this.tracer.startSpan(collection ? `${operation} ${collection}` : operation, {
      kind: SpanKind.CLIENT,
      attributes: { 'db.system.name': system, 'db.operation.name': operation, ...(collection ? { 'db.collection.name': collection } : {}) },
    }, parent);
    try {
      const result = await work();
      // The Redis breaker answers undefined for a call that failed or ran out of time (redisBreaker.ts).
      if (result === undefined && system === 'redis') failed(span, 'unavailable');
      return result;
    } catch (err) {
      failed(span, err instanceof Error ? err.name : 'Error');
      throw err;
    } finally {
      span.end();
    }
  }

  /** Runs `next` (the rest of an own handler's request) with `served` at hand for servedTraceparent(). */
  carry(served: RequestTrace, next: () => void): void {
    (serving ??= new AsyncLocalStorage()).run(served, next);
  }

  /**
   * A CLIENT span of the gateway's own, outside a request (a webhook delivery attempt): a child of
   * `traceparent`, which the gateway stored itself (its sampling flag is ours, so it decides), or
   * the first span of a new trace; none while exports fail.
   */
  client(name: string, attributes: Attributes, traceparent: string | null): ClientSpan | undefined {
    if (this.paused()) return undefined;
    const stored = traceparent ? trace.getSpanContext(this.propagator.extract(ROOT_CONTEXT, { traceparent }, headerGetter)) : undefined;
    const parent = stored ? trace.setSpanContext(ROOT_CONTEXT, { ...stored, isRemote: false }) : ROOT_CONTEXT;
    const span = this.tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes }, parent);
    return { span, inject: (headers) => this.inject(span, headers) };
  }

  /** Exports what is queued, then stops. */
  close(): Promise<void> {
    return this.provider.shutdown();
  }
}

function otlpExporter({ endpoint, protocol }: TracingSettings): SpanExporter {
  const options = { url: `${endpoint}/v1/traces`, timeoutMillis: EXPORT_TIMEOUT_MS };
  return protocol === 'http/json' ? new JsonExporter(options) : new ProtobufExporter(options);
}

/**
 * The gateway's own decision for a trace's first span (the ratio, by trace id, so every instance
 * decides alike); a child follows its parent. A remote parent's flag counts only with trustIncoming.
 */
class GatewaySampler implements Sampler {
  private readonly byRatio: TraceIdRatioBasedSampler;

  constructor(ratio: number, private readonly trustIncoming: boolean) {
    this.byRatio = new TraceIdRatioBasedSampler(ratio);
  }

  shouldSample(context: Context, traceId: string): SamplingResult {
    const parent = trace.getSpanContext(context);
    if (parent && (!parent.isRemote || this.trustIncoming)) {
      return { decision: parent.traceFlags & TraceFlags.SAMPLED ? SamplingDecision.RECORD_AND_SAMPLED : SamplingDecision.NOT_RECORD };
    }
    return this.byRatio.shouldSample(context, traceId);
  }

  toString(): string {
    return `GatewaySampler{${this.byRatio.toString()}, trustIncoming=${this.trustIncoming}}`;
  }
}

/**
 * Ended spans in a queue of QUEUE_MAX, sent in batches every EXPORT_EVERY_MS (or once a batch is
 * full), one export at a time. A span that finds the queue full, or whose export failed, is
 * counted as dropped: nothing waits on the collector, nothing grows without bound.
 */
class BoundedExport implements SpanProcessor {
  private queue: ReadableSpan[] = [];
  private exporting: Promise<void> | undefined;
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly exporter: SpanExporter, private readonly stats: TracingStats, private readonly exported: (ok: boolean) => void) {
    this.timer = setInterval(() => void this.flush(), EXPORT_EVERY_MS).unref();
  }

  onStart(): void {}

  onEnd(span: ReadableSpan): void {
    if (!(span.spanContext().traceFlags & TraceFlags.SAMPLED)) return;
    if (this.queue.length >= QUEUE_MAX) {
      this.stats.dropped++;
      return;
    }
    this.queue.push(span);
    if (this.queue.length >= BATCH_MAX) void this.flush();
  }

  flush(): Promise<void> {
    if (this.exporting || this.queue.length === 0) return this.exporting ?? Promise.resolve();
    const batch = this.queue.splice(0, BATCH_MAX);
    this.exporting = new Promise<void>((resolve) => {
      this.exporter.export(batch, (result) => {
        const ok = result.code === ExportResultCode.SUCCESS;
        if (ok) this.stats.exported += batch.length;
        else this.stats.dropped += batch.length + this.queue.splice(0).length; // the rest would fail alike
        this.exported(ok);
        resolve();
      });
    }).finally(() => { this.exporting = undefined; });
    return this.exporting;
  }

  async forceFlush(): Promise<void> {
    while (this.queue.length || this.exporting) await this.flush();
  }

  async shutdown(): Promise<void> {
    clearInterval(this.timer);
    await this.forceFlush().catch(() => {});
    await this.exporter.shutdown();
  }
}
