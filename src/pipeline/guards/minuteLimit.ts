// Per-minute limits (CONTRACT §12): a plan's `perMinute` on routes with `rateLimit: true`, counted
// per user (a request made with an API key counts for its user) and shared by every instance
// through Redis. GCRA, the leaky bucket of redis-cell and Stripe's limiter: a bucket of perMinute
// requests that refills continuously over 60 s, so a client may burst up to perMinute at once and
// then sustain perMinute a minute, and a refusal says exactly when the next request will pass.
// One Lua script reads and moves the bucket atomically, on Redis' clock, so instances with skewed
// clocks agree. No library: rate-limiter-flexible and @fastify/rate-limit count fixed windows,
// which admit twice the limit across a window boundary.
//
// Leases: a Redis round trip per request would cost a busy user's requests a third of their
// throughput (Redis' CPU and the client's, on the request path). So an instance may take several
// requests from the bucket at once and admit them itself, as Kong's and Envoy's limiters batch
// their counters, but only as many as the user sent through this instance in the last lease
// (from 1, doubling while they keep using them up in time), never more than a twentieth of what the
// bucket holds (so near the limit every request asks Redis, and counting stays exact there), and
// only for LEASE_MS: what is left then goes back into the bucket with the next ask. Requests are
// taken out of the bucket before they are admitted, so a lease never admits more than the limit;
// its cost is the other way: requests an instance holds for LEASE_MS are not available to the
// others meanwhile (docs/plans-and-quotas.md gives the tolerance).
// A refusal is remembered the same way, for REFUSAL_MS at most: a client hammering past its limit
// costs one Redis ask per instance per REFUSAL_MS, not one per request. Refusals never move a
// bucket and other instances' admissions only delay its next free request, so the memory can only
// be wrong by a lease another instance handed back in the meantime: a refusal REFUSAL_MS too long.
//
// With Redis down, hung or unconfigured, each instance keeps buckets in memory: the limit holds per
// instance (a client spread over N instances gets up to N times it) until Redis answers again
// (the breaker of storage/redis/breaker.ts decides, and logs). One key per bucket: cluster-safe.
import { LRUCache } from 'lru-cache';
import { minuteBucketScript, type RedisBreaker, type RedisClient } from '../../storage/redis/index.js';
import { untraced, type StoreCall, type StoreCalls } from '../../telemetry/storeCalls.js';

const BUCKET_CALL: StoreCall = { system: 'redis', operation: 'EVALSHA' };
import type { QuotaOutcome, QuotaState } from './quota.js';
import { counterKey, type Counter } from '../../storage/usage/index.js';

const WINDOW_MS = 60_000;
const LOCAL_MAX_USERS = 100_000;
/** How long an instance may keep requests it took from a bucket before it hands them back. */
const LEASE_MS = 100;
/** The most requests one ask takes out of a bucket. */
const MAX_LEASE = 1000;
/** One ask takes at most this share of what the bucket holds. */
const LEASE_SHARE = 20;
/** The longest an instance refuses a user on the strength of Redis' last refusal. */
const REFUSAL_MS = 250;

type Gcra = (key: string, intervalMs: number, handedBack: number, wanted: number) => Promise<[number, number, number]>;
type WithGcra = RedisClient & { gwMinuteBucket: Gcra };

/** Redis' last refusal of a user, while this instance repeats it without asking. */
interface Refusal {
  perMinute: number;
  until: number;
  /** When the bucket's next request frees up (Retry-After) and when it is full again. */
  freeAt: number;
  fullAt: number;
}

/** Requests this instance took from a user's bucket in Redis and has not admitted yet. */
interface Lease {
  perMinute: number;
  left: number;
  /** What the last ask took: the next one wants twice that if this lease is used up in time. */
  taken: number;
  until: number;
  /** The bucket's requests left and its time to full, as Redis said when the lease was taken. */
  remaining: number;
  fullAt: number;
}

export class MinuteLimiter {
  // By counterKey: a user's bucket, or an organization's pooled one (CONTRACT §22).
  private readonly local = new LRUCache<string, number>({ max: LOCAL_MAX_USERS });
  private readonly leases = new LRUCache<string, Lease>({ max: LOCAL_MAX_USERS });
  private readonly refusals = new LRUCache<string, Refusal>({ max: LOCAL_MAX_USERS });
  private readonly asking = new Map<string, Promise<unknown>>();

