// Webhook deliveries (CONTRACT §5, §9). emit() stores the message in Postgres (the outbox,
// migration 010) before the response that caused it, in the caller's transaction when there is
// one, and returns: no request waits on a receiver. Every instance runs a worker that claims due
// messages with a lease (storage/webhookDeliveries.ts), so a message is delivered at least once by
// whichever instance is alive, one attempt at a time across instances, with the same webhook-id and
// bytes on every attempt. The worker wakes on the change feed's webhookDue (a new message, or one
// handed back at a shutdown), on its own retry timers, and on a poll for what nobody announces: a
// lease that lapsed because its instance died, a retry scheduled by an instance that is gone.
// Each attempt reads the webhook and its owner afresh (its claim does), checks the target against
// SSRF and connects to the address it checked; failures worth retrying (network error, timeout,
// 5xx, 429) are retried up to webhooks.retries times with exponential backoff and jitter. Why not pg-boss: it
// cannot run on the embedded PGlite database, brings a schema, a supervisor and a connection pool
// of its own (one more thing to route around PgBouncer), and the cross-instance per-user limit and
// the admin listing would be queries on its tables; the outbox is one table and a few statements.
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { rootCertificates } from 'node:tls';
import type { Logger } from 'pino';
import type { Config } from '../config/schema.js';
import type { Metrics } from '../metrics.js';
import type { ChangeFeed } from '../storage/changeFeed.js';
import type { Database, Queryable } from '../storage/db.js';
import {
  claimDue, finishDelivery, insertDelivery, purgeFinished, releaseDeliveries, retryDeliveryLater, type ClaimedDelivery, type FinalStatus,
} from '../storage/webhookDeliveries.js';
import { bareHost, checkTarget, parseWebhookUrl, type LookupAll, type ResolvedAddress } from './ssrf.js';
import { deliveryHeaders, newMessage, type WebhookMessage } from './webhooks.js';

export interface DeliveryLimits {
  /** a message body larger than this is refused by emit() (POST /admin/v1/alerts checks first) */
  maxMessageBytes: number;
  /** attempts in flight at once on this instance, all users together */
  concurrency: number;
  /** attempts in flight at once for one user, all instances together: one dead receiver cannot take every slot */
  perUserConcurrency: number;
  /** first retry delay; doubled at each retry, capped at maxBackoffMs */
  backoffMs: number;
  maxBackoffMs: number;
  /** how often the worker looks for due messages nobody announced */
  pollMs: number;
  /** how often finished messages older than KEEP_DAYS are deleted */
  purgeEveryMs: number;
}

export const DEFAULT_LIMITS: DeliveryLimits = {
  maxMessageBytes: 64 * 1024,
  concurrency: 8,
  perUserConcurrency: 2,
  backoffMs: 500,
  maxBackoffMs: 60_000,
  pollMs: 1000,
  purgeEveryMs: 60 * 60 * 1000,
};

/** Delivered, failed and skipped messages are kept this long (CONTRACT §9), then purged. */
export const KEEP_DAYS = 7;
const PURGE_BATCH = 1000;
// An attempt is a DNS lookup and a POST, each bounded by webhooks.timeout, plus reading the target:
// past this it is cut (and counts as a timeout). The lease outlasts it by a margin for the
// statement that records the outcome, so no other instance starts an attempt while one still runs.
const ATTEMPT_SLACK_MS = 1000;
const LEASE_MARGIN_MS = 4000;
// At a shutdown, attempts in flight get this long to finish and be recorded: each one that does
// is a message not sent twice. The rest are cut and handed back.
const SHUTDOWN_GRACE_MS = 1000;

export interface DeliveryDeps {
  db: Database;
  feed: Pick<ChangeFeed, 'subscribe'>;
  config: Config['webhooks'];
  clock: () => Date;
  log: Logger;
  metrics: Metrics;
  /** Test seam: how webhook hosts are resolved (DNS rebinding, a resolver that never answers); the system's by default. */
  lookup?: LookupAll;
}

/** What one attempt came to; also the `outcome` label of gateway_webhook_deliveries_total. */
export type AttemptOutcome =
  | 'success' // 2xx
  | 'server_error' // 5xx or 429: retried
  | 'rejected' // any other status, redirects included (never followed): not retried
  | 'timeout' // no answer within webhooks.timeout: retried
  | 'network_error' // refused, reset, TLS failure, DNS failure: retried
  | 'blocked' // the target is (now) a non-public address: not retried
  | 'skipped'; // no webhook, or its owner is not an active pro user: nothing to send

