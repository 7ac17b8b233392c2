// The webhook outbox worker (CONTRACT §5, §9). Messages are stored by emitter.ts before the
// response that caused them; every instance runs this worker, which claims due
// messages with a lease (storage/events/webhookDeliveries.ts), so a message is delivered at least once by
// whichever instance is alive, one attempt at a time across instances, with the same webhook-id and
// bytes on every attempt. The worker wakes on the change feed's webhookDue (a new message, or one
// handed back at a shutdown), on its own retry timers, and on a poll for what nobody announces: a
// lease that lapsed because its instance died, a retry scheduled by an instance that is gone.
// Each attempt reads the webhook and its owner afresh (its claim does); sender.ts checks the target
// against SSRF and connects to the address it checked. Failures worth retrying (network error, timeout,
// 5xx, 429) are retried up to webhooks.retries times with exponential backoff and jitter. Why not pg-boss: it
// cannot run on the embedded PGlite database, brings a schema, a supervisor and a connection pool
// of its own (one more thing to route around PgBouncer), and the cross-instance per-user limit and
// the admin listing would be queries on its tables; the outbox is one table and a few statements.
import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { Config } from '../config/schema.js';
import type { HooksConfig } from '../config/schema/hooks.js';
import type { Metrics } from '../telemetry/metrics.js';
import type { ChangeFeed } from '../storage/feed/index.js';
import type { Database } from '../storage/database/index.js';
import {
  claimDue, finishDelivery, nextDueInMs, purgeFinished, releaseDeliveries, retryDeliveryLater, type ClaimedDelivery, type FinalStatus,
} from '../storage/events/index.js';
import type { Tracing } from '../telemetry/tracing.js';
import type { LookupAll } from './ssrf.js';
import { describeError, WebhookSender, type AttemptOutcome, type AttemptResult } from './sender.js';

export interface DeliveryLimits {
  /** attempts in flight at once on this instance, all users together */
  concurrency: number;
  /** attempts in flight at once for one user, all instances together: one dead receiver cannot take every slot */
  perUserConcurrency: number;
  /** first retry delay; doubled at each retry, capped at maxBackoffMs */
  backoffMs: number;
  maxBackoffMs: number;
  /**
   * how often the worker looks for due messages nobody announced, as a safety net: it also sleeps
   * until the next pending message falls due (a retry, a lease to lapse), found at each claim
   */
  pollMs: number;
  /** how often finished messages older than KEEP_DAYS are deleted */
  purgeEveryMs: number;
}

