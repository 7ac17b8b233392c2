// The daily limiter's blocks (index.ts): Postgres is the authority, and one conditional UPDATE
// reserves uses only while the day's count is under the plan's limit, so no race on any instance
// can exceed it. A busy counter's row would serialize every request on its lock, so an instance
// reserves a block of uses in one statement and serves them itself (the per-minute leases of
// minuteLimit.ts are the model): a lone client gets one use at a time (counts exact), concurrent
// ones a block twice as large each time they use one up in time, never more than MAX_BLOCK nor a
// BLOCK_SHARE-th of what remains (so the last uses of a day go one by one, exactly), and what is
// left after BLOCK_MS goes back to Postgres. A block is counted before it is served: an instance
// that dies holding one loses those uses for the day, never over-admits; one that loses Postgres
// for a while (a failover) keeps what it owes and hands it back later (handBacks.ts).
import type { Logger } from 'pino';
import { type Counter, counterKey, reserveUses, type UseWindows } from '../../../storage/usage/index.js';
import { CommitInDoubtError, type Database } from '../../../storage/database/index.js';
import type { StoreCall, StoreCalls } from '../../../telemetry/storeCalls.js';
import { utcDay, utcMonth } from '../../../time.js';
import type { QuotaOutcome } from '../quota.js';
import { gateKey, type Gates } from './gate.js';
import { HandBacks, type InDoubtUses } from './handBacks.js';
import { refusedBy, type Served } from './outcomes.js';

/** The counting UPDATE's span, by owner type: the table it updates (storage/usage/counters.ts). */
const RESERVE_CALLS: Record<Counter['ownerType'], StoreCall> = {
  user: { system: 'postgresql', operation: 'UPDATE', collection: 'users' }, org: { system: 'postgresql', operation: 'UPDATE', collection: 'organizations' },
};

/** How long an instance keeps a block of a counter's uses before it hands back what it did not serve. */
const BLOCK_MS = 1_000;
/** The most uses one block holds. */
const MAX_BLOCK = 1_000;
/** A block holds at most this share of the counter's remaining uses of the day. */
const BLOCK_SHARE = 20;

/** Whose uses are counted (pipeline/subject.ts): the counter, and the plan the refusal names. */
export type Counted = Counter & { plan: string };

/** Uses of a counter's day that this instance reserved in Postgres and serves itself. */
export interface Lease extends Served {
  /** The windows it was counted on, with the limits that applied. */
  windows: UseWindows;
  granted: number;
  /** The requests that wanted this block when it came (the asker and those waiting on it). */
  demand: number;
  until: number;
}

export function sameWindows(a: UseWindows, b: UseWindows): boolean {
  return a.day === b.day && a.month === b.month && a.daily === b.daily && a.monthly === b.monthly && a.overage === b.overage;
}

