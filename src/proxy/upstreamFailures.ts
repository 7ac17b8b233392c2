// What a failed upstream request comes to, as one table: the client's answer, the metric an
// operator alerts on, and the log line. Pure, so that each row is tested without a listener
// (test/proxy/forwarder.test.ts); the forwarder (forwarder.ts) only applies it.
import type { ErrorCode } from '../errors/index.js';
import { BODY_TOO_LARGE } from './bodyLimit.js';
import { CLIENT_GONE } from './relay.js';

export type UpstreamFailure = 'bodyTooLarge' | 'clientGone' | 'refusedByClient' | 'timeout' | 'unavailable';

export interface FailureHandling {
  /** The catalog error the client gets while it can still get one; once headers went out the response is cut. Undefined: nobody to answer (cut it). */
  answer: ErrorCode | undefined;
  /** gateway_upstream_errors_total's `kind`; undefined: not the upstream's fault, not counted. */
  metric: 'timeout' | 'unavailable' | undefined;
  /** `upstream`: the throttled per-upstream failure line (logThrottle.ts); else one line at this level. */
  log: { level: 'info' | 'warn'; message: string } | 'upstream';
}

export const UPSTREAM_FAILURES: Readonly<Record<UpstreamFailure, FailureHandling>> = {
  // A chunked body that outgrew bodyLimit fails the upstream request from our side.
  bodyTooLarge: { answer: 'payloadTooLarge', metric: undefined, log: { level: 'info', message: 'request body over the limit' } },
  // The client closed or broke its connection mid-request, which cut the upstream request on our
  // side: nobody to answer, and no upstream fault to count (operators alert on that metric).
  clientGone: { answer: undefined, metric: undefined, log: { level: 'info', message: 'client went away before the response' } },
  // undici refused to build the request from what it was given: the client's input, not the upstream.
  refusedByClient: { answer: 'badRequest', metric: undefined, log: { level: 'warn', message: 'request refused by the HTTP client: not forwarded' } },
  timeout: { answer: 'upstreamTimeout', metric: 'timeout', log: 'upstream' },
  unavailable: { answer: 'upstreamUnavailable', metric: 'unavailable', log: 'upstream' },
};

/** The error and its causes (undici may wrap the error of the body stream that ended the request). */
export function causes(error: unknown): Array<{ code?: string }> {
  const out: Array<{ code?: string }> = [];
  let e = error as { code?: string; cause?: unknown } | undefined;
  while (e && typeof e === 'object' && out.length < 5) {
    out.push(e);
    e = e.cause as typeof e;
  }
  return out;
}

/** Which row of UPSTREAM_FAILURES `error` falls under; `clientSocketClosed` when the client's connection is already gone. */
export function classifyUpstreamFailure(error: unknown, clientSocketClosed: boolean): UpstreamFailure {
  const chain = causes(error);
  if (chain.some((e) => e.code === BODY_TOO_LARGE)) return 'bodyTooLarge';
  if (clientSocketClosed || chain.some((e) => e.code === CLIENT_GONE)) return 'clientGone';
  if (chain.some((e) => e.code === 'UND_ERR_INVALID_ARG')) return 'refusedByClient';
  // undici's UND_ERR_HEADERS_TIMEOUT, UND_ERR_BODY_TIMEOUT and UND_ERR_CONNECT_TIMEOUT; ws's handshake timeout.
  return chain.some((e) => /TIMEOUT/.test(e.code ?? '')) ? 'timeout' : 'unavailable';
}
