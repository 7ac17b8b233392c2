// The hourly clean-up, by every instance (a DELETE by age is idempotent, so instances need not
// agree on who does it): single-use rows that expired (storage/accounts/expiredRows.ts), kept a day past
// their expiry so that a link opened a little late still finds its row and is refused as expired;
// audit events past audit.retention (audit.ts); usage records nothing reads any more (refunds,
// reported metered uses, API key usage: storage/usage/usageRetention.ts says how long each is kept); and
// the cost classes of imported password hashes that no stored hash has any more
// (storage/accounts/importedHashCosts.ts), so that failed logins stop paying a dummy check of a cost nobody
// has (CONTRACT §27): within the hour after the last such account signed in, and never within an
// hour of an import recording it. Webhook messages keep their own purge, whose pace is a setting
// (webhooks/outbox.ts). Beside it, a minutely pass for work that must happen within a minute
// (billing: the end of a past_due grace, CONTRACT §23).
import type { Logger } from 'pino';
import type { AuditLog } from './audit.js';
import type { Database } from './storage/database/index.js';
import { forgetUnusedHashCosts, purgeExpired } from './storage/accounts/index.js';
import { purgeUsageRecords } from './storage/usage/index.js';

const SWEEP_EVERY_MS = 3_600_000;
const MINUTELY_MS = 60_000;
const KEEP_EXPIRED_MS = 86_400_000;
// Longer than an import's batch may stay open (import/users.ts): its new accounts are out of sight until it commits.
const KEEP_HASH_COSTS_MS = 3_600_000;

export interface HousekeepingDeps {
  db: Database;
  clock: () => Date;
  log: Logger;
  audit: Pick<AuditLog, 'purge'>;
  /** Test seam: how often the sweep runs (hourly), so a test can watch the timer do it; the minutely pass runs at least as often. */
  everyMs?: number;
  /** Work run with each sweep (each instance runs it: it must claim what it does, or be idempotent), e.g. the domains' daily re-check. */
  hourly?: Array<{ name: string; run: () => Promise<unknown> }>;
  /** Work due within a minute of becoming due (each instance runs it: it must be idempotent). */
  minutely?: Array<{ name: string; run: () => Promise<unknown> }>;
}

export class Housekeeping {
  private readonly timer: NodeJS.Timeout;
  private readonly minuteTimer: NodeJS.Timeout | undefined;
  private minutelyRunning = false;
  /** The timers' passes under way, which close() lets finish before the pool they use closes. */
  private readonly running = new Set<Promise<unknown>>();

  constructor(private readonly deps: HousekeepingDeps) {
    // Unref'd, and cleared by close(): the clean-up never keeps a stopped process alive.
    this.timer = setInterval(() => this.track(this.sweep()), deps.everyMs ?? SWEEP_EVERY_MS).unref();
    if (deps.minutely?.length) this.minuteTimer = setInterval(() => this.track(this.runMinutely()), Math.min(deps.everyMs ?? MINUTELY_MS, MINUTELY_MS)).unref();
  }

  private track(pass: Promise<unknown>): void {
    const done = () => this.running.delete(pass);
    this.running.add(pass);
    pass.then(done, done);
  }

  /** One minutely pass; a pass still running when the next is due is not doubled. */
  async runMinutely(): Promise<void> {
    if (this.minutelyRunning) return;
    this.minutelyRunning = true;
    try {
      for (const task of this.deps.minutely ?? []) {
        await task.run().catch((err: unknown) => this.deps.log.warn({ err, task: task.name }, 'a minutely task failed; it runs again in a minute'));
      }
    } finally {
      this.minutelyRunning = false;
    }
  }

  /** Purges them all; how many rows went, by table. */
  async sweep(): Promise<Record<string, number>> {
    const [tokens, auditEvents, hashCosts, usage] = await Promise.all([
      this.purgeTokens(), this.deps.audit.purge(), this.purgeHashCosts(), this.purgeUsage(), this.runHourly(),
    ]);
    return { ...tokens, audit_events: auditEvents, imported_hash_costs: hashCosts, ...usage };
  }

  /** The sweep's tasks, one after the other; a failing one is logged and runs again next hour. */
  private async runHourly(): Promise<void> {
    for (const task of this.deps.hourly ?? []) {
      await task.run().catch((err: unknown) => this.deps.log.warn({ err, task: task.name }, 'an hourly task failed; it runs again in an hour'));
    }
  }

  private async purgeHashCosts(): Promise<number> {
    try {
      return await forgetUnusedHashCosts(this.deps.db, new Date(this.deps.clock().getTime() - KEEP_HASH_COSTS_MS));
    } catch (err) {
      this.deps.log.warn({ err }, 'imported hash costs could not be purged');
      return 0;
    }
  }

  /** Usage records past their retention (storage/usage/usageRetention.ts). */
  private async purgeUsage(): Promise<Record<string, number>> {
    try {
      const purged = await purgeUsageRecords(this.deps.db, this.deps.clock());
      if (Object.values(purged).some((n) => n > 0)) this.deps.log.info({ purged }, 'usage records past their retention purged');
      return purged;
    } catch (err) {
      this.deps.log.warn({ err }, 'usage records past their retention could not be purged');
      return {};
    }
  }

  /** Single-use rows that expired more than a day ago. */
  private async purgeTokens(): Promise<Record<string, number>> {
    try {
      const purged = await purgeExpired(this.deps.db, new Date(this.deps.clock().getTime() - KEEP_EXPIRED_MS));
      if (Object.values(purged).some((n) => n > 0)) this.deps.log.info({ purged }, 'expired single-use tokens purged');
      return purged;
    } catch (err) {
      this.deps.log.warn({ err }, 'expired single-use tokens could not be purged');
      return {};
    }
  }

  /**
   * Stops the timers and waits for a pass under way: closed mid-pass, the pool would close under it
   * and a stopping gateway log its statements as storage failures.
   */
  async close(): Promise<void> {
    clearInterval(this.timer);
    clearInterval(this.minuteTimer);
    await Promise.allSettled([...this.running]);
  }
}
