// Free daily limit guard (spec §8). Postgres is the authority: one conditional UPDATE admits a
// use only while the day's count is under the limit, so no race on any instance can exceed it
// and users.daily_usage always shows the counted uses. Redis is the fast gate in front of it: an
// atomic INCR per user and day refuses the repeats without touching Postgres. Losing Redis keys
// can only send a request to Postgres, which still refuses; with Redis down, Postgres alone decides.
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { dailyLimitMessage, UPGRADE_URL, type Denial } from '../errors.js';
import { utcDay } from '../http.js';
import type { Database } from '../storage/db.js';
import { countDailyUse, underDailyLimit, type User } from '../storage/users.js';

const KEY_TTL_MS = 48 * 3_600_000; // outlives the UTC day whatever the instance's clock skew

// INCR and set the expiry in one step, so a crash between the two cannot leave an immortal key.
const INCR_WITH_TTL = `local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return n`;

/** The Redis key of a user's gate for a day; `*` for every user's (a SCAN pattern). */
function gateKey(userId: number | '*', day: string): string {
  return `daily:${userId}:${day}`;
}

/** Hands `drop` each batch of the day's gate keys (as gateKey spells them) and adds up what it dropped. */
async function eachGateBatch(redis: Redis, day: string, drop: (keys: string[]) => Promise<number>): Promise<number> {
  const prefix = redis.options.keyPrefix ?? '';
  const pattern = `${escapeGlob(prefix)}${gateKey('*', day)}`;
  let cursor = '0';
  let dropped = 0;
  do {
    // SCAN does not apply ioredis' keyPrefix; DEL does, so strip it from what SCAN returns.
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    if (keys.length) dropped += await drop(keys.map((k) => k.slice(prefix.length)));
  } while (cursor !== '0');
  return dropped;
}

function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}

export interface DailyStats {
  refusedByRedis: number;
  refusedByPostgres: number;
  admitted: number;
}

export class DailyLimiter {
  readonly stats: DailyStats = { refusedByRedis: 0, refusedByPostgres: 0, admitted: 0 };
  private readonly denial: Denial;

  constructor(
    private readonly db: Database,
    private readonly redis: Redis | null,
    private readonly limit: number,
    private readonly clock: () => Date,
    private readonly log: Logger,
  ) {
    this.denial = { code: 'dailyLimitReached', message: dailyLimitMessage(limit), extra: { upgrade_url: UPGRADE_URL } };
  }

  /** null: the use is counted and the request may go on; otherwise the 429. */
  async consume(user: User): Promise<Denial | null> {
    if (user.plan !== 'free') return null;
    const day = utcDay(this.clock());
    const key = gateKey(user.id, day);
    const gate = await this.redisIncrement(key);
    if (gate !== undefined && gate > this.limit) {
      this.stats.refusedByRedis++;
      return this.denial;
    }
    let count: number | null;
    try {
      count = await countDailyUse(this.db, user.id, day, this.limit);
    } catch (err) {
      // The use was not counted, but the gate may have been pushed past the limit meanwhile by
      // the requests it refused while this one was in flight: handing back one slot (DECR) would
      // leave the user refused all day with nothing counted. Drop the gate instead; Postgres
      // decides the next request and the gate rebuilds itself from its answer. Awaited, so a
      // retry the client sends on seeing this failure, to any instance, finds the gate gone.
      if (gate !== undefined) await this.redis?.del(key).catch(() => {});
      throw err;
    }
    if (count === null) {
      this.stats.refusedByPostgres++;
      // Redis had lost the day's count (flush, restart): mark the day used up again.
      if (gate !== undefined) void this.redis?.set(key, String(this.limit + 1), 'PX', KEY_TTL_MS).catch(() => {});
      return this.denial;
    }
    this.stats.admitted++;
    return null;
  }

  /**
   * The user's count was lowered by hand (a NOTIFY from 004_daily_usage_reset.sql): today's gate
   * goes, so the next request asks Postgres again instead of being refused from Redis.
   */
  async forget(userId: number): Promise<void> {
    const redis = this.readyRedis();
    if (!redis) return;
    await redis.del(gateKey(userId, utcDay(this.clock()))).catch((err: unknown) => {
      this.log.warn({ err, userId }, 'daily limit: could not drop the Redis gate of a user whose count was reset');
    });
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
    try {
      const dropped = await eachGateBatch(redis, utcDay(this.clock()), (keys) => redis.del(...keys));
      this.log.info({ dropped, reason }, 'dropped today\'s Redis gate counters');
    } catch (err) {
      this.log.warn({ err, reason }, 'today\'s Redis gate counters could not be dropped; users refused today stay refused by Redis until tomorrow');
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
    const day = utcDay(this.clock());
    try {
      const dropped = await eachGateBatch(redis, day, async (keys) => {
        const ids = keys.map((k) => Number(k.split(':')[1])).filter(Number.isSafeInteger);
        const stale = ids.length ? await underDailyLimit(this.db, ids, day, this.limit) : [];
        return stale.length ? redis.del(...stale.map((id) => gateKey(id, day))) : 0;
      });
      if (dropped) this.log.info({ dropped, reason }, 'dropped Redis gates that Postgres no longer backs');
    } catch (err) {
      this.log.warn({ err, reason }, 'could not check today\'s Redis gates against Postgres; will again on the next reconnection');
    }
  }

  /** Redis when it is connected; undefined otherwise (not configured, or down: Postgres alone decides). */
  private readyRedis(): Redis | undefined {
    return this.redis?.status === 'ready' ? this.redis : undefined;
  }

  private async redisIncrement(key: string): Promise<number | undefined> {
    const redis = this.readyRedis();
    if (!redis) return undefined;
    try {
      return Number(await redis.eval(INCR_WITH_TTL, 1, key, KEY_TTL_MS));
    } catch (err) {
      this.log.warn({ err }, 'daily limit: Redis unavailable, counting in Postgres alone');
      return undefined;
    }
  }
}
