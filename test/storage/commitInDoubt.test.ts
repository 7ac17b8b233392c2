// A COMMIT that may not survive a failover is in doubt (CONTRACT §32). On a server of the test's own
// whose commits wait for a synchronous standby that never answers: a COMMIT whose wait is
// cancelled (pg_cancel_backend: an operator, a tool) is answered with a warning and as a success;
// the transaction is committed on this host only, and a promoted standby would not have it. Taken
// as a success, a block reserved that way served uses the new primary never counted. A COMMIT
// whose answer never comes (its client's query_timeout) was in doubt already.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postgresDatabase, type Database } from '../../src/storage/database/db.js';
import { CommitInDoubtError } from '../../src/storage/database/failures.js';
import { testServices } from '../helpers/gateway.js';
import { hasPostgresBinaries, startOwnPostgres, type OwnPostgres } from '../helpers/ownPostgres.js';

const describeWithOwnServer = (hasPostgresBinaries || process.env.REQUIRE_SERVICES === '1') && testServices ? describe : describe.skip;

describeWithOwnServer('a COMMIT answered with a warning that it may not have reached the standby', () => {
  let own: OwnPostgres;
  let db: Database;
  const told: unknown[] = [];
  const standby = async (names: string) => {
    await own.query(`ALTER SYSTEM SET synchronous_standby_names = '${names}'`);
    await own.query('SELECT pg_reload_conf()');
    await expect.poll(async () => (await own.query<{ s: string }>("SELECT current_setting('synchronous_standby_names') AS s"))[0]!.s).toBe(names);
  };

  beforeAll(async () => {
    own = await startOwnPostgres();
    await own.query('CREATE TABLE uses (n int)');
    db = postgresDatabase(own.url('postgres'), { poolSize: 2, queryTimeoutMs: 10_000, onInDoubt: (err) => told.push(err) });
  });
  afterAll(async () => {
    await db?.close();
    await own?.stop();
  });

  it('is in doubt: thrown as CommitInDoubtError, counted and told, though this host kept it', async () => {
    await db.transaction((tx) => tx.query('INSERT INTO uses VALUES (1)'));
    expect(db.stats!.inDoubtCommits).toBe(0);

    await standby('a_standby_that_never_answers');
    const write = db.transaction((tx) => tx.query('INSERT INTO uses VALUES (2)'));
    write.catch(() => {});
    await expect.poll(async () => (await own.query<{ cancelled: boolean }>(
      "SELECT pg_cancel_backend(pid) AS cancelled FROM pg_stat_activity WHERE wait_event = 'SyncRep'")).length).toBe(1);
    await expect(write).rejects.toBeInstanceOf(CommitInDoubtError);
    await expect(write).rejects.toMatchObject({ cause: { message: expect.stringMatching(/^COMMIT answered with a warning: canceling wait for synchronous replication/) } });
    expect(db.stats!.inDoubtCommits).toBe(1);
    expect(told).toHaveLength(1);
    // Committed here: exactly what a failover may lose.
    expect(await own.query('SELECT n FROM uses ORDER BY n')).toEqual([{ n: 1 }, { n: 2 }]);

    // Reads are not affected, nor commits once the standby question is gone.
    expect(await db.query('SELECT count(*)::int AS c FROM uses')).toEqual([{ c: 2 }]);
    await standby('');
    await db.transaction((tx) => tx.query('INSERT INTO uses VALUES (3)'));
    expect(db.stats!.inDoubtCommits).toBe(1);
  });
});
