// What the daily limiter answers (index.ts): an admission with the windows' states and the use
// (should it be given back, refunds.ts), or the refusal of the window that is spent, in the spec's
// words; the pipeline puts the route's in (plans.ts, worded).
import { dailyLimitParams, SPEC_UPGRADE_URL, type Denial } from '../../../errors/index.js';
import type { Counter, UseWindows } from '../../../storage/usage/index.js';
import { windowState, type QuotaOutcome, type QuotaState } from '../quota.js';
import type { Window } from './gate.js';

/** What an admission reads of the block it was served from (blocks.ts). */
export interface Served {
  left: number;
  /** users.daily_usage and monthly_usage after the block was reserved (null: window not counted). */
  daily: number | null;
  monthly: number | null;
}

/** The spec's words for the window that refused. */
function refused(window: Window, plan: string, limit: number, now: Date): QuotaOutcome {
  const state = windowState(window, limit, limit, now);
  const code = window === 'daily' ? 'dailyLimitReached' : 'monthlyLimitReached';
  const denial: Denial = { code, params: dailyLimitParams(plan, limit), extra: { upgrade_url: SPEC_UPGRADE_URL }, headers: { 'retry-after': String(state.resetSec) } };
  return { state, denial };
}

/** The refusal of the windows found spent: the month's when it is (CONTRACT §23), else the day's. */
export function refusedBy(w: UseWindows, plan: string, monthSpent: boolean, now: Date): QuotaOutcome {
  return monthSpent && w.monthly !== null ? refused('monthly', plan, w.monthly, now) : refused('daily', plan, w.daily!, now);
}

/** The admission's states: the day's, then the month's; and the use, should it be given back (refunds.ts). */
export function admitted(counter: Counter, w: UseWindows, lease: Served, now: Date): QuotaOutcome {
  const states: QuotaState[] = [];
  if (w.daily !== null) states.push(windowState('daily', w.daily, lease.daily! - lease.left, now));
  if (w.monthly !== null) states.push(windowState('monthly', w.monthly, lease.monthly! - lease.left, now));
  const use = { counter: { ownerType: counter.ownerType, id: counter.id }, day: w.day, daily: w.daily !== null, month: w.month, monthly: w.monthly !== null };
  return { state: states[0]!, others: states.slice(1), use };
}
