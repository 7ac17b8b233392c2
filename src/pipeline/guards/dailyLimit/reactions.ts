// How the daily limiter's gates (gate.ts) follow changes made elsewhere. Each change that lowers a
// count, or may have, reaches Redis through whichever instance hears it: a count lowered by hand
// drops that counter's gate, an emptied users table every gate (new users may get old ids). An
// announcement made while no instance heard it (feed interrupted, Redis unreachable, no instance
// running) would leave a gate refusing all day a user Postgres admits: today's gates are checked
// against Postgres whenever the feed starts (subscribe before starting it) or resumes, and whenever
// Redis is back. Cluster-safe: the day's gates are found by a SCAN of every master node (a SCAN
// sees one node's keys) and dropped one key at a time (a DEL of several keys in different slots is
// refused with CROSSSLOT).
import type { Logger } from 'pino';
import type { Config } from '../../../config/schema.js';
import type { ChangeFeed } from '../../../storage/feed/index.js';
import { type Counter, counterOfKey, underLimit } from '../../../storage/usage/index.js';
import type { Database } from '../../../storage/database/index.js';
import { dropKeys, eachKeyBatch } from '../../../storage/redis/index.js';
import { failureLog, type FailureLog } from '../../../telemetry/logThrottle.js';
import { utcDay, utcMonth } from '../../../time.js';
import { windowLimits } from '../../plans.js';
import { gateKey, type Gates } from './gate.js';

export interface ReactionDeps {
  db: Database;
  /** plans (and routes, for their plan names), read when checking gates: a reload may change them. */
  config: () => Pick<Config, 'plans' | 'routes'>;
  clock: () => Date;
  log: Logger;
}

/** What drops or checks the gates, from background work only (never for a request). */
export class GateReactions {
  private readonly gatesFailing: FailureLog;

  constructor(private readonly deps: ReactionDeps, private readonly gates: Gates) {
    this.gatesFailing = failureLog(deps.log, 'daily limit: Redis gates could not be dropped or checked against Postgres; '
      + 'a gate left behind refuses its user from Redis until it is checked again (on the next reconnection or change feed restart)', {
      recoveredMessage: 'daily limit: Redis gates dropped and checked again',
    });
  }

  /** Listens to the change feed and to Redis coming back (subscribed before the feed starts). */
  listen(feed: ChangeFeed): void {
    feed.subscribe({
      dailyUsageReset: (id) => void this.forget({ ownerType: 'user', id }),
      orgUsageReset: (id) => void this.forget({ ownerType: 'org', id }),
      // The gate also counts refused attempts: a plan with a higher limit must ask Postgres again.
      userChanged: (id) => void this.forget({ ownerType: 'user', id }),
      orgChanged: (id) => void (id === undefined ? this.forgetToday('the organizations were emptied') : this.forget({ ownerType: 'org', id })),
      truncated: (table) => void (table === 'users' && this.forgetToday('the users table was emptied')),
      resumed: () => void this.reconcileToday('the change feed (re)started'),
    });
    this.gates.redis?.onBack(() => void this.reconcileToday('Redis is back'));
  }

  /**
   * The counter's count was lowered by hand (a NOTIFY from 004_daily_usage_reset.sql): today's gate
   * goes, and this month's mark (027_monthly_usage.sql), so the next request asks Postgres again
   * instead of being refused from Redis.
   */
  async forget(counter: Counter): Promise<void> {
    const redis = this.gates.ready();
    if (!redis) return;
    const now = this.deps.clock();
    try {
      await dropKeys(redis, [gateKey(counter, utcDay(now)), gateKey(counter, utcMonth(now), 'monthly')]);
    } catch {
      this.gatesFailing.failed(new Error(`the gate of ${counter.ownerType} ${counter.id} could not be dropped`), { ...counter });
    }
  }

  /**
   * Drop every counter's gate for today: the limit was raised (the gate also counts refused attempts,
   * harmless while the limit stays put, but it would keep refusing users the new limit admits), or
   * the users table was emptied (new users may get old ids). Always safe: Postgres stays the
   * authority and the gate rebuilds itself from its answers.
   */
  async forgetToday(reason: string): Promise<void> {
    const redis = this.gates.ready();
    if (!redis) return;
    const now = this.deps.clock();
    try {
      let dropped = await eachKeyBatch(redis, gateKey('*', utcDay(now)), (keys) => dropKeys(redis, keys));
      dropped += await eachKeyBatch(redis, gateKey('*', utcMonth(now), 'monthly'), (keys) => dropKeys(redis, keys));
      this.deps.log.info({ dropped, reason }, 'dropped today\'s Redis gate counters');
      this.gatesFailing.recovered();
    } catch (err) {
      this.gatesFailing.failed(err, { reason });
    }
  }

  /**
   * Drop today's gates that refuse a counter Postgres would admit. A count lowered by hand, a user id
   * that came back or a TRUNCATE is announced by NOTIFY and each gate dropped by whoever hears it;
   * an announcement that came while no instance was listening, or while none could reach Redis, was
   * missed, and its gate would refuse that user for the rest of the day. Called whenever this
   * instance starts, hears Postgres again, or reaches Redis again. Only gates Postgres contradicts
   * go, so the users refused rightly stay refused from Redis.
   */
  async reconcileToday(reason: string): Promise<void> {
    const redis = this.gates.ready();
    if (!redis) return;
    const now = this.deps.clock();
    try {
      let dropped = 0;
      for (const [window, unit] of [['daily', utcDay(now)], ['monthly', utcMonth(now)]] as const) {
        dropped += await eachKeyBatch(redis, gateKey('*', unit, window), async (keys) => {
          const counters = keys.map((k) => counterOfKey(k.split(':')[1] ?? '')).filter((c) => c !== undefined);
          const stale = counters.length ? await underLimit(this.deps.db, counters, window, unit, windowLimits(this.deps.config(), window)) : [];
          return dropKeys(redis, stale.map((c) => gateKey(c, unit, window)));
        });
      }
      if (dropped) this.deps.log.info({ dropped, reason }, 'dropped Redis gates that Postgres no longer backs');
      this.gatesFailing.recovered();
    } catch (err) {
      this.gatesFailing.failed(err, { reason });
    }
  }
}
