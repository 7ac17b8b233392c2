// Auth rate limit (CONTRACT auth.rateLimit): at most `max` requests per `window` per client
// address on /api/v1/auth/*, against password guessing and credential stuffing.
// With Redis the count is shared by every instance, so adding instances behind a load balancer
// does not multiply an attacker's budget. When Redis fails, each instance counts in-process
// instead: limits stay in force (per instance) rather than switching off, and Redis is used again
// as soon as it answers. Settings are read per request, so a reload changes them live.
import type { FastifyRateLimitStore, RateLimitPluginOptions } from '@fastify/rate-limit';
import { LRUCache } from 'lru-cache';
import { GatewayError } from '../errors.js';
import type { Services } from '../services.js';

type Result = { current: number; ttl: number };
type Callback = (error: Error | null, result?: Result) => void;

const LOCAL_MAX_KEYS = 100_000;

// INCR and (re)arm the expiry in one step: a key can never be left without one.
const INCR_WITH_WINDOW = `local n = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if n == 1 or ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {n, ttl}`;

/** Fixed windows per key; LRU-bounded so a flood of spoofed addresses cannot grow memory. */
class LocalWindows {
  private readonly windows = new LRUCache<string, { count: number; resetAt: number }>({ max: LOCAL_MAX_KEYS });

  incr(key: string, windowMs: number): Result {
    const now = Date.now();
    let entry = this.windows.get(key);
    if (!entry || entry.resetAt <= now) {
      entry = { count: 0, resetAt: now + windowMs };
      this.windows.set(key, entry);
    }
    entry.count++;
    return { current: entry.count, ttl: entry.resetAt - now };
  }
}

export function authRateLimitStore(services: Pick<Services, 'redis' | 'log'>) {
  const { redis, log } = services;
  const local = new LocalWindows();
  let redisFailing = false;

  return class AuthRateLimitStore implements FastifyRateLimitStore {
    incr(key: string, callback: Callback, timeWindow: number): void {
      const fallback = () => callback(null, local.incr(key, timeWindow));
      // Not connected: do not even try (ioredis would fail the command anyway, offline queue off).
      if (!redis || redis.status !== 'ready') return fallback();
      redis.eval(INCR_WITH_WINDOW, 1, `ratelimit:${key}`, timeWindow).then((reply) => {
        const [current, ttl] = reply as [number, number];
        if (redisFailing) log.info('auth rate limit: counting in Redis again');
        redisFailing = false;
        callback(null, { current: Number(current), ttl: Number(ttl) });
      }, (err: unknown) => {
        if (!redisFailing) log.warn({ err }, 'auth rate limit: Redis failed, counting in-process until it answers');
        redisFailing = true;
        fallback();
      });
    }

    child(): FastifyRateLimitStore {
      return this;
    }
  };
}

/** Options for @fastify/rate-limit on the /api/v1/auth scope. */
export function authRateLimitOptions(services: Services): RateLimitPluginOptions {
  // services.config is swapped as a whole on reload: read it per request, never capture it.
  const settings = () => services.config.auth.rateLimit;
  return {
    store: authRateLimitStore(services),
    max: () => settings().max,
    timeWindow: () => settings().window,
    // max 0 disables the limit; checked per request so a reload can switch it on or off.
    allowList: () => settings().max === 0,
    // The default key generator reads request.ip (X-Forwarded-For only under server.trustProxy)
    // and folds IPv6 addresses into their /64, so rotating through one's own prefix does not help.
    errorResponseBuilder: () => new GatewayError('rateLimited'),
  };
}
