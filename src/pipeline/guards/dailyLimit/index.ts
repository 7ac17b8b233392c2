// Daily and monthly limit guard (spec §8, for every plan with a `daily` limit: CONTRACT §12; with a
// `monthly` one: §23), the folder's one door. A use is reserved on every window of the plan at once
// or on none: the month's count sits on the same users row and the same conditional UPDATE reserves
// it. Postgres is the authority, in blocks an instance reserves and serves itself (blocks.ts), so
// users.daily_usage always shows the counted uses (docs/plans-and-quotas.md). A plan changed during
// the day applies its limit to the uses already counted. Redis is the fast gate in front of it
// (gate.ts), kept true to Postgres by the change feed (reactions.ts). The month has no counting
// gate (a request the day refuses must not count against the month's, or the month would look
// spent after a few days of refused repeats): its Redis key only marks as spent a month whose last
// uses Postgres granted or whose use it refused, read beside the day's gate in the same round
// trip, and only for plans with a monthly limit, so a daily-only plan costs what it always did.
import type { Logger } from 'pino';
import type { Config } from '../../../config/schema.js';
import type { ChangeFeed } from '../../../storage/feed/index.js';
import { type Counter, counterKey, type UseWindows } from '../../../storage/usage/index.js';
import type { Database } from '../../../storage/database/index.js';
import type { RedisBreaker } from '../../../storage/redis/index.js';
import { untraced, type StoreCalls } from '../../../telemetry/storeCalls.js';
import { utcDay, utcMonth } from '../../../time.js';
import type { PlanLimits } from '../../plans.js';
import type { QuotaOutcome } from '../quota.js';
import { Blocks, sameWindows, type Counted } from './blocks.js';
import { gateKey, Gates } from './gate.js';
import type { InDoubtUses } from './handBacks.js';
import { admitted, refusedBy } from './outcomes.js';
import { GateReactions } from './reactions.js';

export type { Counted } from './blocks.js';

/** The limits a use is counted against: the plan's daily and monthly ones (at least one set). */
export type UseLimits = Pick<PlanLimits, 'daily' | 'monthly' | 'overage'>;

export interface DailyStats extends InDoubtUses {
  refusedByRedis: number;
  refusedByPostgres: number;
  admitted: number;
}

export interface DailyLimiterDeps {
  db: Database;
  redis: RedisBreaker | null;
  /** plans (and routes, for their plan names), read when checking gates: a reload may change them. */
  config: () => Pick<Config, 'plans' | 'routes'>;
  clock: () => Date;
  log: Logger;
  feed: ChangeFeed;
}

export class DailyLimiter {
  readonly stats: DailyStats = { refusedByRedis: 0, refusedByPostgres: 0, admitted: 0, usesInDoubt: 0 };
  private readonly clock: () => Date;
  private readonly feed: Pick<ChangeFeed, 'trusted'>;
  private readonly gates: Gates;
  private readonly blocks: Blocks;
  private readonly reactions: GateReactions;

  constructor(deps: DailyLimiterDeps) {
    ({ clock: this.clock, feed: this.feed } = deps);
    // It logs from background work only (dropping and checking gates), never for a request.
    const log = deps.log.child({ component: 'daily-limit' });
    this.gates = new Gates(deps.redis);
    this.blocks = new Blocks(deps.db, this.gates, deps.clock, log, this.stats);
    this.reactions = new GateReactions({ db: deps.db, config: deps.config, clock: deps.clock, log }, this.gates);
    this.reactions.listen(deps.feed);
  }

  /** Counts one use on every window the limits name (the user's plan's); a denial when one is used up. */
  async consume(user: Counted, limits: UseLimits, calls: StoreCalls = untraced): Promise<QuotaOutcome> {
    const key = counterKey(user);
    for (let gated = false; ;) {
      const now = this.clock();
      const w: UseWindows = { day: utcDay(now), daily: limits.daily, month: utcMonth(now), monthly: limits.monthly, overage: limits.overage === true };
      const lease = this.blocks.leases.get(key);
      if (lease && sameWindows(lease.windows, w) && lease.left > 0 && now.getTime() < lease.until) {
        lease.left--;
        this.stats.admitted++;
        return admitted(user, w, lease, now);
      }
      // The Redis gate counts each request that finds no block here, once: never more than the
      // uses Postgres counts plus the ones it refuses, so a gate past the limit means the day (or,
      // with a monthly limit, the day or the month) is used up; the month's mark says which.
      // Unless a change that drops it (a plan raised, a count lowered) is on its way: while the
      // change feed is not trusted, the user's plan is read from Postgres, and so is the refusal.
      if (!gated) {
        gated = true;
        const [gate, monthSpent] = await Promise.all([
          w.daily === null ? undefined : this.gates.increment(gateKey(user, w.day), calls),
          w.monthly === null || w.overage ? false : this.gates.monthMarked(user, w.month, calls),
        ]);
        if ((monthSpent || (gate !== undefined && gate > w.daily!)) && this.feed.trusted) {
          this.stats.refusedByRedis++;
          return refusedBy(w, user.plan, monthSpent, now);
        }
        continue;
      }
      const refusal = await this.askOnce(key, user, w, now, lease, calls);
      if (refusal) {
        this.stats.refusedByPostgres++;
        return refusal;
      }
    }
  }

  /**
   * One ask per counter at a time on this instance: the others wait for the block it brings back
   * (and try again on their own if it failed, undefined).
   */
  private async askOnce(key: string, user: Counted, w: UseWindows, now: Date, lease: Parameters<Blocks['ask']>[3], calls: StoreCalls): Promise<QuotaOutcome | null | undefined> {
    const pending = this.blocks.asking.get(key);
    if (pending) {
      pending.waiting++;
      return await pending.done.catch(() => undefined);
    }
    const mine = { waiting: 0, done: Promise.resolve<QuotaOutcome | null>(null) };
    mine.done = this.blocks.ask(user, w, now, lease, mine, calls);
    this.blocks.asking.set(key, mine);
    try {
      return await mine.done;
    } finally {
      this.blocks.asking.delete(key);
    }
  }

  /** Hands back every block this instance holds (before the pool closes). */
  close(): Promise<void> {
    return this.blocks.close();
  }

  /** A counter's count was lowered by hand: its gate and month's mark go (reactions.ts). */
  forget(counter: Counter): Promise<void> {
    return this.reactions.forget(counter);
  }

  /** Drop every counter's gate for today (a raised limit, an emptied users table). */
  forgetToday(reason: string): Promise<void> {
    return this.reactions.forgetToday(reason);
  }

  /** Drop today's gates that refuse a counter Postgres would admit. */
  reconcileToday(reason: string): Promise<void> {
    return this.reactions.reconcileToday(reason);
  }
}
