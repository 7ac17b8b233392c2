// A migrated database of the file's own, as a Database the code under test takes: for tests of
// repositories whose rows the run's shared database would mix with other files' (operators).
import { afterAll, beforeAll } from 'vitest';
import { postgresDatabase, type Database } from '../../src/storage/database/index.js';
import { closeSql, throwawayDatabase, type ThrowawayDatabase } from './gateway.js';

/** Registers the file's beforeAll and afterAll; the returned function gives the Database inside tests. */
export function ownMigratedDatabase(): () => Database {
  let database: ThrowawayDatabase | undefined;
  let db: Database | undefined;
  beforeAll(async () => {
    database = await throwawayDatabase({ migrated: true });
    db = postgresDatabase(database.url);
  });
  afterAll(async () => {
    await db?.close();
    await database?.drop();
    await closeSql();
  });
  return () => db!;
}
