// The gateway's sampling (src/telemetry/tracing.ts): a trace's first span is sampled by
// sampleRatio, decided by its trace id exactly as the SDK's TraceIdRatioBasedSampler decides (so
// every instance, and any other OpenTelemetry SDK given the same ratio, decides alike); a child
// follows its parent; a client's traceparent is continued, its flag heeded only with trustIncoming.
import { ROOT_CONTEXT } from '@opentelemetry/api';
import { SamplingDecision, TraceIdRatioBasedSampler } from '@opentelemetry/sdk-trace';
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import type { Tracing, TracingSettings } from '../../src/telemetry/tracing.js';
import { capturingTracing } from '../helpers/servedTrace.js';

const tracings: Tracing[] = [];
function tracing(settings: Partial<TracingSettings>) {
  const made = capturingTracing(settings);
  tracings.push(made.tracing);
  return made;
}

afterAll(async () => { await Promise.all(tracings.map((t) => t.close())); });

const traceparent = (traceId: string, flags: '00' | '01') => `00-${traceId}-${randomBytes(8).toString('hex')}-${flags}`;

describe('sampling', () => {
  it('by ratio, by trace id, as the SDK decides: two instances agree on every trace, about half at 0.5', () => {
    const [a, b] = [tracing({ sampleRatio: 0.5 }), tracing({ sampleRatio: 0.5 })];
    const sdk = new TraceIdRatioBasedSampler(0.5);
    let sampled = 0;
    for (let i = 0; i < 2000; i++) {
      const traceId = randomBytes(16).toString('hex');
      // A client's trace, its flag not trusted: the gateway decides, on the trace id it keeps.
      const headers = { traceparent: traceparent(traceId, i % 2 ? '01' : '00') };
      const [onA, onB] = [a.tracing.begin('GET', '/x', headers)!, b.tracing.begin('GET', '/x', headers)!];
      expect(onA.span.traceId).toBe(traceId);
      expect(onA.span.sampled).toBe(onB.span.sampled);
      expect(onA.span.sampled).toBe(sdk.shouldSample(ROOT_CONTEXT, traceId).decision === SamplingDecision.RECORD_AND_SAMPLED);
      if (onA.span.sampled) sampled++;
      // Children follow their parent, whatever the ratio would say of them.
      expect(onA.start('gateway.plan').sampled).toBe(onA.span.sampled);
    }
    expect(sampled).toBeGreaterThan(800);
    expect(sampled).toBeLessThan(1200);
    // Traces the gateway starts itself are sampled at the same ratio.
    const own = Array.from({ length: 2000 }, () => a.tracing.begin('GET', '/x', {})!.span.sampled).filter(Boolean).length;
    expect(own).toBeGreaterThan(800);
    expect(own).toBeLessThan(1200);
  });

  it('an unsampled request records nothing and exports nothing, yet passes its trace on with the flag off', async () => {
    const { tracing: none, exported } = tracing({ sampleRatio: 0 });
    const trace = none.begin('GET', '/x', {})!;
    trace.span.setAttribute('enduser.id', '7');
    const upstream = trace.start('upstream', { 'gateway.upstream': 'app' });
    const headers: Record<string, unknown> = {};
    trace.inject(upstream, headers);
    upstream.end();
    trace.span.end();
    await none.close();
    expect(headers.traceparent).toBe(`00-${trace.span.traceId}-${upstream.spanId}-00`);
    expect(trace.span.attributes).not.toHaveProperty('enduser.id'); // set after it began: not recorded
    expect(exported).toEqual([]);
  });

  it('ratio 1: every trace; with trustIncoming, a client\'s flag decides both ways', () => {
    const all = tracing({ sampleRatio: 1 });
    expect(Array.from({ length: 200 }, () => all.tracing.begin('GET', '/x', {})!.span.sampled).every(Boolean)).toBe(true);
    const trusting = tracing({ sampleRatio: 0.5, trustIncoming: true });
    for (const flags of ['00', '01'] as const) {
      for (let i = 0; i < 50; i++) {
        expect(trusting.tracing.begin('GET', '/x', { traceparent: traceparent(randomBytes(16).toString('hex'), flags) })!.span.sampled).toBe(flags === '01');
      }
    }
  });
});
