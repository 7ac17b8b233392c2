// A request's trace without a collector: what the webhook and hook writers keep of the request that
// caused a message (servedTraceparent), for tests on a database of their own.
import { afterAll } from 'vitest';
import { Tracing, type SpanExport } from '../../src/telemetry/tracing.js';

/** Registers the file's afterAll; `within(work)` runs `work` as a traced request's own handler would, its traceparent returned beside. */
export function servedTraces(): { within<T>(work: () => Promise<T>): Promise<{ result: T; traceparent: string }> } {
  const exporter: SpanExport = { export: (_spans, done) => done({ code: 0 }), shutdown: async () => {} };
  const tracing = new Tracing({ endpoint: 'http://unused', serviceName: 'test', sampleRatio: 1, trustIncoming: false, protocol: 'http/protobuf' }, undefined, exporter);
  afterAll(() => tracing.close());
  return {
    within: (work) => {
      const served = tracing.begin('POST', '/traced', {})!;
      return new Promise((done, failed) => tracing.carry(served, () => { work().then((result) => done({ result, traceparent: served.span.traceparent }), failed); }));
    },
  };
}
