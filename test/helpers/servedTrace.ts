// Traces without a collector: a Tracing whose ended spans are kept in memory, and a request's trace
// as the webhook and hook writers keep it of the request that caused a message (servedTraceparent),
// for tests on a database of their own.
import { afterAll } from 'vitest';
import type { GatewaySpan } from '../../src/telemetry/spans.js';
import { Tracing, type TracingSettings } from '../../src/telemetry/tracing.js';

/** A Tracing that exports into `exported` (after close(), or as its queue sends), every span sampled unless `settings` says otherwise. */
export function capturingTracing(settings: Partial<TracingSettings> = {}): { tracing: Tracing; exported: GatewaySpan[] } {
  const exported: GatewaySpan[] = [];
  const tracing = new Tracing({ endpoint: 'http://unused', serviceName: 'test', sampleRatio: 1, trustIncoming: false, protocol: 'http/protobuf', ...settings }, undefined, {
    export: (spans, done) => { exported.push(...spans); done({ code: 0 }); },
    shutdown: async () => {},
  });
  return { tracing, exported };
}

/** Registers the file's afterAll; `within(work)` runs `work` as a traced request's own handler would, its traceparent returned beside. */
export function servedTraces(): { within<T>(work: () => Promise<T>): Promise<{ result: T; traceparent: string }> } {
  const { tracing } = capturingTracing();
  afterAll(() => tracing.close());
  return {
    within: (work) => {
      const served = tracing.begin('POST', '/traced', {})!;
      return new Promise((done, failed) => tracing.carry(served, () => { work().then((result) => done({ result, traceparent: served.span.traceparent }), failed); }));
    },
  };
}
