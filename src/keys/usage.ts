// What API keys are used for, written off the response path: each request made with a key is
// counted in memory (one Map lookup) and flushed once a second: last_used_at in one UPDATE, and
// the day's requests and denials (api_key_usage, CONTRACT §21) in one INSERT that adds to what
// other instances wrote. A key request never waits on a database write. And what a key did, read
// back per UTC day (keyUsage).
import type { Logger } from 'pino';
import { BatchedWrites, type Database, type Queryable } from '../storage/database/index.js';
import { addKeyCounts, keyUsageDays, recordKeyUses, type KeyDayCount } from '../storage/keys/index.js';
import { DAY_MS, utcDay } from '../time.js';

/** One key's uses since the last flush, on one UTC day (its number since the epoch: no string per request). */
interface Tally {
  day: number;
  requests: number;
  denied: number;
  /** The last use that authenticated (last_used_at); null: only refusals of an expired key, say. */
  lastUsed: Date | null;
}

export class ApiKeyUsage extends BatchedWrites {
  private pending = new Map<number, Tally>();
  /** Counts of a day that ended before they were flushed, and counts a flush failed to write. */
  private carried = new Map<string, KeyDayCount>();

  constructor(private readonly db: Database, log: Logger) {
    super(log, { failed: 'could not record API key usage; kept for the next flush', recovered: 'API key usage recorded again' });
  }

  /**
   * A request made with key `keyId` at `at`: `denied` when the gateway refused it once the key was
   * known; `authenticated` when the key let it in (its last use), false for a key refused itself
   * (expired, its owner deactivated).
   */
  record(keyId: number, at: Date, denied = false, authenticated = true): void {
    const day = Math.floor(at.getTime() / DAY_MS);
    let tally = this.pending.get(keyId);
    if (!tally) this.pending.set(keyId, (tally = { day, requests: 0, denied: 0, lastUsed: null }));
    else if (tally.day !== day) {
      // Midnight UTC passed: the earlier day's counts go their own way, once a day per key.
      if (tally.requests) this.carry({ keyId, day: utcDay(new Date(tally.day * DAY_MS)), requests: tally.requests, denied: tally.denied });
      Object.assign(tally, { day, requests: 0, denied: 0 });
    }
    tally.requests++;
    if (denied) tally.denied++;
    if (authenticated && (!tally.lastUsed || tally.lastUsed < at)) tally.lastUsed = at;
  }

  private carry(count: KeyDayCount): void {
    const slot = `${count.keyId}:${count.day}`;
    const held = this.carried.get(slot);
    if (held) {
      held.requests += count.requests;
      held.denied += count.denied;
    } else this.carried.set(slot, { ...count });
  }

  protected async writePending(): Promise<boolean> {
    if (this.pending.size === 0 && this.carried.size === 0) return false;
    const batch = this.pending;
    const counts = [...this.carried.values()];
    this.pending = new Map();
    this.carried = new Map();
    const uses = new Map<number, Date>();
    for (const [keyId, tally] of batch) {
      if (tally.requests) counts.push({ keyId, day: utcDay(new Date(tally.day * DAY_MS)), requests: tally.requests, denied: tally.denied });
      if (tally.lastUsed) uses.set(keyId, tally.lastUsed);
    }
    let counted = false;
    try {
      await addKeyCounts(this.db, counts);
      counted = true;
      await recordKeyUses(this.db, uses);
      return true;
    } catch (err) {
      // Kept for the next flush rather than lost while Postgres is away (one statement each):
      // counts already added are not added twice.
      if (!counted) for (const count of counts) this.carry(count);
      // The newest use wins: one heard since is newer.
      for (const [keyId, at] of uses) {
        const tally = this.pending.get(keyId);
        if (!tally) this.pending.set(keyId, { day: Math.floor(at.getTime() / DAY_MS), requests: 0, denied: 0, lastUsed: at });
        else if (!tally.lastUsed) tally.lastUsed = at;
      }
      throw err;
    }
  }
}

/** How many days a key's usage covers (CONTRACT §21). */
export const USAGE_DAYS = 30;

/** The 30 UTC days that end with `now`'s, oldest first. */
function lastDays(now: Date): string[] {
  const today = Math.floor(now.getTime() / DAY_MS);
  return Array.from({ length: USAGE_DAYS }, (_, i) => utcDay(new Date((today - USAGE_DAYS + 1 + i) * DAY_MS)));
}

/**
 * What personal key `id` of user `userId` did over the 30 UTC days that end with `now`'s, oldest
 * first, days without a use at 0; undefined when it is not one of the user's keys. Keys revoked or
 * rolled keep their history: it shows who still calls with an old key.
 */
export async function keyUsage(db: Queryable, userId: number, id: number, now: Date): Promise<{ date: string; requests: number; denied: number }[] | undefined> {
  const days = lastDays(now);
  const counted = await keyUsageDays(db, userId, id, days[0]!, days[USAGE_DAYS - 1]!);
  if (!counted) return undefined;
  const byDay = new Map(counted.map((c) => [c.day, c]));
  return days.map((date) => ({ date, requests: byDay.get(date)?.requests ?? 0, denied: byDay.get(date)?.denied ?? 0 }));
}
