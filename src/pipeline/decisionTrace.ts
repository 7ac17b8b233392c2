// The pipeline's decision on a request's server span (CONTRACT §17): the route that names it, the
// outcome, and who passed. The public listener's proxy and the decisions listener call it with
// their decision; the span itself is begun and ended by telemetry/requestSpans.ts.
import { telemetryName } from '../errors/index.js';
import type { RequestTrace } from '../telemetry/tracing.js';
import type { Decision } from './pipeline.js';

/** What the pipeline decided, on the request's trace: the route that names its span, the outcome, and who passed. */
export function traceDecision(trace: RequestTrace | undefined, decision: Decision): void {
  if (!trace) return;
  if (decision.kind === 'deny') {
    if (decision.route && decision.route !== 'own') trace.route = decision.route;
    trace.decision = telemetryName(decision.denial.code);
    return;
  }
  trace.route = decision.route.path;
  trace.decision = 'allow';
  if (decision.auth.kind === 'authenticated') trace.span.setAttribute('enduser.id', String(decision.auth.user.id));
}
