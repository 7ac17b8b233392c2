// gateway_secrets: values generated once and shared by every instance through the database.
import type { Queryable } from './db.js';

/** Returns the stored value, storing `candidate` first if there is none (the first instance wins). */
export async function getOrCreateSecret(db: Queryable, name: string, candidate: string): Promise<{ value: string; created: boolean }> {
  const inserted = await db.query<{ value: string }>(
    'INSERT INTO gateway_secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING RETURNING value',
    [name, candidate],
  );
  if (inserted[0]) return { value: inserted[0].value, created: true };
  const rows = await db.query<{ value: string }>('SELECT value FROM gateway_secrets WHERE name = $1', [name]);
  return { value: rows[0]!.value, created: false };
}
