// Counts kept in memory on the request path and written once a second off it (API key usage,
// keys/usage.ts; quota refusals, storage/usage/ownerDenials.ts): the timer, one flush at a time,
// a failure logged once while the database is away and its recovery once, and a last flush on close.
import type { Logger } from 'pino';
import { failureLog, type FailureLog } from '../../telemetry/logThrottle.js';

const FLUSH_EVERY_MS = 1000;

export abstract class BatchedWrites {
  private readonly timer: NodeJS.Timeout;
  private flushing: Promise<void> = Promise.resolve();
  // Flushed every second: while Postgres is away a line per flush would be the flood issue 18 saw.
  private readonly failures: FailureLog;

  constructor(log: Logger, messages: { failed: string; recovered: string }) {
    this.failures = failureLog(log, messages.failed, { recoveredMessage: messages.recovered });
    this.timer = setInterval(() => void this.flush(), FLUSH_EVERY_MS);
    this.timer.unref();
  }

  /**
   * Writes what is pending and says whether there was anything; throws when a statement failed,
   * having kept what it did not write for the next flush (nothing of a failed statement is written).
   */
  protected abstract writePending(): Promise<boolean>;

  flush(): Promise<void> {
    this.flushing = this.flushing.then(async () => {
      try {
        if (await this.writePending()) this.failures.recovered();
      } catch (err) {
        this.failures.failed(err);
      }
    });
    return this.flushing;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}