/** The blocks one limiter holds, by counterKey, and the asks under way. */
export class Blocks {
  readonly leases = new Map<string, Lease>();
  readonly asking = new Map<string, { waiting: number; done: Promise<QuotaOutcome | null> }>();
  private readonly handBacks: HandBacks;
  private sweeping: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly db: Database, private readonly gates: Gates, private readonly clock: () => Date, log: Logger, stats: InDoubtUses) {
    this.handBacks = new HandBacks(db, log, stats);
  }

  /** Asks Postgres for a block of the counter's uses (handing back the old one's leftover); a refusal, or null with the block in leases. */
  async ask(user: Counted, w: UseWindows, now: Date, old: Lease | undefined, pending: { waiting: number }, calls: StoreCalls): Promise<QuotaOutcome | null> {
    const key = gateKey(user, w.day);
    const sameDay = old && old.windows.day === w.day;
    const left = sameDay ? old.left : 0;
    // Back to the windows the old block was counted on (a window the plan no longer has keeps it).
    const handback = { daily: old?.windows.daily != null ? left : 0, monthly: old?.windows.monthly != null ? left : 0 };
    // A lone client asks for one use at a time (its counts stay exact); a block that was used up in
    // time by several concurrent requests is followed by one twice as large.
    const busy = sameDay && old.left === 0 && now.getTime() < old.until && old.demand > 1;
    const wanted = busy ? Math.min(MAX_BLOCK, 2 * Math.max(old.granted, old.demand)) : 1;
    let reserved: Awaited<ReturnType<typeof reserveUses>>;
    try {
      // In a transaction of its own: its SET LOCAL statement_timeout holds through PgBouncer too.
      reserved = await calls(RESERVE_CALLS[user.ownerType], () => this.db.transaction((tx) => reserveUses(tx, user, w, handback, wanted, BLOCK_SHARE)));
    } catch (err) {
      // A COMMIT whose answer was lost may have taken the block and handed back the old one's
      // leftover: the old block is not handed back again, and what may be counted unserved is told.
      if (err instanceof CommitInDoubtError) {
        this.leases.delete(counterKey(user));
        this.handBacks.inDoubt(Math.max(wanted, left), user);
      }
      // Otherwise the use was not counted, but the gate may have been pushed past the limit meanwhile by
      // the requests it refused while this one was in flight: handing back one slot (DECR) would
      // leave the user refused all day with nothing counted. Drop the gate instead; Postgres
      // decides the next request and the gate rebuilds itself from its answer. Awaited, so a
      // retry the client sends on seeing this failure, to any instance, finds the gate gone.
      // (The month's mark is only ever set from an answer of Postgres: nothing to undo there.)
      if (w.daily !== null) await this.gates.drop(key, calls);
      throw err;
    }
    this.leases.delete(counterKey(user)); // its leftover was handed back by the statement
    if (!reserved || reserved.granted === 0) {
      // Redis had lost the count (flush, restart) or never had it (the month): mark the spent windows.
      const daySpent = !reserved || reserved.dailySpent;
      const monthSpent = !reserved || reserved.monthlySpent;
      if (w.daily !== null && daySpent) this.gates.markDaySpent(key, w.daily);
      if (w.monthly !== null && !w.overage && monthSpent) void this.gates.markMonth(user, w.month);
      return refusedBy(w, user.plan, monthSpent, now);
    }
    // The block takes the month's last uses: mark the month spent now, so that once the day's gate
    // refuses too the answer is the month's (CONTRACT §23). Should the block go back unserved, the
    // lowered count drops the mark (027's trigger, reactions.ts).
    if (this.gates.redis && w.monthly !== null && !w.overage && reserved.monthly! >= w.monthly) void this.gates.markMonth(user, w.month);
    // The asker and the requests that waited for it take their uses from the block.
    this.leases.set(counterKey(user), {
      windows: w, left: reserved.granted, granted: reserved.granted, demand: pending.waiting + 1, daily: reserved.daily, monthly: reserved.monthly, until: now.getTime() + BLOCK_MS,
    });
    this.scheduleSweep();
    return null;
  }

  /** Hands back the blocks held past BLOCK_MS, so users.daily_usage comes back to the uses served. */
  private scheduleSweep(): void {
    if (this.sweeping || this.closed) return;
    this.sweeping = setTimeout(() => {
      this.sweeping = undefined;
      void this.handBack(false).finally(() => (this.leases.size || this.handBacks.pending) && this.scheduleSweep());
    }, BLOCK_MS);
    this.sweeping.unref();
  }

  /** Hands back today's unused uses of the blocks held past their time (every block: `all`), and what earlier hand-backs still owe. */
  private async handBack(all: boolean): Promise<void> {
    const now = this.clock();
    for (const [key, lease] of this.leases) {
      if (!all && (now.getTime() < lease.until || this.asking.has(key))) continue;
      this.leases.delete(key);
      if (lease.left > 0) this.handBacks.add(key, lease.windows.day, lease.windows.daily === null ? 0 : lease.left, lease.windows.monthly === null ? 0 : lease.left);
    }
    // Those uses stay owed while this fails (Postgres away, a failover), and go back once it answers.
    await this.handBacks.flush(utcDay(now), utcMonth(now));
  }

  /** Hands back every block this instance holds (before the pool closes). */
  async close(): Promise<void> {
    this.closed = true;
    if (this.sweeping) clearTimeout(this.sweeping);
    await this.handBack(true);
  }
}
