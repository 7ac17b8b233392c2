// Auth rate limit (CONTRACT auth.rateLimit): at most `max` requests per `window` per client
// address on /api/v1/auth/*, against password guessing and credential stuffing.
// With Redis the count is shared by every instance, so adding instances behind a load balancer
// does not multiply an attacker's budget. When Redis fails or hangs, each instance counts in-process
// instead: limits stay in force (per instance) rather than switching off, and Redis is used again
// as soon as it answers (the breaker of storage/redis/breaker.ts decides, and logs). One key per client
// address: cluster-safe. Settings are read per request, so a reload changes them live.
import type { FastifyRateLimitStore, RateLimitPluginOptions } from '@fastify/rate-limit';
import type { FastifyRequest } from 'fastify';
import { LRUCache } from 'lru-cache';
import { GatewayError } from '../errors/index.js';
import type { Config } from '../config/schema.js';
import { INCR_WITH_WINDOW, type RedisBreaker } from '../storage/redis/index.js';

type Result = { current: number; ttl: number };
type Callback = (error: Error | null, result?: Result) => void;

const LOCAL_MAX_KEYS = 100_000;

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

export interface AuthRateLimitDeps {
  redis: RedisBreaker | null;
}

/** auth.rateLimit as the request's pinned live snapshot has it: a reload changes it live. */
const settings = (request: FastifyRequest): Config['auth']['rateLimit'] => request.context.live.settings.auth.rateLimit;

export function authRateLimitStore({ redis }: Pick<AuthRateLimitDeps, 'redis'>) {
  const local = new LocalWindows();

  return class AuthRateLimitStore implements FastifyRateLimitStore {
    incr(key: string, callback: Callback, timeWindow: number): void {
      const fallback = () => callback(null, local.incr(key, timeWindow));
      if (!redis) return fallback();
      void redis.call((client) => client.eval(INCR_WITH_WINDOW, 1, `ratelimit:${key}`, timeWindow)).then((reply) => {
        if (reply === undefined) return fallback();
        const [current, ttl] = reply as [number, number];
        callback(null, { current: Number(current), ttl: Number(ttl) });
      });
    }

    child(): FastifyRateLimitStore {
      return this;
    }
  };
}

/** Options for @fastify/rate-limit on the /api/v1/auth scope. */
export function authRateLimitOptions(deps: AuthRateLimitDeps): RateLimitPluginOptions {
  return {
    store: authRateLimitStore(deps),
    max: (request) => settings(request).max,
    timeWindow: (request) => settings(request).window,
    // max 0 disables the limit; checked per request so a reload can switch it on or off.
    allowList: (request) => settings(request).max === 0,
    // The default key generator reads request.ip (X-Forwarded-For only under server.trustProxy)
    // and folds IPv6 addresses into their /64, so rotating through one's own prefix does not help.
    errorResponseBuilder: () => new GatewayError('rateLimited'),
  };
}
