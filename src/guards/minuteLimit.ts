// Per-minute limits (CONTRACT §12): a plan's `perMinute` on routes with `rateLimit: true`, counted
// per user (a request made with an API key counts for its user) and shared by every instance
// through Redis. GCRA, the leaky bucket of redis-cell and Stripe's limiter: a bucket of perMinute
// requests that refills continuously over 60 s, so a client may burst up to perMinute at once and
// then sustain perMinute a minute, and a refusal says exactly when the next request will pass.
// One Lua script reads and moves the bucket atomically, on Redis' clock, so instances with skewed
// clocks agree. No library: rate-limiter-flexible and @fastify/rate-limit count fixed windows,
// which admit twice the limit across a window boundary.
// With Redis down, hung or unconfigured, each instance keeps buckets in memory: the limit holds per
// instance (a client spread over N instances gets up to N times it) until Redis answers again
// (the breaker of redisBreaker.ts decides, and logs). One key per bucket: cluster-safe.
import { LRUCache } from 'lru-cache';
import type { RedisClient } from '../storage/redis.js';
import type { RedisBreaker } from '../storage/redisBreaker.js';
import type { QuotaOutcome } from './quota.js';

const WINDOW_MS = 60_000;
const LOCAL_MAX_USERS = 100_000;

// KEYS[1]: the user's bucket (its theoretical arrival time, ms). ARGV[1]: ms between two requests
// at the sustained rate, fractional unless perMinute divides 60,000 (PX takes whole ms only, and
// at least 1: past about 100 million a minute the interval is below a double's precision at
// today's epoch ms, so the time does not move at all and such a limit admits everything). Answers { admitted 0|1, ms until the bucket is full again, ms to wait }.
const GCRA = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local next = tat + interval
local wait = next - ${WINDOW_MS} - now
if wait > 0 then return {0, tat - now, wait} end
redis.call('SET', KEYS[1], next, 'PX', math.max(1, math.ceil(next - now)))
return {1, next - now, 0}`;

type Gcra = (key: string, intervalMs: number) => Promise<[number, number, number]>;
type WithGcra = RedisClient & { gwMinuteBucket: Gcra };

export class MinuteLimiter {
  private readonly local = new LRUCache<number, number>({ max: LOCAL_MAX_USERS });

  constructor(private readonly redis: RedisBreaker | null, private readonly clock: () => Date = () => new Date()) {
    // EVALSHA with the script loaded once, not the script's text on every request.
    redis?.client.defineCommand('gwMinuteBucket', { numberOfKeys: 1, lua: GCRA });
  }

  /** Takes one request from the user's bucket of `perMinute`; a denial with Retry-After when it is empty. */
  async consume(userId: number, perMinute: number): Promise<QuotaOutcome> {
    const interval = WINDOW_MS / perMinute;
    const [admitted, fullInMs, waitMs] = (await this.shared(userId, interval)) ?? this.inMemory(userId, interval);
    const state = {
      policy: 'minute' as const,
      limit: perMinute,
      windowSec: WINDOW_MS / 1000,
      remaining: admitted ? Math.max(0, Math.floor((WINDOW_MS - fullInMs) / interval)) : 0,
      resetSec: Math.ceil(fullInMs / 1000),
    };
    if (admitted) return { state };
    return { state, denial: { code: 'tooManyRequests', headers: { 'retry-after': String(Math.max(1, Math.ceil(waitMs / 1000))) } } };
  }

  private async shared(userId: number, interval: number): Promise<[number, number, number] | undefined> {
    const answer = await this.redis?.call((client) => (client as WithGcra).gwMinuteBucket(`rate:${userId}`, interval));
    return answer?.map(Number) as [number, number, number] | undefined;
  }

  /** The same bucket, kept by this instance alone. */
  private inMemory(userId: number, interval: number): [number, number, number] {
    const now = this.clock().getTime();
    const tat = Math.max(this.local.get(userId) ?? 0, now);
    const next = tat + interval;
    const wait = next - WINDOW_MS - now;
    if (wait > 0) return [0, tat - now, wait];
    this.local.set(userId, next);
    return [1, next - now, 0];
  }
}
