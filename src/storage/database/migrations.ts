// Applies migrations/*.sql in name order, once each. A transaction-scoped advisory lock makes
// concurrent starts safe: the second instance waits, then finds everything applied.
// No library: none we found runs the same SQL on both node-postgres and PGlite, and this is ~30 lines.
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Database, Queryable } from './db.js';

export const MIGRATIONS_DIR = fileURLToPath(new URL('../../../migrations/', import.meta.url));
export const LOCK_KEY = 7_414_201; // arbitrary, fixed: every instance must take the same lock
// Not the ordinary 5 s query timeout: taking the lock may wait for another instance's migration,
// and DDL on a big table can run for minutes. Still bounded (an hour per statement), so a start
// cut off from Postgres fails in the end instead of hanging forever.
const MIGRATION_QUERY_TIMEOUT_MS = 60 * 60 * 1000;

/** The migration files in `dir`, in the order they are applied. */
export function migrationFiles(dir = MIGRATIONS_DIR): string[] {
  return readdirSync(dir).filter((f) => /^\d+_.+\.sql$/.test(f)).sort();
}

export async function migrate(db: Database, dir = MIGRATIONS_DIR): Promise<string[]> {
  const files = migrationFiles(dir);
  return db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [LOCK_KEY]);
    await tx.query('CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())');
    const done = new Set((await tx.query<{ name: string }>('SELECT name FROM schema_migrations')).map((r) => r.name));
    const applied: string[] = [];
    for (const file of files) {
      if (done.has(file)) continue;
      // Statements without parameters, one by one: the extended protocol takes a single statement.
      for (const statement of splitStatements(readFileSync(`${dir}/${file}`, 'utf8'))) await tx.query(statement);
      await tx.query('INSERT INTO schema_migrations (name) VALUES ($1)', [file]);
      applied.push(file);
    }
    return applied;
  }, { queryTimeoutMs: MIGRATION_QUERY_TIMEOUT_MS });
}

/** The migration files in `dir` that the database has not applied yet, in order. */
export async function pendingMigrations(db: Queryable, dir = MIGRATIONS_DIR): Promise<string[]> {
  const [table] = await db.query<{ exists: boolean }>("SELECT to_regclass('schema_migrations') IS NOT NULL AS exists");
  const done = new Set(table?.exists ? (await db.query<{ name: string }>('SELECT name FROM schema_migrations')).map((r) => r.name) : []);
  return migrationFiles(dir).filter((file) => !done.has(file));
}

/** The database lacks migrations and this instance may not apply them (storage.migrate: false). */
export class PendingMigrationsError extends Error {
  constructor(readonly pending: string[]) {
    super(`the database lacks ${pending.length} migration(s): ${pending.join(', ')}`);
    this.name = 'PendingMigrationsError';
  }
}

/**
 * For storage.migrate: false. Refuses to run on a database older than the code: every query on a
 * missing table or column would otherwise fail one request at a time, long after the start.
 */
export async function assertMigrated(db: Queryable, dir = MIGRATIONS_DIR): Promise<void> {
  const pending = await pendingMigrations(db, dir);
  if (pending.length) throw new PendingMigrationsError(pending);
}

/** Splits a script on `;` at the end of a line, keeping $$-quoted function bodies whole. */
export function splitStatements(sql: string): string[] {
  const statements: string[] = [];
  let current = '';
  let inDollar = false;
  for (const line of sql.split('\n')) {
    if (!inDollar && /^\s*--/.test(line)) continue;
    current += `${line}\n`;
    if ((line.match(/\$\$/g)?.length ?? 0) % 2 === 1) inDollar = !inDollar;
    if (!inDollar && /;\s*(--.*)?$/.test(line)) {
      statements.push(current.trim());
      current = '';
    }
  }
  if (current.trim()) statements.push(current.trim());
  return statements;
}
