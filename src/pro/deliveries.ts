// Webhook deliveries (CONTRACT §5): emit() only queues, so no request ever waits on a receiver.
// The queue lives in memory and is bounded in messages and bytes: a dead or slow receiver can
// cost at most MAX_QUEUED messages, after which the oldest waiting message is dropped (logged and
// counted). Each attempt re-reads the webhook and its owner, re-checks the target against SSRF
// and connects to the address it checked; failures worth retrying (network error, timeout, 5xx,
// 429) are retried up to webhooks.retries times with exponential backoff and jitter.
import { readFileSync } from 'node:fs';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { rootCertificates } from 'node:tls';
import type { Logger } from 'pino';
import type { Config } from '../config/schema.js';
import type { Metrics } from '../admin/metrics.js';
import type { Events } from '../services.js';
import type { Database } from '../storage/db.js';
import { findDeliveryTarget } from '../storage/webhooks.js';
import { bareHost, checkTarget, parseWebhookUrl, systemLookup, type LookupAll, type ResolvedAddress } from './ssrf.js';
import { deliveryHeaders, newMessage, type WebhookMessage } from './webhooks.js';

export interface DeliveryLimits {
  /** messages waiting (for a first attempt or a retry); beyond it the oldest is dropped */
  maxQueued: number;
  /** bytes of message bodies waiting */
  maxQueuedBytes: number;
  /** a single message body larger than this is refused */
  maxMessageBytes: number;
  /** attempts in flight at once, all users together */
  concurrency: number;
  /** attempts in flight at once for one user: one dead receiver cannot take every slot */
  perUserConcurrency: number;
  /** first retry delay; doubled at each retry, capped at maxBackoffMs */
  backoffMs: number;
  maxBackoffMs: number;
}

export const DEFAULT_LIMITS: DeliveryLimits = {
  maxQueued: 1000,
  maxQueuedBytes: 8 * 1024 * 1024,
  maxMessageBytes: 64 * 1024,
  concurrency: 8,
  perUserConcurrency: 2,
  backoffMs: 500,
  maxBackoffMs: 60_000,
};

export interface DeliveryDeps {
  db: Database;
  config: Config['webhooks'];
  clock: () => Date;
  log: Logger;
  metrics: Metrics;
}

/** What one attempt came to; also the `outcome` label of gateway_webhook_deliveries_total. */
export type AttemptOutcome =
  | 'success' // 2xx
  | 'server_error' // 5xx or 429: retried
  | 'rejected' // any other status, redirects included (never followed): not retried
  | 'timeout' // no answer within webhooks.timeout: retried
  | 'network_error' // refused, reset, TLS failure, DNS failure: retried
  | 'storage_error' // the webhook could not be read: retried
  | 'blocked' // the target is (now) a non-public address: not retried
  | 'skipped'; // no webhook, or its owner is not an active pro user: nothing to send

/** Outcomes of a whole message that are not an attempt: also counted. */
type MessageOutcome = 'dropped' | 'gave_up';

const RETRIED: ReadonlySet<AttemptOutcome> = new Set(['server_error', 'timeout', 'network_error', 'storage_error']);

interface Job {
  message: WebhookMessage;
  seq: number;
  bytes: number;
  /** retries already made */
  retries: number;
  /** Date.now() before which the job does not run (backoff) */
  notBefore: number;
}

type PostResult = { kind: 'status'; status: number } | { kind: 'timeout' } | { kind: 'network'; code: string } | { kind: 'aborted' };

