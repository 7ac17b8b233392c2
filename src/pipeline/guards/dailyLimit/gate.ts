// The daily limiter's fast gate in Redis (index.ts): an atomic INCR per counter and day refuses the
// repeats without touching Postgres, and a month's mark says that Postgres found the month spent.
// Losing these keys can only send a request to Postgres, which still refuses; with Redis down, hung
// or failing (the breaker of storage/redis/breaker.ts answers at once then), Postgres alone decides.
// Cluster-safe: each command names one key.
import { INCR_WITH_TTL, type RedisBreaker } from '../../../storage/redis/index.js';
import { counterKey, type Counter } from '../../../storage/usage/index.js';
import type { StoreCall, StoreCalls } from '../../../telemetry/storeCalls.js';

const GATE_CALL: StoreCall = { system: 'redis', operation: 'EVAL' };
const MARK_CALL: StoreCall = { system: 'redis', operation: 'GET' };
const GATE_DROP_CALL: StoreCall = { system: 'redis', operation: 'DEL' };

const KEY_TTL_MS = 48 * 3_600_000; // outlives the UTC day whatever the instance's clock skew
const MONTH_KEY_TTL_MS = 33 * 86_400_000; // outlives the UTC month likewise

export type Window = 'daily' | 'monthly';

/** The Redis key of a counter's gate for a day (or of the mark of a spent month); `*` for every counter's (a SCAN pattern). */
export function gateKey(counter: Counter | '*', day: string, window: Window = 'daily'): string {
  return `${window}:${counter === '*' ? '*' : counterKey(counter)}:${day}`;
}

/** The gates and marks of one limiter, over its Redis (none: every call answers as if Redis were away). */
export class Gates {
  constructor(readonly redis: RedisBreaker | null) {}

  /** Redis when it is in use; undefined otherwise (not configured, down or failing: Postgres alone decides). */
  ready(): RedisBreaker | undefined {
    return this.redis?.usable ? this.redis : undefined;
  }

  /** The gate after this request; undefined when Redis does not answer in time (the breaker logs why). */
  async increment(key: string, calls: StoreCalls): Promise<number | undefined> {
    const redis = this.redis;
    if (!redis) return undefined;
    const answer = await calls(GATE_CALL, () => redis.call((client) => client.eval(INCR_WITH_TTL, 1, key, KEY_TTL_MS)));
    return answer === undefined ? undefined : Number(answer);
  }

  /** Whether Postgres found this month spent (the mark its answer left); false when Redis does not answer. */
  async monthMarked(counter: Counter, month: string, calls: StoreCalls): Promise<boolean> {
    const redis = this.redis;
    if (!redis) return false;
    const key = gateKey(counter, month, 'monthly');
    return (await calls(MARK_CALL, () => redis.call((client) => client.get(key)))) != null;
  }

  /** Marks the counter's month as spent in Redis (Postgres counted its last use, or refused one). */
  async markMonth(counter: Counter, month: string): Promise<void> {
    await this.redis?.call((client) => client.set(gateKey(counter, month, 'monthly'), '1', 'PX', MONTH_KEY_TTL_MS));
  }

  /** Sets the day's gate past `daily`: Postgres refused, and Redis had lost the count (flush, restart). */
  markDaySpent(key: string, daily: number): void {
    if (this.redis) void this.redis.call((client) => client.set(key, String(daily + 1), 'PX', KEY_TTL_MS));
  }

  /** Drops a gate, awaited (a retry sent to any instance finds it gone). */
  async drop(key: string, calls: StoreCalls): Promise<void> {
    const redis = this.redis;
    if (redis) await calls(GATE_DROP_CALL, () => redis.call((client) => client.del(key)));
  }
}