/** A message given up after its last retry: also counted. */
type MessageOutcome = 'gave_up';

interface AttemptResult {
  outcome: AttemptOutcome;
  /** what went wrong, for the admin listing's last_error (never a secret) */
  error?: string;
}

const RETRIED: ReadonlySet<AttemptOutcome> = new Set(['server_error', 'timeout', 'network_error']);
const FINAL_STATUS: Partial<Record<AttemptOutcome, FinalStatus>> = { success: 'delivered', skipped: 'skipped' };

type PostResult = { kind: 'status'; status: number } | { kind: 'timeout' } | { kind: 'network'; code: string } | { kind: 'aborted' };

/** Why an attempt's AbortController fired. */
const SHUTDOWN = 'shutdown';
const DEADLINE = 'deadline';

interface Running {
  job: ClaimedDelivery;
  lease: string;
  controller: AbortController;
  done: Promise<void>;
}

function readCa(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`webhooks.caFile: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
}

/** `work`'s outcome, or undefined as soon as `signal` aborts. */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T | undefined> {
  return new Promise((resolve, reject) => {
    const onAbort = () => resolve(undefined);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

const describeError = (err: unknown) => String((err as { code?: unknown } | null)?.code ?? (err as Error | null)?.message ?? err);

/** Webhook events: stored for delivery before the caller answers; delivered off the request. */
export interface Events {
  /**
   * Stores the event for delivery. With `tx`, in that transaction: the event commits, or not,
   * with the change that caused it. Rejects when it cannot be stored (the caller answers 503).
   */
  emit(userId: number, type: string, data: Record<string, unknown>, tx?: Queryable): Promise<void>;
}

export class WebhookEvents implements Events {
  private readonly running = new Map<string, Running>();
  private readonly agent: https.Agent;
  private readonly log: Logger;
  private readonly attemptMs: number;
  private readonly leaseMs: number;
  private poll: NodeJS.Timeout | undefined;
  private purgeTimer: NodeJS.Timeout | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private retryAt = Infinity;
  private unsubscribe: (() => void) | undefined;
  private passing: Promise<void> | undefined;
  private purging: Promise<number> | undefined;
  private again = false;
  private closing: Promise<void> | undefined;
  private storageDown = false;

  constructor(private readonly deps: DeliveryDeps, private readonly limits: DeliveryLimits = DEFAULT_LIMITS) {
    this.log = deps.log.child({ component: 'webhooks' });
    // webhooks.caFile is trusted in addition to the public roots, never instead of them.
    const ca = deps.config.caFile ? [...rootCertificates, readCa(deps.config.caFile)] : undefined;
    // No keep-alive: every attempt opens its own connection to the address it has just checked.
    this.agent = new https.Agent({ keepAlive: false, maxSockets: limits.concurrency, ...(ca ? { ca } : {}) });
    this.attemptMs = 2 * deps.config.timeout + ATTEMPT_SLACK_MS;
    this.leaseMs = this.attemptMs + LEASE_MARGIN_MS;
  }

  async emit(userId: number, type: string, data: Record<string, unknown>, tx?: Queryable): Promise<void> {
    const message = newMessage(userId, type, data, this.deps.clock());
    const bytes = Buffer.byteLength(message.body);
    if (bytes > this.limits.maxMessageBytes) throw new RangeError(`webhook message of ${bytes} bytes, over the ${this.limits.maxMessageBytes}-byte limit`);
    await insertDelivery(tx ?? this.deps.db, { id: message.id, userId, type, body: message.body, maxAttempts: this.deps.config.retries + 1 });
  }

  /** Starts the worker. Call before the change feed starts: its first "resumed" is a wake-up too. */
  start(): void {
    this.unsubscribe = this.deps.feed.subscribe({ webhookDue: () => this.wake(), resumed: () => this.wake() });
    this.poll = setInterval(() => this.wake(), this.limits.pollMs);
    this.poll.unref();
    this.purgeTimer = setInterval(() => void this.purge(), this.limits.purgeEveryMs);
    this.purgeTimer.unref();
    void this.purge();
    this.wake();
  }

  /**
   * Stops claiming; gives the attempts in flight a moment to finish, then cuts the rest and hands
   * them back (due at once, announced to the other instances). Nothing is abandoned: what is not
   * delivered stays in the outbox.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.unsubscribe?.();
      clearInterval(this.poll);
      clearInterval(this.purgeTimer);
      clearTimeout(this.retryTimer);
      await Promise.all([this.passing, this.purging]);
      if (this.running.size) {
        let grace: NodeJS.Timeout | undefined;
        await Promise.race([
          Promise.all([...this.running.values()].map((r) => r.done)),
          new Promise((resolve) => { grace = setTimeout(resolve, SHUTDOWN_GRACE_MS); }),
        ]);
        clearTimeout(grace);
      }
      const cut = [...this.running.values()];
      for (const r of cut) r.controller.abort(SHUTDOWN);
      await Promise.all(cut.map((r) => r.done));
      if (cut.length) {
        try {
          await releaseDeliveries(this.deps.db, cut.map((r) => ({ id: r.job.id, lease: r.lease })));
          this.log.info({ handedBack: cut.length }, 'shutting down: webhook attempts in flight handed back to the other instances');
        } catch (err) {
          this.log.warn({ err, inFlight: cut.length }, 'shutting down: webhook attempts in flight could not be handed back; they are retried when their lease lapses');
        }
      }
      this.agent.destroy();
    })();
    return this.closing;
  }

  /** Deletes finished messages past KEEP_DAYS, in batches; any instance may run it at any time. */
  purge(): Promise<number> {
    this.purging ??= this.purgeBatches().finally(() => { this.purging = undefined; });
    return this.purging;
  }

  private async purgeBatches(): Promise<number> {
    let total = 0;
    try {
      let n: number;
      do {
        n = await purgeFinished(this.deps.db, KEEP_DAYS, PURGE_BATCH);
        total += n;
      } while (n === PURGE_BATCH && !this.closing);
    } catch (err) {
      this.log.warn({ err: describeError(err) }, 'webhook deliveries: purge of old messages failed; tried again later');
    }
    if (total) this.log.info({ purged: total }, `webhook deliveries: messages finished over ${KEEP_DAYS} days ago purged`);
    return total;
  }

  /** Claims what may run now, unless a claim is under way (then once more after it). */
  private wake(): void {
    if (this.closing) return;
    if (this.passing) {
      this.again = true;
      return;
    }
    this.passing = this.claim().finally(() => {
      this.passing = undefined;
      if (this.again) {
        this.again = false;
        this.wake();
      }
    });
  }

  private async claim(): Promise<void> {
    const free = this.limits.concurrency - this.running.size;
    if (free <= 0) return;
    const lease = randomUUID();
    let claimed: ClaimedDelivery[];
    try {
      claimed = await claimDue(this.deps.db, { lease, leaseMs: this.leaseMs, limit: free, perUser: this.limits.perUserConcurrency });
    } catch (err) {
      // Once per outage, not once per poll: the poll runs every second.
      if (!this.storageDown) this.log.warn({ err: describeError(err) }, 'webhook deliveries: cannot claim messages; retrying every poll');
      this.storageDown = true;
      return;
    }
    if (this.storageDown) this.log.info('webhook deliveries: claiming messages again');
    this.storageDown = false;
    if (this.closing) {
      await releaseDeliveries(this.deps.db, claimed.map((j) => ({ id: j.id, lease }))).catch(() => { /* their lease lapses */ });
      return;
    }
    for (const job of claimed) this.launch(job, lease);
    // A full batch: more may be due.
    if (claimed.length === free) this.again = true;
  }

  private launch(job: ClaimedDelivery, lease: string): void {
    const controller = new AbortController();
    const running: Running = { job, lease, controller, done: Promise.resolve() };
    this.running.set(job.id, running);
    running.done = this.run(running)
      .catch((err: unknown) => this.log.error({ err, webhookId: job.id }, 'webhook attempt failed unexpectedly'))
      .finally(() => {
        this.running.delete(job.id);
        // A slot is free, and this user's next message may be waiting for it.
        this.wake();
      });
  }

  private async run({ job, lease, controller }: Running): Promise<void> {
    const context = { userId: job.user_id, type: job.type, webhookId: job.id, attempt: job.attempts };
    if (job.attempts > job.max_attempts) {
      // Its earlier attempts were cut by instances that died (their leases lapsed): none is left.
      this.count('gave_up');
      this.log.warn(context, 'webhook not delivered: retries exhausted');
      await finishDelivery(this.deps.db, job.id, lease, 'failed', 'retries exhausted');
      return;
    }
    const deadline = setTimeout(() => controller.abort(DEADLINE), this.attemptMs);
    let result: AttemptResult | undefined;
    try {
      result = await untilAborted(this.attempt(job, controller.signal), controller.signal);
    } finally {
      clearTimeout(deadline);
    }
    if (!result) {
      // Cut by a shutdown: close() hands it back. Cut by the deadline: a timeout like any other.
      if (controller.signal.reason === SHUTDOWN) return;
      result = { outcome: 'timeout', error: `no outcome within ${this.attemptMs} ms` };
    }
    this.count(result.outcome);
    await this.settle(job, lease, result, { ...context, outcome: result.outcome }).catch((err: unknown) => {
      // The lease lapses and another attempt follows: at least once, maybe twice.
      this.log.warn({ ...context, err: describeError(err) }, 'webhook attempt outcome could not be recorded; the message is attempted again');
    });
  }

  private async settle(job: ClaimedDelivery, lease: string, { outcome, error }: AttemptResult, context: Record<string, unknown>): Promise<void> {
    const { db } = this.deps;
    const final = FINAL_STATUS[outcome];
    if (final) {
      await finishDelivery(db, job.id, lease, final, error ?? null);
      if (final === 'delivered') this.log.debug(context, 'webhook delivered');
      else this.log.debug(context, 'webhook not sent: no webhook or owner not an active pro user');
    } else if (!RETRIED.has(outcome)) {
      await finishDelivery(db, job.id, lease, 'failed', error ?? outcome);
      this.log.warn({ ...context, error }, 'webhook not delivered');
    } else if (job.attempts >= job.max_attempts) {
      this.count('gave_up');
      await finishDelivery(db, job.id, lease, 'failed', error ?? outcome);
      this.log.warn({ ...context, error }, 'webhook not delivered: retries exhausted');
    } else {
      const delay = Math.min(this.limits.backoffMs * 2 ** (job.attempts - 1), this.limits.maxBackoffMs);
      // ±20% jitter, so receivers coming back are not hit by every retry at once.
      const jittered = Math.round(delay * (0.8 + Math.random() * 0.4));
      await retryDeliveryLater(db, job.id, lease, jittered, error ?? outcome);
      this.log.info({ ...context, error }, 'webhook attempt failed; will retry');
      this.wakeAt(Date.now() + jittered);
    }
  }

  /** One timer, for the earliest retry this instance scheduled (others find it at their poll). */
  private wakeAt(at: number): void {
    if (at >= this.retryAt) return;
    clearTimeout(this.retryTimer);
    this.retryAt = at;
    this.retryTimer = setTimeout(() => {
      this.retryAt = Infinity;
      this.wake();
    }, at - Date.now());
    this.retryTimer.unref();
  }

  private async attempt(job: ClaimedDelivery, signal: AbortSignal): Promise<AttemptResult> {
    const message: WebhookMessage = { id: job.id, userId: job.user_id, type: job.type, body: job.body };
    // Read by the claim, at the start of this attempt: a webhook deleted, or a plan lost, since the
    // event stops delivery.
    if (!job.url || !job.secret || job.plan !== 'pro' || job.is_active !== 1) return { outcome: 'skipped', error: 'no webhook, or its owner is not an active pro user' };
    const url = parseWebhookUrl(job.url);
    if (!url) return { outcome: 'blocked', error: 'the webhook URL is not a valid https URL' };
    const check = await checkTarget(url, { allowPrivateNetworks: this.deps.config.allowPrivateNetworks, timeoutMs: this.deps.config.timeout, lookup: this.deps.lookup });
    if (check.kind === 'forbidden') {
      this.log.warn({ userId: message.userId, host: url.host }, 'webhook target resolves to a non-public address: refused');
      return { outcome: 'blocked', error: `blocked: ${check.address} is not a public address` };
    }
    if (check.kind === 'unresolved') return { outcome: 'network_error', error: `DNS: ${describeError(check.error)}` };
    if (signal.aborted) return { outcome: 'network_error', error: 'aborted' };
    // The attempt's real time, not the gateway's clock: receivers hold it against their own clock
    // (their replay window).
    const result = await this.post(url, check.target, deliveryHeaders(message, job.secret, new Date()), message.body, signal);
    switch (result.kind) {
      case 'status':
        if (result.status >= 200 && result.status < 300) return { outcome: 'success' };
        return { outcome: result.status >= 500 || result.status === 429 ? 'server_error' : 'rejected', error: `HTTP ${result.status}` };
      case 'timeout':
        return { outcome: 'timeout', error: `no answer within ${this.deps.config.timeout} ms` };
      case 'network':
        return { outcome: 'network_error', error: result.code };
      default:
        return { outcome: 'network_error', error: 'aborted' };
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
