// gateway_secrets: values generated once and shared by every instance through the database.
import type { Queryable } from './db.js';

/** Rounds of insert-then-read: a second is needed only when the row is deleted by hand in between. */
const ATTEMPTS = 3;

/** Returns the stored value, storing `candidate` first if there is none (the first instance wins). */
export async function getOrCreateSecret(db: Queryable, name: string, candidate: string): Promise<{ value: string; created: boolean }> {
  for (let attempt = 1; ; attempt++) {
    const inserted = await db.query<{ value: string }>(
      'INSERT INTO gateway_secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING RETURNING value',
      [name, candidate],
    );
    if (inserted[0]) return { value: inserted[0].value, created: true };
    const [stored] = await db.query<{ value: string }>('SELECT value FROM gateway_secrets WHERE name = $1', [name]);
    if (stored) return { value: stored.value, created: false };
    // The row that stopped the insert was deleted (by hand) before the read: store ours after all.
    if (attempt === ATTEMPTS) throw new Error(`gateway_secrets: ${name} keeps being deleted while it is read`);
  }
}