export const DEFAULT_LIMITS: DeliveryLimits = {
  concurrency: 8,
  perUserConcurrency: 2,
  backoffMs: 500,
  maxBackoffMs: 60_000,
  // Idle cost flat in the fleet (CONTRACT §18): new messages are announced (NOTIFY), retries and
  // leases keep their own timers; this only catches what both missed (a retry scheduled by an
  // instance that died after another one last looked).
  pollMs: 30_000,
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
const NOT_CLAIMABLE_RECHECK_MS = 1000;
/**
 * Message types only a handler sends (DeliveryDeps.handlers), never a user's webhook: an instance
 * configured without that handler (a fleet mid-change) never claims one, and leaves it, untouched,
 * to an instance that has it.
 */
export const HANDLER_ONLY_TYPES: ReadonlySet<string> = new Set(['stripe.meter_event']);

export interface DeliveryDeps {
  db: Database;
  feed: Pick<ChangeFeed, 'subscribe'>;
  config: Config['webhooks'];
  clock: () => Date;
  log: Logger;
  metrics: Metrics;
  /** Test seam: how webhook hosts are resolved (DNS rebinding, a resolver that never answers); the system's by default. */
  lookup?: LookupAll;
  /** With tracing: attempts are spans (sender.ts). */
  tracing?: Tracing;
  /** Operator hooks (CONTRACT §24): where their messages go, as the live configuration has it at each attempt (SIGHUP changes it). */
  hooks?: () => HooksConfig | undefined;
  /**
   * Messages of these types are attempted by their handler instead of being posted to the owner's
   * webhook (billing's meter events, billing/meterReporter.ts): the same claims, leases, retries
   * and at-least-once, another destination.
   */
  handlers?: Readonly<Record<string, (job: ClaimedDelivery, signal: AbortSignal) => Promise<AttemptResult>>>;
}

/** A message given up after its last retry: also counted. */
type MessageOutcome = 'gave_up';

const RETRIED: ReadonlySet<AttemptOutcome> = new Set(['server_error', 'timeout', 'network_error']);
const FINAL_STATUS: Partial<Record<AttemptOutcome, FinalStatus>> = { success: 'delivered', skipped: 'skipped' };

/** Why an attempt's AbortController fired: the handler's signal says so. */
const SHUTDOWN = 'shutdown';

interface Running {
  job: ClaimedDelivery;
  lease: string;
  controller: AbortController;
  done: Promise<void>;
}

/**
 * `work`'s outcome, or undefined as soon as `signal` aborts. The signal is one attempt's own, and
 * goes with it: its listener needs no removing.
 */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T | undefined> {
  return new Promise((resolve, reject) => {
    signal.addEventListener('abort', () => resolve(undefined));
    work.then(resolve, reject);
  });
}

/** The outbox worker: claims due messages, has the sender attempt them, records what came of it. */
export class OutboxWorker {
  private readonly running = new Map<string, Running>();
  private readonly sender: WebhookSender;
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
  /** Claim passes begun and finished since start (passes run one at a time): what settled() counts. */
  private passesBegun = 0;
  private passesFinished = 0;
  private closing: Promise<void> | undefined;
  private storageDown = false;
  /** The handler-only types this instance has no handler for: its claims pass them over. */
  private readonly unsendable: readonly string[];

  constructor(private readonly deps: DeliveryDeps, private readonly limits: DeliveryLimits = DEFAULT_LIMITS) {
    this.log = deps.log.child({ component: 'webhooks' });
    this.unsendable = [...HANDLER_ONLY_TYPES].filter((type) => !deps.handlers?.[type]);
    this.sender = new WebhookSender({ config: deps.config, log: this.log, maxSockets: limits.concurrency, lookup: deps.lookup, tracing: deps.tracing, hooks: deps.hooks });
    this.attemptMs = 2 * deps.config.timeout + ATTEMPT_SLACK_MS;
    this.leaseMs = this.attemptMs + LEASE_MARGIN_MS;
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
      // The grace's timer does not hold the process: once every attempt ended (or none ran), nothing waits on it.
      await Promise.race([Promise.all([...this.running.values()].map((r) => r.done)), delay(SHUTDOWN_GRACE_MS, undefined, { ref: false })]);
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
      this.sender.close();
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

  /**
   * For tests and operators' health checks: starts a claim pass and resolves once a pass that
   * began after this call has finished, so that every message stored before the call has been
   * looked at (claimed, or left for a reason: the user's attempts in flight, this instance full).
   * Attempts it launched may still be running. Resolves at once when the worker is closing.
   */
  async settled(): Promise<void> {
    const target = this.passesBegun + 1; // passes run one at a time: the next one to begin
    this.wake();
    while (this.passesFinished < target && this.passing) await this.passing;
  }

  /** Claims what may run now, unless a claim is under way (then once more after it). */
  private wake(): void {
    if (this.closing) return;
    if (this.passing) {
      this.again = true;
      return;
    }
    this.passesBegun++;
    this.passing = this.claim().finally(() => {
      this.passesFinished++;
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
      claimed = await claimDue(this.deps.db, { lease, leaseMs: this.leaseMs, limit: free, perUser: this.limits.perUserConcurrency, unsendable: this.unsendable });
    } catch (err) {
      // Once per outage, not once per attempt to claim.
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
    if (claimed.length === free) {
      this.again = true;
      return;
    }
    // Nothing more to claim now: wake when the next message falls due (another instance's retry, or
    // its lease lapsing). One due already but not claimable (its user's attempts are all in flight
    // elsewhere) is looked at again a second later, not in a loop.
    const inMs = await nextDueInMs(this.deps.db, this.unsendable).catch(() => undefined);
    if (inMs !== undefined) this.wakeAt(Date.now() + Math.max(inMs + 10, NOT_CLAIMABLE_RECHECK_MS));
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
    const context = { userId: job.user_id, subject: job.subject ?? undefined, type: job.type, webhookId: job.id, attempt: job.attempts };
    if (job.attempts > job.max_attempts) {
      // Its earlier attempts were cut by instances that died (their leases lapsed): none is left.
      this.count('gave_up', job);
      this.log.warn(context, 'webhook not delivered: retries exhausted');
      await finishDelivery(this.deps.db, job.id, lease, 'failed', 'retries exhausted');
      return;
    }
    const handler = this.deps.handlers?.[job.type];
    // Aborted by a shutdown (the controller) or at the attempt's deadline, whose timer holds nothing.
    const signal = AbortSignal.any([controller.signal, AbortSignal.timeout(this.attemptMs)]);
    let result = await untilAborted(handler ? handler(job, signal) : this.sender.attempt(job, signal), signal);
    if (!result) {
      // Cut by a shutdown: close() hands it back. Cut by the deadline: a timeout like any other.
      if (controller.signal.aborted) return;
      result = { outcome: 'timeout', error: `no outcome within ${this.attemptMs} ms` };
    }
    this.count(result.outcome, job);
    const outcome = { ...context, outcome: result.outcome };
    await this.settle(job, lease, result, outcome).catch((err: unknown) => {
      // The lease lapses and another attempt follows: at least once, maybe twice (the outcome says whether it was delivered).
      this.log.warn({ ...outcome, err: describeError(err) }, 'webhook attempt outcome could not be recorded; the message is attempted again');
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
      this.count('gave_up', job);
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

  /** One timer, for the earliest message due that this instance knows of. */
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

  private count(outcome: AttemptOutcome | MessageOutcome, job: ClaimedDelivery): void {
    // A handler's message is billing's (a meter event); one without a user, an operator hook.
    const kind = this.deps.handlers?.[job.type] ? 'billing' : job.user_id === null ? 'hook' : 'webhook';
    this.deps.metrics.webhookDeliveries.inc({ kind, outcome });
  }
}
