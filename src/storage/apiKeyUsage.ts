// last_used_at is written off the response path: validations are collected in memory and
// flushed once a second in a single UPDATE, so a key request never waits on a database write.
import type { Logger } from 'pino';
import type { Database } from './db.js';
import { recordKeyUses } from './apiKeys.js';

const FLUSH_EVERY_MS = 1000;

export class ApiKeyUsage {
  private pending = new Map<string, Date>();
  private readonly timer: NodeJS.Timeout;
  private flushing: Promise<void> = Promise.resolve();

  constructor(private readonly db: Database, private readonly log: Logger) {
    this.timer = setInterval(() => void this.flush(), FLUSH_EVERY_MS);
    this.timer.unref();
  }

  record(tokenHash: string, at: Date): void {
    this.pending.set(tokenHash, at);
  }

  flush(): Promise<void> {
    this.flushing = this.flushing.then(async () => {
      if (this.pending.size === 0) return;
      const batch = this.pending;
      this.pending = new Map();
      try {
        await recordKeyUses(this.db, batch);
      } catch (err) {
        // Keep the uses for the next flush (newest wins) rather than lose them while Postgres is away.
        for (const [hash, at] of batch) if (!this.pending.has(hash)) this.pending.set(hash, at);
        this.log.warn({ err }, 'could not record API key uses; will retry');
      }
    });
    return this.flushing;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}
