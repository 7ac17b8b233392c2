// The uses of the daily limiter's blocks (blocks.ts) that were reserved in Postgres and never
// served, on their way back to it. A hand-back that fails is kept and tried again at the next
// sweep, however long Postgres is away (a failover, CONTRACT §32): before, it was dropped with a
// warning, and every block an instance held when its primary went stayed counted for the day, so
// busy users were over-counted after each failover. Each hand-back is its own transaction, so a
// failure before its COMMIT certainly changed nothing and is retried; only a COMMIT whose answer
// was lost (CommitInDoubtError) may or may not have handed them back, and is not retried (twice
// would count served uses as unserved): those uses are counted in usesInDoubt, the bound of
// "counted − served" after a failover that /metrics reports.
import type { Logger } from 'pino';
import { CommitInDoubtError, type Database } from '../../../storage/database/index.js';
import { type Counter, counterOfKey, handBackUses } from '../../../storage/usage/index.js';
import { failureLog, type FailureLog } from '../../../telemetry/logThrottle.js';

/** Uses of one counter's day (and month) owed back to Postgres. */
interface Owed {
  day: string;
  daily: number;
  monthly: number;
}

export interface InDoubtUses {
  /** Uses reserved or handed back by in-doubt commits: at most this many are counted and not served. */
  usesInDoubt: number;
}

export class HandBacks {
  /** By counterKey. */
  private readonly owed = new Map<string, Owed>();
  private readonly failing: FailureLog;
  private flushing: Promise<void> = Promise.resolve();

  constructor(private readonly db: Database, private readonly log: Logger, private readonly stats: InDoubtUses) {
    this.failing = failureLog(log, 'daily limit: reserved uses could not be handed back yet; they are tried again every second until Postgres answers', {
      recoveredMessage: 'daily limit: reserved uses handed back again',
    });
  }

  /** Whether some uses still wait to go back. */
  get pending(): boolean {
    return this.owed.size > 0;
  }

  /** Owes `daily` and `monthly` uses of `day` back to the counter `key` (added to what it already owes for that day). */
  add(key: string, day: string, daily: number, monthly: number): void {
    if (daily <= 0 && monthly <= 0) return;
    const owed = this.owed.get(key);
    if (owed && owed.day === day) {
      owed.daily += daily;
      owed.monthly += monthly;
    } else this.owed.set(key, { day, daily, monthly });
  }

  /** Uses reserved by an in-doubt commit (a block, or the leftover it was handing back): counted, never retried. */
  inDoubt(uses: number, counter: Counter): void {
    this.stats.usesInDoubt += uses;
    this.log.warn({ uses, ...counter }, 'daily limit: a reservation\'s COMMIT was sent and its answer lost; up to this many uses may stay counted unserved (gateway_quota_uses_in_doubt_total)');
  }

  /**
   * Sends back what is owed for `day` (a block of an earlier day stays counted for that day and its
   * month: what a block costs at midnight). One flush at a time: two in flight (a sweep still
   * waiting for Postgres and the next, which a reservation schedules meanwhile; or close()'s) both
   * sent what was owed when each began, handing the same uses back twice.
   */
  flush(day: string, month: string): Promise<void> {
    const mine = this.flushing.then(() => this.flushOnce(day, month));
    this.flushing = mine.catch(() => {});
    return mine;
  }

  private async flushOnce(day: string, month: string): Promise<void> {
    // Per owner type: a user's counters and an organization's are on different rows (counters.ts).
    const back: Record<Counter['ownerType'], { keys: string[]; ids: number[]; daily: number[]; monthly: number[] }> = {
      user: { keys: [], ids: [], daily: [], monthly: [] }, org: { keys: [], ids: [], daily: [], monthly: [] },
    };
    for (const [key, owed] of this.owed) {
      if (owed.day !== day) {
        this.owed.delete(key);
        continue;
      }
      const { ownerType, id } = counterOfKey(key)!;
      const b = back[ownerType];
      b.keys.push(key);
      b.ids.push(id);
      b.daily.push(owed.daily);
      b.monthly.push(owed.monthly);
    }
    for (const ownerType of ['user', 'org'] as const) {
      const { keys, ids, daily, monthly } = back[ownerType];
      if (!ids.length) continue;
      try {
        await this.db.transaction((tx) => handBackUses(tx, ownerType, ids, daily, monthly, day, month));
        this.settle(keys, daily, monthly, day);
        this.failing.recovered();
      } catch (err) {
        if (!(err instanceof CommitInDoubtError)) {
          this.failing.failed(err, { owners: ids.length, ownerType });
          continue;
        }
        this.settle(keys, daily, monthly, day);
        this.stats.usesInDoubt += daily.reduce((sum, d, i) => sum + Math.max(d, monthly[i]!), 0);
        this.log.warn({ owners: ids.length, ownerType }, 'daily limit: a hand-back\'s COMMIT was sent and its answer lost; its uses may stay counted (gateway_quota_uses_in_doubt_total)');
      }
    }
  }

  /** Takes what was sent off what is owed: uses added while it was on its way stay owed. */
  private settle(keys: string[], daily: number[], monthly: number[], day: string): void {
    keys.forEach((key, i) => {
      const owed = this.owed.get(key);
      if (!owed || owed.day !== day) return;
      owed.daily -= daily[i]!;
      owed.monthly -= monthly[i]!;
      if (owed.daily <= 0 && owed.monthly <= 0) this.owed.delete(key);
    });
  }
}