  constructor(private readonly redis: RedisBreaker | null, private readonly clock: () => Date = () => new Date()) {
    // EVALSHA with the script loaded once, not the script's text on every request.
    redis?.client.defineCommand('gwMinuteBucket', { numberOfKeys: 1, lua: minuteBucketScript(WINDOW_MS, LEASE_SHARE) });
  }

  /** Takes one request from the counter's bucket of `perMinute`; a denial with Retry-After when it is empty. `calls` traces its Redis call. */
  async consume(counter: Counter, perMinute: number, calls: StoreCalls = untraced): Promise<QuotaOutcome> {
    const userId = counterKey(counter);
    // While this instance asks Redis for a user, the user's other requests wait for that answer
    // (once) rather than ask too: its lease, or its refusal, is usually theirs as well.
    const asking = this.asking.get(userId);
    if (asking) await asking;
    const now = this.clock().getTime();
    const refused = this.refusals.get(userId);
    if (refused && refused.perMinute === perMinute && now < refused.until) return this.refusal(perMinute, refused.fullAt - now, refused.freeAt - now);
    const lease = this.leases.get(userId);
    if (lease && lease.perMinute === perMinute && lease.left > 0 && now < lease.until) {
      lease.left--;
      return { state: this.state(perMinute, lease.remaining + lease.left, lease.fullAt - now) };
    }
    const interval = WINDOW_MS / perMinute;
    const current = lease?.perMinute === perMinute ? lease : undefined;
    // A lease used up in time was too small for this user's pace: ask for twice as many. One that
    // just ran out of time says the pace: ask for what it served. After a pause, start from 1.
    const wanted = !current || now >= current.until + LEASE_MS ? 1
      : now < current.until ? Math.min(MAX_LEASE, current.taken * 2) : Math.max(1, current.taken - current.left);
    const handedBack = current && now >= current.until ? current.left : 0;
    if (current) current.left = 0; // handed back, or about to be replaced
    const ask = this.shared(userId, interval, handedBack, wanted, calls);
    this.asking.set(userId, ask);
    const shared = await ask;
    if (this.asking.get(userId) === ask) this.asking.delete(userId);
    const [taken, fullInMs, waitMs] = shared ?? this.inMemory(userId, interval);
    const remaining = Math.max(0, Math.floor((WINDOW_MS - fullInMs) / interval));
    if (shared && taken) {
      // A request of the same user that asked at the same time may have left a lease here already: keep its rest.
      const meanwhile = this.leases.get(userId);
      const kept = meanwhile && meanwhile !== current && meanwhile.perMinute === perMinute ? meanwhile.left : 0;
      this.leases.set(userId, { perMinute, left: taken - 1 + kept, taken, until: now + LEASE_MS, remaining, fullAt: now + fullInMs });
    }
    if (taken) return { state: this.state(perMinute, remaining + Math.max(0, taken - 1), fullInMs) };
    if (shared) this.refusals.set(userId, { perMinute, until: now + Math.min(waitMs, REFUSAL_MS), freeAt: now + waitMs, fullAt: now + fullInMs });
    return this.refusal(perMinute, fullInMs, waitMs);
  }

  private refusal(perMinute: number, fullInMs: number, waitMs: number): QuotaOutcome {
    const state = this.state(perMinute, 0, fullInMs);
    return { state, denial: { code: 'tooManyRequests', headers: { 'retry-after': String(Math.max(1, Math.ceil(waitMs / 1000))) } } };
  }

  private state(perMinute: number, remaining: number, fullInMs: number): QuotaState {
    return { policy: 'minute', limit: perMinute, windowSec: WINDOW_MS / 1000, remaining, resetSec: Math.max(0, Math.ceil(fullInMs / 1000)) };
  }

  private async shared(userId: string, interval: number, handedBack: number, wanted: number, calls: StoreCalls): Promise<[number, number, number] | undefined> {
    const redis = this.redis;
    if (!redis) return undefined;
    const answer = await calls(BUCKET_CALL, () => redis.call((client) => (client as WithGcra).gwMinuteBucket(`rate:${userId}`, interval, handedBack, wanted)));
    return answer?.map(Number) as [number, number, number] | undefined;
  }

  /** The same bucket, kept by this instance alone, one request at a time. */
  private inMemory(userId: string, interval: number): [number, number, number] {
    const now = this.clock().getTime();
    const tat = Math.max(this.local.get(userId) ?? 0, now);
    const next = tat + interval;
    const wait = next - WINDOW_MS - now;
    if (wait > 0) return [0, tat - now, wait];
    this.local.set(userId, next);
    return [1, next - now, 0];
  }
}
