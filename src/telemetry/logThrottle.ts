// Repeated failures, logged once per interval with a count instead of once per occurrence with a
// stack. A dependency that is down fails every request: logged per request, a Redis that refused
// writes wrote 1,300 lines/s (22 MB in 10 s) and a 5 s Postgres stop 9,349 lines per instance,
// burying everything else and filling disks (issue 18). Here the first failure is logged with its
// error; later ones are counted, and at most one line per interval says how many came and the
// last error's message; the recovery is logged once. A failure that flaps (fails, works, fails)
// stays within two lines per interval.
import type { FastifyBaseLogger } from 'fastify';
import type { Logger } from 'pino';
import { telemetryName, type ErrorCode } from '../errors/index.js';

export const FAILURE_LOG_INTERVAL_MS = 10_000;

export interface FailureLog {
  /** One occurrence of the failure; logged or counted (see above). */
  failed(err: unknown, fields?: Record<string, unknown>): void;
  /** It works again: says so once, with the occurrences not yet told, if a failure was logged since the last recovery. */
  recovered(fields?: Record<string, unknown>): void;
}

export interface FailureLogOptions {
  /** What the recovery line says; default: `<message>: recovered`. */
  recoveredMessage?: string;
  intervalMs?: number;
  /** Milliseconds now (tests move it). */
  now?: () => number;
}

/** A log of one kind of repeated failure: `message` says what fails and what the gateway does meanwhile. */
export function failureLog(log: Logger, message: string, options: FailureLogOptions = {}): FailureLog {
  const { intervalMs = FAILURE_LOG_INTERVAL_MS, now = Date.now, recoveredMessage = `${message}: recovered` } = options;
  let lastLineAt = -Infinity;
  // Occurrences since the last line, and whether a failure line was written since the last recovery line.
  let untold = 0;
  let toldFailing = false;
  return {
    failed(err, fields) {
      untold++;
      const at = now();
      if (at - lastLineAt < intervalMs) return;
      if (untold === 1) {
        // The first after a quiet interval: with the error itself, stack included.
        log.warn({ ...fields, err }, message);
      } else {
        const seconds = Math.round((at - lastLineAt) / 1000);
        log.warn({ ...fields, occurrences: untold, lastError: errorMessage(err) }, `${message} (${untold} times in the last ${seconds} s)`);
      }
      lastLineAt = at;
      untold = 0;
      toldFailing = true;
    },
    recovered(fields) {
      if (!toldFailing) return;
      toldFailing = false;
      log.info({ ...fields, ...(untold ? { occurrencesNotLogged: untold } : {}) }, recoveredMessage);
      untold = 0;
    },
  };
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

// A client over its plan's quota is usually a script in a loop: a line per refusal wrote 250 MiB
// in one `npm run bench` and was about an eighth of a refusal's CPU. Every other denial (401, 403,
// 405) keeps its line: each may be someone probing, and an operator follows them one by one.
const QUOTA_REFUSALS: ReadonlySet<ErrorCode> = new Set(['tooManyRequests', 'dailyLimitReached', 'monthlyLimitReached']);

/**
 * The `request denied` lines of a listener (proxy, decisions): one per denial, with the route and
 * the reason, but quota refusals (429) once per route and reason per interval: the first with its
 * request id, then at most one line per interval saying how many came since.
 */
export class DenialLog {
  private readonly quotaRefusals = new Map<string, { lastLineAt: number; untold: number }>();
  private readonly intervalMs: number;
  private readonly now: () => number;

  constructor(options: Pick<FailureLogOptions, 'intervalMs' | 'now'> = {}) {
    this.intervalMs = options.intervalMs ?? FAILURE_LOG_INTERVAL_MS;
    this.now = options.now ?? Date.now;
  }

  /** `log` is the request's (its lines carry the request id). */
  denied(log: FastifyBaseLogger, route: string, code: ErrorCode): void {
    const reason = telemetryName(code);
    if (!QUOTA_REFUSALS.has(reason)) {
      log.info({ route, reason }, 'request denied');
      return;
    }
    // Keys are bounded: the configured routes, two reasons each.
    const key = `${route}\0${reason}`;
    let state = this.quotaRefusals.get(key);
    if (!state) this.quotaRefusals.set(key, (state = { lastLineAt: -Infinity, untold: 0 }));
    state.untold++;
    const at = this.now();
    if (at - state.lastLineAt < this.intervalMs) return;
    if (state.untold === 1) log.info({ route, reason }, 'request denied');
    else log.info({ route, reason, occurrences: state.untold }, `request denied (${state.untold} times in the last ${Math.round((at - state.lastLineAt) / 1000)} s)`);
    state.lastLineAt = at;
    state.untold = 0;
  }
}
