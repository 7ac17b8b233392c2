// Daily and monthly limit guard (spec §8, for every plan with a `daily` limit: CONTRACT §12; with a
// `monthly` one: §23). A use is reserved on every window of the plan at once or on none: the month's
// count sits on the same users row and the same conditional UPDATE reserves it. Postgres is the
// authority: one conditional UPDATE reserves uses only while the day's count is under the user's
// plan's limit, so no race on any instance can exceed it and users.daily_usage always shows the
// counted uses. A busy user's row would serialize every request on its lock, so an instance
// reserves a block of uses in one statement and serves them itself (the per-minute leases of
// minuteLimit.ts are the model): a lone client gets one use at a time (counts exact), concurrent
// ones a block twice as large each time they use one up in time, never more than MAX_BLOCK nor a
// BLOCK_SHARE-th of what remains (so the last uses of a day go one by one, exactly), and what is
// left after BLOCK_MS goes back to Postgres. A block is counted before it is served: an instance
// that dies holding one loses those uses for the day, never over-admits (docs/plans-and-quotas.md).
// A plan changed during the day applies its limit to the uses already counted. Redis is the fast gate in front of it: an
// atomic INCR per user and day refuses the repeats without touching Postgres. Losing Redis keys
// can only send a request to Postgres, which still refuses; with Redis down, hung or failing (the
// breaker of redisBreaker.ts answers at once then), Postgres alone decides. The month has no
// counting gate (a request the day refuses must not count against the month's, or the month would
// look spent after a few days of refused repeats): its Redis key only marks as spent a month whose
// last uses Postgres granted or whose use it refused, read beside the day's gate in the same round
// trip, and only for plans with a monthly limit, so a daily-only plan costs what it always did.
// Cluster-safe: each command names one key, and the day's gates are found by a SCAN of every
// master node (a SCAN sees one node's keys) and dropped one key at a time (a DEL of several keys
// in different slots is refused with CROSSSLOT).
import type { Logger } from 'pino';
import { failureLog, type FailureLog } from '../../telemetry/logThrottle.js';
import type { Config } from '../../config/schema.js';
import { dailyLimitParams, SPEC_UPGRADE_URL, type Denial } from '../../errors/index.js';
import { windowLimits, type PlanLimits } from '../plans.js';
import { utcDay, utcMonth } from '../../time.js';
import type { ChangeFeed } from '../../storage/changeFeed.js';
import type { Database } from '../../storage/db.js';
import type { RedisBreaker } from '../../storage/redis/breaker.js';
import { dropKeys, eachKeyBatch, INCR_WITH_TTL } from '../../storage/redis/scripts.js';
import { counterKey, counterOfKey, type Counter } from '../../storage/counters.js';
import { handBackUses, reserveUses, underLimit, type UseWindows } from '../../storage/dailyUsage.js';
import { untraced, type StoreCall, type StoreCalls } from '../../telemetry/storeCalls.js';
import { windowState, type QuotaOutcome, type QuotaState } from './quota.js';

const GATE_CALL: StoreCall = { system: 'redis', operation: 'EVAL' };
const MARK_CALL: StoreCall = { system: 'redis', operation: 'GET' };
const GATE_DROP_CALL: StoreCall = { system: 'redis', operation: 'DEL' };
/** The counting UPDATE's span, by owner type: the table it updates (storage/counters.ts). */
const RESERVE_CALLS: Record<Counter['ownerType'], StoreCall> = {
  user: { system: 'postgresql', operation: 'UPDATE', collection: 'users' }, org: { system: 'postgresql', operation: 'UPDATE', collection: 'organizations' },
};

/** Whose uses are counted (pipeline/subject.ts): the counter, and the plan the refusal names. */
export type Counted = Counter & { plan: string };

const KEY_TTL_MS = 48 * 3_600_000; // outlives the UTC day whatever the instance's clock skew
const MONTH_KEY_TTL_MS = 33 * 86_400_000; // outlives the UTC month likewise
/** How long an instance keeps a block of a user's uses before it hands back what it did not serve. */
const BLOCK_MS = 1_000;
/** The most uses one block holds. */
const MAX_BLOCK = 1_000;
/** A block holds at most this share of the user's remaining uses of the day. */
const BLOCK_SHARE = 20;

