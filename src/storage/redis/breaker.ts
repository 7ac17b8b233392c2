// Every Redis command of the guards (daily gates, per-minute buckets, the auth rate limit) goes
// through here. A Redis that hangs (accepts connections, answers nothing: SIGSTOP, a partition, a
// full network buffer) keeps the client "ready" and every command waiting: without a bound, each
// request paid the client's whole command timeout, a second (issue 18). So each command gets
// storage.redisTimeout, after which the caller uses its fallback (daily: Postgres alone;
// per-minute and auth rate limits: in-process) and, after a few failures in a row, the breaker
// opens: no request asks Redis for a cool-down, then one probe, on a timer off the request path,
// closes it again once Redis takes writes (or keeps it open another cool-down). Requests never
// wait on a Redis that is known to be failing.
import type { Logger } from 'pino';
import { failureLog, type FailureLog } from '../../telemetry/logThrottle.js';
import { withTimeout } from '../../time.js';
import { CLUSTER_NODE_BY_URL, isClusterNodeByUrl, probeRedis, type RedisClient } from './client.js';

/** Failures in a row that open the breaker. */
const FAILURES_TO_OPEN = 3;
/** How long an open breaker keeps requests off Redis before it probes again. */
const COOL_DOWN_MS = 1000;
/** What work off the request path may wait (checking the day's gates, dropping one): the client's own bound. */
export const BACKGROUND_TIMEOUT_MS = 1000;

export interface RedisBreakerOptions {
  /** storage.redisTimeout: the longest a request waits for one Redis command. */
  timeoutMs: number;
  log: Logger;
}

export class RedisBreaker {
  private failures = 0;
  private open = false;
  private closed = false;
  /** A Cluster node reached by a plain URL: never used (most keys would answer MOVED). */
  private clusterNode = false;
  private probeTimer: NodeJS.Timeout | undefined;
  private readonly backListeners: Array<() => void> = [];
  private readonly timeoutMs: number;
  private readonly log: Logger;
  private readonly failing: FailureLog;

  constructor(readonly client: RedisClient, options: RedisBreakerOptions) {
    this.timeoutMs = options.timeoutMs;
    this.log = options.log.child({ component: 'redis' });
    this.failing = failureLog(this.log,
      'Redis failed or was slower than storage.redisTimeout: the daily limit counts in Postgres alone, per-minute and auth rate limits in-process, until it answers',
      { recoveredMessage: 'Redis is back: the guards use it again' });
    // A (re)connection, to the new master after a failover too: Redis may hold gates that missed
    // a change. An open breaker stays open until its probe passes: a replica reached by a plain
    // URL answers READONLY, is reconnected to, and must not be probed at every reconnection.
    client.on('ready', () => {
      this.checkNode();
      if (!this.open) this.back();
    });
    if (client.status === 'ready') this.checkNode();
  }

  /** Whether Redis is being used right now (connected, breaker closed). */
  get usable(): boolean {
    return this.client.status === 'ready' && !this.open && !this.clusterNode;
  }

  /**
   * `work`'s answer, or undefined when Redis cannot give it within `timeoutMs` (storage.redisTimeout
   * on the request path): not connected, failing, hung, or the breaker is open. Undefined means
   * "use your fallback".
   */
  async call<T>(work: (client: RedisClient) => Promise<T>, timeoutMs = this.timeoutMs): Promise<T | undefined> {
    if (!this.usable) return undefined;
    try {
      const answer = await withTimeout(work(this.client), timeoutMs, `Redis did not answer within ${timeoutMs} ms`);
      if (this.failures) {
        this.failures = 0;
        this.failing.recovered();
      }
      return answer;
    } catch (err) {
      this.failed(err);
      return undefined;
    }
  }

  /**
   * Resolves when Redis takes a write within `timeoutMs`, rejects with its error otherwise: what
   * /readyz asks. A pass closes an open breaker at once: the guards use Redis from the moment
   * readiness says "ok", not up to a cool-down later (a client that saw 429 counted in-process
   * after readiness said Redis was back). A failure here does not count toward opening it.
   */
  async check(timeoutMs: number): Promise<void> {
    await withTimeout(probeRedis(this.client), timeoutMs, `Redis did not answer within ${timeoutMs} ms`);
    this.passed();
  }

  /** `listener` runs whenever Redis is usable again: reconnected, or the breaker closed. */
  onBack(listener: () => void): void {
    this.backListeners.push(listener);
  }

  /** Stops probing (the instance is closing). */
  close(): void {
    this.closed = true;
    clearTimeout(this.probeTimer);
  }

  private failed(err: unknown): void {
    this.failing.failed(err);
    if (++this.failures >= FAILURES_TO_OPEN && !this.open) {
      this.open = true;
      this.probeLater();
    }
  }

  private checkNode(): void {
    isClusterNodeByUrl(this.client).then((clusterNode) => {
      if (clusterNode && !this.clusterNode) this.log.error(CLUSTER_NODE_BY_URL);
      this.clusterNode = clusterNode;
    }, () => { /* not answering: the commands will tell */ });
  }

  private probeLater(): void {
    if (this.closed) return;
    this.probeTimer = setTimeout(() => void this.probe(), COOL_DOWN_MS);
    this.probeTimer.unref();
  }

  /** The one probe of a cool-down: a write (redis.ts) within storage.redisTimeout closes the breaker. */
  private async probe(): Promise<void> {
    try {
      if (this.client.status !== 'ready') throw new Error(`Redis is not connected (${this.client.status})`);
      await this.check(this.timeoutMs);
    } catch (err) {
      this.failing.failed(err);
      // Still open, unless readiness's check closed it meanwhile.
      if (this.open) this.probeLater();
    }
  }

  /** A write went through: an open breaker closes, and the guards are told. */
  private passed(): void {
    if (!this.open) return;
    this.open = false;
    this.failures = 0;
    clearTimeout(this.probeTimer);
    this.back();
  }

  private back(): void {
    this.failing.recovered();
    for (const listener of this.backListeners) listener();
  }
}