function readCa(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`webhooks.caFile: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
}

export class WebhookEvents implements Events {
  private readonly waiting: Job[] = [];
  private waitingBytes = 0;
  private readonly inFlight = new Map<Job, AbortController>();
  private readonly perUser = new Map<number, number>();
  private readonly agent: https.Agent;
  private readonly log: Logger;
  private timer: NodeJS.Timeout | undefined;
  private wakeAt = Infinity;
  private seq = 0;
  private closed = false;

  constructor(
    private readonly deps: DeliveryDeps,
    private readonly limits: DeliveryLimits = DEFAULT_LIMITS,
    private readonly lookup: LookupAll = systemLookup,
  ) {
    this.log = deps.log.child({ component: 'webhooks' });
    // webhooks.caFile is trusted in addition to the public roots, never instead of them.
    const ca = deps.config.caFile ? [...rootCertificates, readCa(deps.config.caFile)] : undefined;
    // No keep-alive: every attempt opens its own connection to the address it has just checked.
    this.agent = new https.Agent({ keepAlive: false, maxSockets: limits.concurrency, ...(ca ? { ca } : {}) });
  }

  /** Messages not yet delivered: waiting and in flight. */
  get pending(): number {
    return this.waiting.length + this.inFlight.size;
  }

  emit(userId: number, type: string, data: Record<string, unknown>): void {
    if (this.closed) return;
    let message: WebhookMessage;
    try {
      message = newMessage(userId, type, data, this.deps.clock());
    } catch (err) {
      // Never the caller's problem: emit() runs on request paths.
      this.log.error({ err, userId, type }, 'webhook event could not be serialized');
      return;
    }
    const bytes = Buffer.byteLength(message.body);
    if (bytes > this.limits.maxMessageBytes) {
      this.count('dropped');
      this.log.warn({ userId, type, bytes }, 'webhook message too large: dropped');
      return;
    }
    this.enqueue({ message, seq: this.seq++, bytes, retries: 0, notBefore: 0 });
    this.pump();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    if (this.waiting.length || this.inFlight.size) {
      this.log.info({ waiting: this.waiting.length, inFlight: this.inFlight.size }, 'shutting down: pending webhook deliveries abandoned');
    }
    this.waiting.length = 0;
    this.waitingBytes = 0;
    for (const controller of this.inFlight.values()) controller.abort();
    this.agent.destroy();
  }

  private enqueue(job: Job): void {
    while (this.waiting.length > 0 && (this.waiting.length >= this.limits.maxQueued || this.waitingBytes + job.bytes > this.limits.maxQueuedBytes)) {
      // The oldest message is the one most likely stuck behind a dead receiver.
      let oldest = 0;
      for (let i = 1; i < this.waiting.length; i++) if (this.waiting[i]!.seq < this.waiting[oldest]!.seq) oldest = i;
      const [dropped] = this.waiting.splice(oldest, 1);
      this.waitingBytes -= dropped!.bytes;
      this.count('dropped');
      this.log.warn({ userId: dropped!.message.userId, type: dropped!.message.type, webhookId: dropped!.message.id }, 'webhook queue full: oldest message dropped');
    }
    this.waiting.push(job);
    this.waitingBytes += job.bytes;
  }

  /** Starts every job that may run now; sets one timer for the earliest one still backing off. */
  private pump(): void {
    if (this.closed) return;
    const now = Date.now();
    let nextWake = Infinity;
    for (let i = 0; i < this.waiting.length && this.inFlight.size < this.limits.concurrency;) {
      const job = this.waiting[i]!;
      if (job.notBefore > now) {
        nextWake = Math.min(nextWake, job.notBefore);
        i++;
      } else if ((this.perUser.get(job.message.userId) ?? 0) >= this.limits.perUserConcurrency) {
        i++;
      } else {
        this.waiting.splice(i, 1);
        this.waitingBytes -= job.bytes;
        this.start(job);
      }
    }
    if (nextWake < this.wakeAt) {
      clearTimeout(this.timer);
      this.wakeAt = nextWake;
      this.timer = setTimeout(() => {
        this.wakeAt = Infinity;
        this.pump();
      }, nextWake - now);
      this.timer.unref();
    }
  }

  private start(job: Job): void {
    const controller = new AbortController();
    const userId = job.message.userId;
    this.inFlight.set(job, controller);
    this.perUser.set(userId, (this.perUser.get(userId) ?? 0) + 1);
    void this.attempt(job, controller.signal)
      .catch((err: unknown): AttemptOutcome => {
        this.log.error({ err, webhookId: job.message.id }, 'webhook attempt failed unexpectedly');
        return 'network_error';
      })
      .then((outcome) => {
        this.inFlight.delete(job);
        const left = (this.perUser.get(userId) ?? 1) - 1;
        if (left > 0) this.perUser.set(userId, left);
        else this.perUser.delete(userId);
        if (this.closed) return;
        this.count(outcome);
        this.settle(job, outcome);
        this.pump();
      });
  }

  private settle(job: Job, outcome: AttemptOutcome): void {
    const { message } = job;
    const context = { userId: message.userId, type: message.type, webhookId: message.id, attempt: job.retries + 1, outcome };
    if (!RETRIED.has(outcome)) {
      if (outcome === 'success') this.log.debug(context, 'webhook delivered');
      else if (outcome === 'skipped') this.log.debug(context, 'webhook not sent: no webhook or owner not an active pro user');
      else this.log.warn(context, 'webhook not delivered');
      return;
    }
    if (job.retries >= this.deps.config.retries) {
      this.count('gave_up');
      this.log.warn(context, 'webhook not delivered: retries exhausted');
      return;
    }
    job.retries++;
    const delay = Math.min(this.limits.backoffMs * 2 ** (job.retries - 1), this.limits.maxBackoffMs);
    // ±20% jitter, so receivers coming back are not hit by every retry at once.
    job.notBefore = Date.now() + Math.round(delay * (0.8 + Math.random() * 0.4));
    this.log.info(context, 'webhook attempt failed; will retry');
    this.enqueue(job);
  }

  private async attempt(job: Job, signal: AbortSignal): Promise<AttemptOutcome> {
    const { message } = job;
    let target;
    try {
      target = await findDeliveryTarget(this.deps.db, message.userId);
    } catch (err) {
      this.log.warn({ err, webhookId: message.id }, 'webhook target could not be read');
      return 'storage_error';
    }
    // Read at each attempt: a webhook deleted, or a plan lost, since the event stops delivery.
    if (!target || target.plan !== 'pro' || target.is_active !== 1) return 'skipped';
    const url = parseWebhookUrl(target.url);
    if (!url) return 'blocked';
    const check = await checkTarget(url, { allowPrivateNetworks: this.deps.config.allowPrivateNetworks, timeoutMs: this.deps.config.timeout, lookup: this.lookup });
    if (check.kind === 'forbidden') {
      this.log.warn({ userId: message.userId, host: url.host }, 'webhook target resolves to a non-public address: refused');
      return 'blocked';
    }
    if (check.kind === 'unresolved') return 'network_error';
    if (signal.aborted) return 'network_error';
    const result = await this.post(url, check.target, deliveryHeaders(message, target.secret, this.deps.clock()), message.body, signal);
    switch (result.kind) {
      case 'status':
        if (result.status >= 200 && result.status < 300) return 'success';
        return result.status >= 500 || result.status === 429 ? 'server_error' : 'rejected';
      case 'timeout':
        return 'timeout';
      default:
        return 'network_error';
    }
  }

  private post(url: URL, target: ResolvedAddress, headers: Record<string, string>, body: string, signal: AbortSignal): Promise<PostResult> {
    return new Promise((resolve) => {
      let settled = false;
      const finish = (result: PostResult) => {
        if (settled) return;
        settled = true;
        resolve(result);
      };
      // The connection goes to the address checkTarget() just approved, whatever DNS says now:
      // a second lookup is exactly what a rebinding attack needs. The certificate is still
      // checked against the URL's host name (and SNI sent for it), since `host` stays the name.
      const pinned: LookupFunction = (_hostname, options, callback) => {
        if (options?.all) callback(null, [{ address: target.address, family: target.family }]);
        else callback(null, target.address, target.family);
      };
      const req = https.request({
        method: 'POST',
        host: bareHost(url),
        port: url.port || 443,
        path: `${url.pathname}${url.search}`,
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
        agent: this.agent,
        lookup: pinned,
      }, (res) => {
        finish({ kind: 'status', status: res.statusCode ?? 0 });
        // The answer's body is not used; read it away (the timer below still bounds it).
        res.resume();
      });
      const timer = setTimeout(() => {
        finish({ kind: 'timeout' });
        req.destroy();
      }, this.deps.config.timeout);
      const abort = () => {
        finish({ kind: 'aborted' });
        req.destroy();
      };
      signal.addEventListener('abort', abort, { once: true });
      req.on('close', () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', abort);
      });
      req.on('error', (err: NodeJS.ErrnoException) => finish({ kind: 'network', code: err.code ?? 'ERROR' }));
      req.end(body);
    });
  }

  private count(outcome: AttemptOutcome | MessageOutcome): void {
    this.deps.metrics.webhookDeliveries.inc({ outcome });
  }
}