/** Uses of a user's day that this instance reserved in Postgres and serves itself. */
interface Lease {
  /** The windows it was counted on, with the limits that applied. */
  windows: UseWindows;
  left: number;
  granted: number;
  /** The requests that wanted this block when it came (the asker and those waiting on it). */
  demand: number;
  /** users.daily_usage and monthly_usage after the block was reserved (null: window not counted). */
  daily: number | null;
  monthly: number | null;
  until: number;
}

/** The limits a use is counted against: the plan's daily and monthly ones (at least one set). */
export type UseLimits = Pick<PlanLimits, 'daily' | 'monthly' | 'overage'>;
type Window = 'daily' | 'monthly';

function sameWindows(a: UseWindows, b: UseWindows): boolean {
  return a.day === b.day && a.month === b.month && a.daily === b.daily && a.monthly === b.monthly && a.overage === b.overage;
}

/** The Redis key of a counter's gate for a day (or of the mark of a spent month); `*` for every counter's (a SCAN pattern). */
function gateKey(counter: Counter | '*', day: string, window: Window = 'daily'): string {
  return `${window}:${counter === '*' ? '*' : counterKey(counter)}:${day}`;
}

/** The spec's words for the window that refused; the pipeline puts the route's in (plans.ts, worded). */
function refused(window: Window, plan: string, limit: number, now: Date): QuotaOutcome {
  const state = windowState(window, limit, limit, now);
  const code = window === 'daily' ? 'dailyLimitReached' : 'monthlyLimitReached';
  const denial: Denial = { code, params: dailyLimitParams(plan, limit), extra: { upgrade_url: SPEC_UPGRADE_URL }, headers: { 'retry-after': String(state.resetSec) } };
  return { state, denial };
}

/** The refusal of the windows found spent: the month's when it is (CONTRACT §23), else the day's. */
function refusedBy(w: UseWindows, plan: string, monthSpent: boolean, now: Date): QuotaOutcome {
  return monthSpent && w.monthly !== null ? refused('monthly', plan, w.monthly, now) : refused('daily', plan, w.daily!, now);
}

/** The admission's states: the day's, then the month's; and the use, should it be given back (refunds.ts). */
function admitted(counter: Counter, w: UseWindows, lease: Lease, now: Date): QuotaOutcome {
  const states: QuotaState[] = [];
  if (w.daily !== null) states.push(windowState('daily', w.daily, lease.daily! - lease.left, now));
  if (w.monthly !== null) states.push(windowState('monthly', w.monthly, lease.monthly! - lease.left, now));
  const use = { counter: { ownerType: counter.ownerType, id: counter.id }, day: w.day, daily: w.daily !== null, month: w.month, monthly: w.monthly !== null };
  return { state: states[0]!, others: states.slice(1), use };
}

export interface DailyStats {
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
  readonly stats: DailyStats = { refusedByRedis: 0, refusedByPostgres: 0, admitted: 0 };
  private readonly db: Database;
  private readonly redis: RedisBreaker | null;
  private readonly gatesFailing: FailureLog;
  private readonly clock: () => Date;
  private readonly log: Logger;
  private readonly config: () => Pick<Config, 'plans' | 'routes'>;
  private readonly feed: Pick<ChangeFeed, 'trusted'>;
  /** By counterKey. */
  private readonly leases = new Map<string, Lease>();
  private readonly asking = new Map<string, { waiting: number; done: Promise<QuotaOutcome | null> }>();
  private sweeping: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(deps: DailyLimiterDeps) {
    ({ db: this.db, redis: this.redis, clock: this.clock, config: this.config, feed: this.feed } = deps);
    // It logs from background work only (dropping and checking gates), never for a request.
    this.log = deps.log.child({ component: 'daily-limit' });
    this.gatesFailing = failureLog(this.log, 'daily limit: Redis gates could not be dropped or checked against Postgres; '
      + 'a gate left behind refuses its user from Redis until it is checked again (on the next reconnection or change feed restart)', {
      recoveredMessage: 'daily limit: Redis gates dropped and checked again',
    });
    // Each change that lowers a count, or may have, reaches Redis through whichever instance
    // hears it: a count lowered by hand drops that user's gate, an emptied users table every
    // gate (new users may get old ids). An announcement made while no instance heard it (feed
    // interrupted, Redis unreachable, no instance running) would leave a gate refusing all day a
    // user Postgres admits: today's gates are checked against Postgres whenever the feed starts
    // (subscribe before starting it) or resumes, and whenever Redis is back.
    deps.feed.subscribe({
      dailyUsageReset: (id) => void this.forget({ ownerType: 'user', id }),
      orgUsageReset: (id) => void this.forget({ ownerType: 'org', id }),
      // The gate also counts refused attempts: a plan with a higher limit must ask Postgres again.
      userChanged: (id) => void this.forget({ ownerType: 'user', id }),
      orgChanged: (id) => void (id === undefined ? this.forgetToday('the organizations were emptied') : this.forget({ ownerType: 'org', id })),
      truncated: (table) => void (table === 'users' && this.forgetToday('the users table was emptied')),
      resumed: () => void this.reconcileToday('the change feed (re)started'),
    });
    this.redis?.onBack(() => void this.reconcileToday('Redis is back'));
  }

