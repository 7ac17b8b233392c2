// What a counted route tells the client about its limits (CONTRACT §12): the RateLimit-Policy and
// RateLimit fields of draft-ietf-httpapi-ratelimit-headers, one item per limit that applied.
import type { Denial } from '../../errors/index.js';
import type { Counter } from '../../storage/usage/index.js';

/** One limit's state after a request. */
export interface QuotaState {
  /** The policy's name in the fields: `daily`, `monthly` or `minute`. */
  policy: 'daily' | 'monthly' | 'minute';
  /** q: the quota. */
  limit: number;
  /** w: the window, in seconds. */
  windowSec: number;
  /** r: what is left. */
  remaining: number;
  /** t: seconds until the quota is whole again. */
  resetSec: number;
}

/** A limiter's answer: the state for the headers, and a denial when it refused. */
export interface QuotaOutcome {
  state: QuotaState;
  /** The states of the other windows the same use was counted on (the month beside the day). */
  others?: readonly QuotaState[];
  denial?: Denial;
  /** An admitted use: what a refund gives back (refunds.ts). */
  use?: CountedUse;
}

/** A use counted for a request: its counter (a user's, or an organization's pooled one), and the windows it was counted in. */
export interface CountedUse {
  counter: Counter;
  day: string;
  daily: boolean;
  month: string;
  monthly: boolean;
}

export function rateLimitHeaders(states: readonly QuotaState[]): Record<string, string> {
  return {
    'ratelimit-policy': states.map((s) => `"${s.policy}";q=${s.limit};w=${s.windowSec}`).join(', '),
    ratelimit: states.map((s) => `"${s.policy}";r=${s.remaining};t=${s.resetSec}`).join(', '),
  };
}

/** Whole seconds from `now` to the next UTC midnight, when every daily quota is whole again. */
export function secondsToUtcMidnight(now: Date): number {
  const midnight = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1);
  return Math.ceil((midnight - now.getTime()) / 1000);
}

/** Whole seconds from `now` to the first instant of the next UTC month, when every monthly quota is whole again. */
export function secondsToNextUtcMonth(now: Date): number {
  return Math.ceil((Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1) - now.getTime()) / 1000);
}

/** The length of `now`'s UTC month in seconds: the monthly policy's window (w). */
export function secondsInUtcMonth(now: Date): number {
  return (Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1) - Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)) / 1000;
}

/** The state of a use-counting window (daily or monthly) for the RateLimit fields, `used` uses counted in it. */
export function windowState(window: 'daily' | 'monthly', limit: number, used: number, now: Date): QuotaState {
  return window === 'daily'
    ? { policy: 'daily', limit, windowSec: 86_400, remaining: Math.max(0, limit - used), resetSec: secondsToUtcMidnight(now) }
    : { policy: 'monthly', limit, windowSec: secondsInUtcMonth(now), remaining: Math.max(0, limit - used), resetSec: secondsToNextUtcMonth(now) };
}
