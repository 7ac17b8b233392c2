// The client-side query timeout: a query that gets no answer in time is a StorageUnavailableError
// (answered 503), its connection is not handed to the next query, and migrations, which may wait
// for another instance's lock, are not cut by it. A slow pg_sleep stands in for a silent server.
import pg from 'pg';
import { afterAll, afterEach, beforeEach, expect, it } from 'vitest';
import { StorageUnavailableError } from '../../src/errors/index.js';
import { postgresDatabase, type Database } from '../../src/storage/database/db.js';
import { LOCK_KEY, migrate, migrationFiles } from '../../src/storage/database/migrations.js';
import { closeSql, describeWithServices, throwawayDatabase } from '../helpers/gateway.js';

const TIMEOUT_MS = 300;

describeWithServices('query timeout', () => {
  let fresh: { url: string; drop(): Promise<void> };
  let db: Database;
  beforeEach(async () => {
    fresh = await throwawayDatabase();
    db = postgresDatabase(fresh.url, { queryTimeoutMs: TIMEOUT_MS });
  });
  afterEach(async () => {
    await db.close();
    await fresh.drop();
  });
  afterAll(async () => { await closeSql(); });

  it('a query without an answer in time is unavailable, and its connection is not reused', async () => {
    await expect(db.query('SELECT pg_sleep(3)')).rejects.toBeInstanceOf(StorageUnavailableError);
    // Were the timed-out connection back in the pool, this would queue behind the sleep and time out too.
    expect(await db.query('SELECT 1 AS one')).toEqual([{ one: 1 }]);

    await expect(db.transaction(async (tx) => tx.query('SELECT pg_sleep(3)'))).rejects.toBeInstanceOf(StorageUnavailableError);
    expect(await db.transaction(async (tx) => tx.query('SELECT 2 AS two'))).toEqual([{ two: 2 }]);
  });

  // Postgres restarting, failing over or an operator's pg_terminate_backend while a transaction
  // waits between two statements: the checked-out connection reports the loss as an 'error'
  // event, which crashed the process when nothing listened for it there.
  it('a transaction whose connection is lost between two statements is unavailable, and the process lives on', async () => {
    const admin = new pg.Client({ connectionString: fresh.url });
    await admin.connect();
    try {
      const attempt = db.transaction(async (tx) => {
        const [row] = await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        await admin.query('SELECT pg_terminate_backend($1)', [row!.pid]);
        await new Promise((resolve) => setTimeout(resolve, 200)); // the FATAL and the close arrive meanwhile
        return tx.query('SELECT 1');
      });
      await expect(attempt).rejects.toBeInstanceOf(StorageUnavailableError);
      expect(await db.transaction(async (tx) => tx.query('SELECT 3 AS three'))).toEqual([{ three: 3 }]);
    } finally {
      await admin.end();
    }
  });

  it('migrations wait for another instance holding the lock longer than the query timeout', async () => {
    const other = new pg.Client({ connectionString: fresh.url });
    await other.connect();
    try {
      await other.query('BEGIN');
      await other.query('SELECT pg_advisory_xact_lock($1)', [LOCK_KEY]);
      const applied = migrate(db).then((files) => files.length, (err: unknown) => err);
      await new Promise((resolve) => setTimeout(resolve, TIMEOUT_MS * 3));
      await other.query('COMMIT');
      expect(await applied).toBe(migrationFiles().length);
    } finally {
      await other.end();
    }
  });
});
