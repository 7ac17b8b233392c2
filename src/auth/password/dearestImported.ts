// The dearest imported password hash still stored (CONTRACT §27, §13), held in memory by every
// instance so that a failed login pays its dummy check without a query: loaded at start, again
// whenever imported_hash_costs changes (an import's batch, the housekeeping dropping a class, SQL:
// its trigger, heard through the change feed within a second on every instance), after the feed
// was interrupted, and every RELOAD_EVERY_MS besides. A reload that fails keeps what it had.
import type { Logger } from 'pino';
import type { ChangeFeed } from '../../storage/feed/index.js';
import type { Database } from '../../storage/database/index.js';
import { dearestHashCost } from '../../storage/accounts/index.js';
import type { Passwords } from './passwords.js';

const RELOAD_EVERY_MS = 60_000;

export class DearestImportedHash {
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  private loading: Promise<void> | undefined;
  private again = false;

  constructor(private readonly deps: { db: Database; feed: ChangeFeed; passwords: Passwords; log: Logger }) {}

  async start(): Promise<void> {
    await this.reload();
    const reload = () => void this.reload();
    this.unsubscribe = this.deps.feed.subscribe({ importedHashCostsChanged: reload, resumed: reload });
    this.timer = setInterval(reload, RELOAD_EVERY_MS).unref();
  }

  /** Reads the table again; calls made meanwhile are folded into one more read, so the last change is never missed. */
  reload(): Promise<void> {
    if (this.loading) {
      this.again = true;
      return this.loading;
    }
    this.loading = (async () => {
      do {
        this.again = false;
        try {
          this.deps.passwords.dearestImported = await dearestHashCost(this.deps.db);
        } catch (err) {
          this.deps.log.warn({ err }, 'imported hash costs: reload failed; keeping the dearest in memory');
        }
      } while (this.again);
    })().finally(() => {
      this.loading = undefined;
    });
    return this.loading;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    this.unsubscribe?.();
    await this.loading;
  }
}
