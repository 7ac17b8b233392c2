// Refunds (CONTRACT §23, plans.refundOn): a proxied counted use is given back, once, when the
// upstream could not be reached (`unreachable`) or answered a listed status (the gateway's own 504
// for an upstream timeout counts as 504, so only when listed), at most capPerDay times per owner
// and UTC day. The forwarder tells what came of the upstream call, once per request; this decides
// and writes. Postgres is the authority (storage/usage/useRefunds.ts: the cap and the counters in one
// statement, exact across instances); the Redis gates of the user are dropped before the answer
// goes on, so the next request, on any instance, asks Postgres (its NOTIFY does the same for the
// others). Decisions, accepted upgrades and responses already started never come here.
import type { Logger } from 'pino';
import type { Config } from '../../config/schema.js';
import type { Database } from '../../storage/database/index.js';
import { type Counter, refundUse } from '../../storage/usage/index.js';
import { utcDay, utcMonth } from '../../time.js';
import type { CountedUse } from './quota.js';

/** What came of the upstream call: its status, or why there was none. */
export type UpstreamOutcome = { status: number } | { failure: 'timeout' | 'unreachable' };

type RefundOn = NonNullable<Config['plans']['refundOn']>;

/** Whether `policy` gives a use back for this outcome. */
export function refundable(policy: RefundOn | undefined, outcome: UpstreamOutcome): boolean {
  if (!policy) return false;
  if ('status' in outcome) return policy.statuses.includes(outcome.status);
  return outcome.failure === 'timeout' ? policy.statuses.includes(504) : policy.unreachable;
}

export interface UseRefundsDeps {
  db: Database;
  /** Drops the counter's Redis gates (the day's count and the month's mark). */
  forget: (counter: Counter) => Promise<void>;
  clock: () => Date;
  log: Logger;
}

export class UseRefunds {
  constructor(private readonly deps: UseRefundsDeps) {}

  /**
   * Gives `use` back if `policy` says so for `outcome`, and then drops the counter's Redis gates
   * (the triggers' NOTIFY drops them too, a moment later). Never throws: a refund that cannot be
   * written leaves the use counted (logged), as a crash would.
   */
  async afterUpstream(use: CountedUse, policy: RefundOn | undefined, outcome: UpstreamOutcome): Promise<void> {
    if (!refundable(policy, outcome)) return;
    const now = this.deps.clock();
    const day = utcDay(now);
    const month = utcMonth(now);
    try {
      // A window that has ended is not changed: the use goes back only to today's and this month's.
      const refunded = await refundUse(this.deps.db, {
        counter: use.counter, day, daily: use.daily && use.day === day, month, monthly: use.monthly && use.month === month, cap: policy!.capPerDay ?? null,
      });
      if (refunded) await this.deps.forget(use.counter);
    } catch (err) {
      this.deps.log.warn({ err, ...use.counter }, 'refund: the use could not be given back; it stays counted');
    }
  }
}
