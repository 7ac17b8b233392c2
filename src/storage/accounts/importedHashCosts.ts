// The cost classes of the imported password hashes (migration 038, CONTRACT §27 and §13): what the
// importer records in each batch's transaction, what every instance loads (the dearest) to pad a
// failed login with, and what the housekeeping drops once no stored hash has that shape.
import type { Queryable } from '../database/db.js';

/** A format and its parameters: the prefix its hashes share, a hash of that cost that matches no password, and its cost in argon2id verifications. */
export interface ImportedHashCost {
  shape: string;
  dummy: string;
  work: number;
}

/** Records these classes (new ones added, known ones marked recorded now: the housekeeping keeps them an hour more). */
export async function recordHashCosts(tx: Queryable, costs: readonly ImportedHashCost[]): Promise<void> {
  const unique = [...new Map(costs.map((c) => [c.dummy, c])).values()];
  if (!unique.length) return;
  await tx.query(
    `INSERT INTO imported_hash_costs (dummy_hash, shape, work)
     SELECT * FROM unnest($1::text[], $2::text[], $3::float8[])
     ON CONFLICT (dummy_hash) DO UPDATE SET recorded_at = now()`,
    [unique.map((c) => c.dummy), unique.map((c) => c.shape), unique.map((c) => c.work)],
  );
}

/** The dearest class recorded, if any. */
export async function dearestHashCost(q: Queryable): Promise<ImportedHashCost | undefined> {
  const [row] = await q.query<{ dummy_hash: string; shape: string; work: number }>('SELECT dummy_hash, shape, work FROM imported_hash_costs ORDER BY work DESC, dummy_hash LIMIT 1');
  return row && { shape: row.shape, dummy: row.dummy_hash, work: Number(row.work) };
}

/**
 * Drops the classes no stored hash begins with any more (their accounts signed in, were rehashed,
 * or went); how many. Only those recorded before `recordedBefore`: an import's batch that is
 * still open has its users out of sight, and its class must not go meanwhile.
 */
export async function forgetUnusedHashCosts(q: Queryable, recordedBefore: Date): Promise<number> {
  const rows = await q.query<{ dummy_hash: string }>(
    `DELETE FROM imported_hash_costs c
      WHERE c.recorded_at < $1
        AND NOT EXISTS (SELECT 1 FROM users u WHERE left(u.password_hash, length(c.shape)) = c.shape)
     RETURNING dummy_hash`,
    [recordedBefore],
  );
  return rows.length;
}