  /** Counts one use on every window the limits name (the user's plan's); a denial when one is used up. */
  async consume(user: Counted, limits: UseLimits, calls: StoreCalls = untraced): Promise<QuotaOutcome> {
    const key = counterKey(user);
    for (let gated = false; ;) {
      const now = this.clock();
      const w: UseWindows = { day: utcDay(now), daily: limits.daily, month: utcMonth(now), monthly: limits.monthly, overage: limits.overage === true };
      const lease = this.leases.get(key);
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
          w.daily === null ? undefined : this.redisIncrement(gateKey(user, w.day), calls),
          w.monthly === null || w.overage ? false : this.monthMarked(user, w.month, calls),
        ]);
        if ((monthSpent || (gate !== undefined && gate > w.daily!)) && this.feed.trusted) {
          this.stats.refusedByRedis++;
          return refusedBy(w, user.plan, monthSpent, now);
        }
        continue;
      }
      // One ask per user at a time on this instance: the others wait for the block it brings back
      // (and try again on their own if it failed).
      const pending = this.asking.get(key);
      let refusal: QuotaOutcome | null | undefined;
      if (pending) {
        pending.waiting++;
        refusal = await pending.done.catch(() => undefined);
      } else {
        const mine = { waiting: 0, done: Promise.resolve<QuotaOutcome | null>(null) };
        mine.done = this.ask(user, w, now, lease, mine, calls);
        this.asking.set(key, mine);
        try {
          refusal = await mine.done;
        } finally {
          this.asking.delete(key);
        }
      }
      if (refusal) {
        this.stats.refusedByPostgres++;
        return refusal;
      }
    }
  }

  /** Asks Postgres for a block of the user's uses (handing back the old one's leftover); a refusal, or null with the block in leases. */
  private async ask(user: Counted, w: UseWindows, now: Date, old: Lease | undefined, pending: { waiting: number }, calls: StoreCalls): Promise<QuotaOutcome | null> {
    const key = gateKey(user, w.day);
    const sameDay = old && old.windows.day === w.day;
    const left = sameDay ? old.left : 0;
    // Back to the windows the old block was counted on (a window the plan no longer has keeps it).
    const handback = { daily: old?.windows.daily != null ? left : 0, monthly: old?.windows.monthly != null ? left : 0 };
    // A lone client asks for one use at a time (its counts stay exact); a block that was used up in
    // time by several concurrent requests is followed by one twice as large.
    const busy = sameDay && old.left === 0 && now.getTime() < old.until && old.demand > 1;
    const wanted = busy ? Math.min(MAX_BLOCK, 2 * Math.max(old.granted, old.demand)) : 1;
    let reserved: Awaited<ReturnType<typeof reserveUses>>;
    try {
      // In a transaction of its own: its SET LOCAL statement_timeout holds through PgBouncer too.
      reserved = await calls(RESERVE_CALLS[user.ownerType], () => this.db.transaction((tx) => reserveUses(tx, user, w, handback, wanted, BLOCK_SHARE)));
    } catch (err) {
      // The use was not counted, but the gate may have been pushed past the limit meanwhile by
      // the requests it refused while this one was in flight: handing back one slot (DECR) would
      // leave the user refused all day with nothing counted. Drop the gate instead; Postgres
      // decides the next request and the gate rebuilds itself from its answer. Awaited, so a
      // retry the client sends on seeing this failure, to any instance, finds the gate gone.
      // (The month's mark is only ever set from an answer of Postgres: nothing to undo there.)
      const redis = this.redis;
      if (redis && w.daily !== null) await calls(GATE_DROP_CALL, () => redis.call((client) => client.del(key)));
      throw err;
    }
    this.leases.delete(counterKey(user)); // its leftover was handed back by the statement
    if (!reserved || reserved.granted === 0) {
      // Redis had lost the count (flush, restart) or never had it (the month): mark the spent windows.
      const daySpent = !reserved || reserved.dailySpent;
      const monthSpent = !reserved || reserved.monthlySpent;
      if (this.redis && w.daily !== null && daySpent) void this.redis.call((client) => client.set(key, String(w.daily! + 1), 'PX', KEY_TTL_MS));
      if (w.monthly !== null && !w.overage && monthSpent) void this.markMonth(user, w.month);
      return refusedBy(w, user.plan, monthSpent, now);
    }
    // The block takes the month's last uses: mark the month spent now, so that once the day's gate
    // refuses too the answer is the month's (CONTRACT §23). Should the block go back unserved, the
    // lowered count drops the mark (027's trigger, forget below).
    if (this.redis && w.monthly !== null && !w.overage && reserved.monthly! >= w.monthly) void this.markMonth(user, w.month);
    // The asker and the requests that waited for it take their uses from the block.
    this.leases.set(counterKey(user), {
      windows: w, left: reserved.granted, granted: reserved.granted, demand: pending.waiting + 1, daily: reserved.daily, monthly: reserved.monthly, until: now.getTime() + BLOCK_MS,
    });
    this.scheduleSweep();
    return null;
  }

  /** Hands back the blocks held past BLOCK_MS, so users.daily_usage comes back to the uses served. */
  private scheduleSweep(): void {
    if (this.sweeping || this.closed) return;
    this.sweeping = setTimeout(() => {
      this.sweeping = undefined;
      void this.handBack(false).finally(() => this.leases.size && this.scheduleSweep());
    }, BLOCK_MS);
    this.sweeping.unref();
  }

  /** Hands back today's unused uses of the blocks held past their time (every block: `all`). */
  private async handBack(all: boolean): Promise<void> {
    const now = this.clock();
    const day = utcDay(now);
    // Per owner type ([ids, daily, monthly]): a user's counters and an organization's are on different rows (counters.ts).
    const back: Record<Counter['ownerType'], [number[], number[], number[]]> = { user: [[], [], []], org: [[], [], []] };
    for (const [key, lease] of this.leases) {
      if (!all && (now.getTime() < lease.until || this.asking.has(key))) continue;
      this.leases.delete(key);
      const { ownerType, id } = counterOfKey(key)!;
      // A block of an earlier day stays counted for that day and its month (what a block costs at midnight).
      if (lease.left > 0 && lease.windows.day === day) {
        const [ids, daily, monthly] = back[ownerType];
        ids.push(id);
        daily.push(lease.windows.daily === null ? 0 : lease.left);
        monthly.push(lease.windows.monthly === null ? 0 : lease.left);
      }
    }
    for (const ownerType of ['user', 'org'] as const) {
      const [ids, daily, monthly] = back[ownerType];
      // Those uses stay counted, never served, when this fails: the cost of a crash (docs/plans-and-quotas.md).
      if (ids.length) await handBackUses(this.db, ownerType, ids, daily, monthly, day, utcMonth(now)).catch((err: unknown) => {
        this.log.warn({ err, owners: ids.length, ownerType }, 'daily limit: reserved uses could not be handed back; they stay counted for today');
      });
    }
  }

  /** Hands back every block this instance holds (before the pool closes). */
  async close(): Promise<void> {
    this.closed = true;
    if (this.sweeping) clearTimeout(this.sweeping);
    await this.handBack(true);
  }

  /**
   * The user's count was lowered by hand (a NOTIFY from 004_daily_usage_reset.sql): today's gate
   * goes, and this month's mark (027_monthly_usage.sql), so the next request asks Postgres again
   * instead of being refused from Redis.
   */
  async forget(counter: Counter): Promise<void> {
    const redis = this.readyRedis();
    if (!redis) return;
    const now = this.clock();
    try {
      await dropKeys(redis, [gateKey(counter, utcDay(now)), gateKey(counter, utcMonth(now), 'monthly')]);
    } catch {
      this.gatesFailing.failed(new Error(`the gate of ${counter.ownerType} ${counter.id} could not be dropped`), { ...counter });
    }
  }

  /**
   * Drop every user's gate for today: the limit was raised (the gate also counts refused attempts,
   * harmless while the limit stays put, but it would keep refusing users the new limit admits), or
   * the users table was emptied (new users may get old ids). Always safe: Postgres stays the
   * authority and the gate rebuilds itself from its answers.
   */
  async forgetToday(reason: string): Promise<void> {
    const redis = this.readyRedis();
    if (!redis) return;
    const now = this.clock();
    try {
      let dropped = await eachKeyBatch(redis, gateKey('*', utcDay(now)), (keys) => dropKeys(redis, keys));
      dropped += await eachKeyBatch(redis, gateKey('*', utcMonth(now), 'monthly'), (keys) => dropKeys(redis, keys));
      this.log.info({ dropped, reason }, 'dropped today\'s Redis gate counters');
      this.gatesFailing.recovered();
    } catch (err) {
      this.gatesFailing.failed(err, { reason });
    }
  }

  /**
   * Drop today's gates that refuse a user Postgres would admit. A count lowered by hand, a user id
   * that came back or a TRUNCATE is announced by NOTIFY and each gate dropped by whoever hears it;
   * an announcement that came while no instance was listening, or while none could reach Redis, was
   * missed, and its gate would refuse that user for the rest of the day. Called whenever this
   * instance starts, hears Postgres again, or reaches Redis again. Only gates Postgres contradicts
   * go, so the users refused rightly stay refused from Redis.
   */
  async reconcileToday(reason: string): Promise<void> {
    const redis = this.readyRedis();
    if (!redis) return;
    const now = this.clock();
    try {
      let dropped = 0;
      for (const [window, unit] of [['daily', utcDay(now)], ['monthly', utcMonth(now)]] as const) {
        dropped += await eachKeyBatch(redis, gateKey('*', unit, window), async (keys) => {
          const counters = keys.map((k) => counterOfKey(k.split(':')[1] ?? '')).filter((c) => c !== undefined);
          const stale = counters.length ? await underLimit(this.db, counters, window, unit, windowLimits(this.config(), window)) : [];
          return dropKeys(redis, stale.map((c) => gateKey(c, unit, window)));
        });
      }
      if (dropped) this.log.info({ dropped, reason }, 'dropped Redis gates that Postgres no longer backs');
      this.gatesFailing.recovered();
    } catch (err) {
      this.gatesFailing.failed(err, { reason });
    }
  }

  /** Marks the counter's month as spent in Redis (Postgres counted its last use, or refused one). */
  private async markMonth(counter: Counter, month: string): Promise<void> {
    await this.redis?.call((client) => client.set(gateKey(counter, month, 'monthly'), '1', 'PX', MONTH_KEY_TTL_MS));
  }

  /** Whether Postgres found this month spent (the mark its answer left); false when Redis does not answer. */
  private async monthMarked(counter: Counter, month: string, calls: StoreCalls): Promise<boolean> {
    const redis = this.redis;
    if (!redis) return false;
    const key = gateKey(counter, month, 'monthly');
    return (await calls(MARK_CALL, () => redis.call((client) => client.get(key)))) != null;
  }

  /** Redis when it is in use; undefined otherwise (not configured, down or failing: Postgres alone decides). */
  private readyRedis(): RedisBreaker | undefined {
    return this.redis?.usable ? this.redis : undefined;
  }

  /** The gate after this request; undefined when Redis does not answer in time (the breaker logs why). */
  private async redisIncrement(key: string, calls: StoreCalls): Promise<number | undefined> {
    const redis = this.redis;
    if (!redis) return undefined;
    const answer = await calls(GATE_CALL, () => redis.call((client) => client.eval(INCR_WITH_TTL, 1, key, KEY_TTL_MS)));
    return answer === undefined ? undefined : Number(answer);
  }
}
