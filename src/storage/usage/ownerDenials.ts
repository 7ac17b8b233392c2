// The quota refusals of each owner per UTC day (CONTRACT §30's usage: `denied` beside `uses`),
// written off the request path as API key usage is (apiKeyUsage.ts): a refusal is counted in
// memory (one Map lookup) and the counts are added once a second to the day's rollup row
// (usage_days, org_usage_days: migration 041), in one INSERT per owner type that adds to what other
// instances wrote. Most refusals are the Redis gate's or the per-minute limiter's and touch no
// Postgres row at all: a write per refusal would make a client hammering a spent quota cost one
// statement per request, which the gate exists to spare.
import type { Logger } from 'pino';
import { BatchedWrites } from '../database/batchedWrites.js';
import type { Queryable } from '../database/db.js';
import { COUNTER_SQL, counterKey, counterOfKey, type Counter } from './counters.js';
import { DAY_MS, utcDay } from '../../time.js';

/** The rollup table of each owner type (008, 035) and its owner column. */
const DAY_TABLES: Record<Counter['ownerType'], { table: string; owner: string }> = {
  user: { table: 'usage_days', owner: 'user_id' },
  org: { table: 'org_usage_days', owner: 'org_id' },
};

export class OwnerDenials extends BatchedWrites {
  /** By `{counterKey} {day number}`: refusals not yet written. */
  private pending = new Map<string, number>();

  constructor(private readonly db: Queryable, log: Logger) {
    super(log, { failed: 'could not record quota refusals; kept for the next flush', recovered: 'quota refusals recorded again' });
  }

  /** A request refused by a quota (per minute, day or month) counted on `counter`, at `at`. */
  record(counter: Counter, at: Date): void {
    const slot = `${counterKey(counter)} ${Math.floor(at.getTime() / DAY_MS)}`;
    this.pending.set(slot, (this.pending.get(slot) ?? 0) + 1);
  }

  protected async writePending(): Promise<boolean> {
    if (this.pending.size === 0) return false;
    const batch = this.pending;
    this.pending = new Map();
    const byType: Record<Counter['ownerType'], { ids: number[]; days: string[]; denied: number[] }> = {
      user: { ids: [], days: [], denied: [] }, org: { ids: [], days: [], denied: [] },
    };
    for (const [slot, n] of batch) {
      const [key, day] = slot.split(' ');
      const counter = counterOfKey(key!)!;
      const rows = byType[counter.ownerType];
      rows.ids.push(counter.id);
      rows.days.push(utcDay(new Date(Number(day) * DAY_MS)));
      rows.denied.push(n);
    }
    const written = new Set<Counter['ownerType']>();
    try {
      for (const ownerType of ['user', 'org'] as const) {
        await addDenials(this.db, ownerType, byType[ownerType]);
        written.add(ownerType);
      }
      return true;
    } catch (err) {
      // Kept for the next flush: one statement per owner type, so what the other statement added
      // is not added twice.
      for (const [slot, n] of batch) {
        if (!written.has(counterOfKey(slot.split(' ')[0]!)!.ownerType)) this.pending.set(slot, (this.pending.get(slot) ?? 0) + n);
      }
      throw err;
    }
  }
}

/**
 * Adds refusals to the owners' day rows in one statement; an owner deleted meanwhile is skipped
 * (its rows went with it). Rows written in owner and day order, so that two instances' flushes
 * lock them in the same order. Should an owner go between the check and the insert, the statement
 * fails, the counts are kept, and the next flush skips that owner.
 */
async function addDenials(db: Queryable, ownerType: Counter['ownerType'], rows: { ids: number[]; days: string[]; denied: number[] }): Promise<void> {
  if (rows.ids.length === 0) return;
  const { table, owner } = DAY_TABLES[ownerType];
  await db.query(
    `INSERT INTO ${table} AS d (${owner}, day, uses, denied)
     SELECT c.id, c.day, 0, sum(c.denied)
       FROM unnest($1::int[], $2::date[], $3::int[]) AS c (id, day, denied)
      WHERE EXISTS (SELECT 1 FROM ${COUNTER_SQL[ownerType].table} o WHERE o.id = c.id)
      GROUP BY c.id, c.day ORDER BY c.id, c.day
     ON CONFLICT (${owner}, day) DO UPDATE SET denied = d.denied + excluded.denied`,
    [rows.ids, rows.days, rows.denied],
  );
}
