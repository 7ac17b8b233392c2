// Traces (CONTRACT §17): a server span per request, named after the route it matched, with a
// child span per pipeline stage (and under it, each Redis or Postgres call the stage makes) and
// one for the upstream call, whose traceparent the upstream receives. A webhook message remembers
// the traceparent of the request that caused it: each delivery attempt is a client span in that
// trace, and the receiver gets its traceparent. Exported over OTLP/HTTP (protobuf, or JSON) to
// {endpoint}/v1/traces by the OpenTelemetry JS SDK's exporter (its transport, retries and
// OTEL_EXPORTER_OTLP_* settings), with its ratio sampler and W3C propagator; the spans and the
// export's body are the gateway's own (spans.ts, otlp.ts), at less than half the SDK's cost.
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
import { ROOT_CONTEXT, trace, TraceFlags, type TextMapGetter } from '@opentelemetry/api';
import { ExportResultCode, W3CTraceContextPropagator, type ExportResult } from '@opentelemetry/core';
import { OTLPExporterBase } from '@opentelemetry/otlp-exporter-base';
import { convertLegacyHttpOptions, createOtlpHttpExportDelegate } from '@opentelemetry/otlp-exporter-base/node-http';
import { JsonTraceSerializer, ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { TraceIdRatioBasedSampler, SamplingDecision } from '@opentelemetry/sdk-trace';
import { AsyncLocalStorage } from 'node:async_hooks';
import type { IncomingHttpHeaders } from 'node:http';
import { OTLP_PROTOCOLS, type OtlpProtocol } from '../config/schema.js';
import type { StoreCall, StoreCalls } from './storeCalls.js';
import { jsonExport, protobufExport } from './otlp.js';
import { GatewaySpan, newTraceId, SpanKind, STATUS_ERROR, type Attributes, type SpanParent } from './spans.js';

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
export function tracingSettings(
  otlp: { endpoint?: string; serviceName?: string; sampleRatio?: number; trustIncoming: boolean; protocol?: OtlpProtocol }, env: NodeJS.ProcessEnv = process.env,
): TracingSettings | undefined {
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
  readonly span: GatewaySpan;
  /** A child of the request's span: a pipeline stage, or the upstream call (kind CLIENT). */
  start(name: string, attributes?: Attributes, kind?: SpanKind): GatewaySpan;
  /** The Redis and Postgres calls of a stage, as children of its span. */
  calls(stage: GatewaySpan): StoreCalls;
  /** Writes `span`'s traceparent (and tracestate) into headers bound upstream. */
  inject(span: GatewaySpan, headers: Record<string, unknown>): void;
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

/** The trace of the request an own handler is serving (Tracing.carry); made on first use. */
let serving: AsyncLocalStorage<RequestTrace> | undefined;

/** The traceparent of the request being served by an own handler, when it is traced: what a webhook message it stores keeps. */
export function servedTraceparent(): string | undefined {
  return serving?.getStore()?.span.traceparent;
}

function failed(span: GatewaySpan, type: string): void {
  span.setAttribute('error.type', type).setStatus({ code: STATUS_ERROR });
}

/**
 * Writes `span`'s traceparent, and the tracestate its trace came with, into headers bound
 * elsewhere (a copy of the client's). A client's tracestate without a valid traceparent belongs to
 * no trace the gateway continues: Trace Context's processing model (§4.2, §4.3) has it discarded.
 */
function inject(span: GatewaySpan, headers: Record<string, unknown>): void {
  headers.traceparent = span.traceparent;
  if (span.parent?.traceState) headers.tracestate = span.parent.traceState;
  else delete headers.tracestate;
}

/** A span of our own making, and how to hand its traceparent on. */
export interface ClientSpan {
  readonly span: GatewaySpan;
  inject(headers: Record<string, unknown>): void;
}

/** An export of ended spans, as the SDK's OTLP exporters take one. */
export interface SpanExport {
  export(spans: GatewaySpan[], done: (result: ExportResult) => void): void;
  shutdown(): Promise<void>;
}

export class Tracing {
  readonly stats: TracingStats = { exported: 0, dropped: 0 };
  private readonly queue: BoundedExport;
  private readonly byRatio: TraceIdRatioBasedSampler;
  private readonly propagator = new W3CTraceContextPropagator();
  private readonly ended = (span: GatewaySpan) => this.queue.add(span);
  /** While exports fail: no tracing until then, and how long the next pause lasts. */
  private pausedUntil = 0;
  private pauseMs = PAUSE_MIN_MS;

  /** `clock`: the instance's, which the pause after a failed export follows. */
  constructor(private readonly settings: TracingSettings, private readonly clock: () => Date = () => new Date(), exporter: SpanExport = otlpExporter(settings)) {
    this.byRatio = new TraceIdRatioBasedSampler(settings.sampleRatio);
    this.queue = new BoundedExport(exporter, this.stats, (ok) => this.exported(ok));
  }

  private exported(ok: boolean): void {
    if (ok) {
      this.pauseMs = PAUSE_MIN_MS;
      return;
    }
    this.pausedUntil = this.clock().getTime() + this.pauseMs;
    this.pauseMs = Math.min(PAUSE_MAX_MS, this.pauseMs * 2);
  }

  /** Whether spans are made now: not while exports fail (each span not made counts as dropped). */
  private paused(): boolean {
    if (this.pausedUntil === 0) return false;
    if (this.clock().getTime() < this.pausedUntil) {
      this.stats.dropped++;
      return true;
    }
    this.pausedUntil = 0;
    return false;
  }

  /**
   * A span: a child follows its parent's sampling; a trace's first span is sampled by the ratio,
   * by trace id (every instance decides alike), and so is a client's trace unless trustIncoming.
   */
  private span(name: string, kind: SpanKind, attributes: Attributes, parent: SpanParent | undefined): GatewaySpan {
    const traceId = parent?.traceId ?? newTraceId();
    const sampled = parent && (!parent.isRemote || this.settings.trustIncoming)
      ? parent.sampled
      : this.settings.sampleRatio >= 1 || this.byRatio.shouldSample(ROOT_CONTEXT, traceId).decision === SamplingDecision.RECORD_AND_SAMPLED;
    return new GatewaySpan(name, kind, parent, traceId, sampled, attributes, this.ended);
  }

  /** A W3C traceparent (and tracestate) as the span it names, when it is well-formed. */
  private parentOf(headers: IncomingHttpHeaders, isRemote: boolean): SpanParent | undefined {
    const context = trace.getSpanContext(this.propagator.extract(ROOT_CONTEXT, headers, headerGetter));
    if (!context) return undefined;
    const { traceId, spanId, traceFlags, traceState } = context;
    return { traceId, spanId, sampled: (traceFlags & TraceFlags.SAMPLED) !== 0, isRemote, traceState: traceState?.serialize() || undefined };
  }

  /** The server span of a request, continuing the client's trace when it sent a traceparent; none while exports fail. */
  begin(method: string, path: string, headers: IncomingHttpHeaders): RequestTrace | undefined {
    if (this.paused()) return undefined;
    const parent = headers.traceparent === undefined ? undefined : this.parentOf(headers, true);
    const span = this.span(method, SpanKind.SERVER, { 'http.request.method': method, 'url.path': path }, parent);
    const context = span.context;
    return {
      span,
      start: (name, attributes = {}, kind = SpanKind.INTERNAL) => this.span(name, kind, attributes, context),
      calls: (stage) => (call, work) => this.storeCall(stage, call, work),
      inject,
    };
  }

  private async storeCall<T>(stage: GatewaySpan, { system, operation, collection }: StoreCall, work: () => Promise<T>): Promise<T> {
    const span = this.span(collection ? `${operation} ${collection}` : operation, SpanKind.CLIENT, {
      'db.system.name': system, 'db.operation.name': operation, ...(collection ? { 'db.collection.name': collection } : {}),
    }, stage.context);
    try {
      const result = await work();
      // The Redis breaker answers undefined for a call that failed or ran out of time (storage/redis/breaker.ts).
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
    const span = this.span(name, SpanKind.CLIENT, attributes, traceparent ? this.parentOf({ traceparent }, false) : undefined);
    return { span, inject: (headers) => inject(span, headers) };
  }

  /** Exports what is queued, then stops. */
  close(): Promise<void> {
    return this.queue.shutdown();
  }
}

/**
 * The SDK's OTLP/HTTP exporter (its transport, retries, timeout and OTEL_EXPORTER_OTLP_HEADERS),
 * given the body written by otlp.ts; the collector's answer is read by the SDK's own deserializers.
 */
function otlpExporter({ endpoint, protocol, serviceName }: TracingSettings): SpanExport {
  const json = protocol === 'http/json';
  const options = convertLegacyHttpOptions({ url: `${endpoint}/v1/traces`, timeoutMillis: EXPORT_TIMEOUT_MS }, 'TRACES', 'v1/traces', {
    'Content-Type': json ? 'application/json' : 'application/x-protobuf',
  });
  const serializer = json
    ? { serializeRequest: (spans: GatewaySpan[]) => jsonExport(spans, serviceName), deserializeResponse: JsonTraceSerializer.deserializeResponse }
    : { serializeRequest: (spans: GatewaySpan[]) => protobufExport(spans, serviceName), deserializeResponse: ProtobufTraceSerializer.deserializeResponse };
  return new OTLPExporterBase(createOtlpHttpExportDelegate(options, serializer, 'otlp_http_span_exporter', { name: 'span', countItems: (spans) => spans.length }, undefined));
}

/**
 * Ended spans in a queue of QUEUE_MAX, sent in batches every EXPORT_EVERY_MS (or once a batch is
 * full), one export at a time. A span that finds the queue full, or whose export failed, is
 * counted as dropped: nothing waits on the collector, nothing grows without bound.
 */
class BoundedExport {
  private queue: GatewaySpan[] = [];
  private exporting: Promise<void> | undefined;
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly exporter: SpanExport, private readonly stats: TracingStats, private readonly exported: (ok: boolean) => void) {
    this.timer = setInterval(() => void this.flush(), EXPORT_EVERY_MS).unref();
  }

  add(span: GatewaySpan): void {
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

  async shutdown(): Promise<void> {
    clearInterval(this.timer);
    while (this.queue.length || this.exporting) await this.flush().catch(() => {});
    await this.exporter.shutdown();
  }
}
