// Migrations: applied in order, once each, in one transaction, safe when instances start together.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { StorageUnavailableError } from '../../src/errors/index.js';
import { postgresDatabase, type Database } from '../../src/storage/database/db.js';
import { assertMigrated, migrate, migrationFiles, pendingMigrations, PendingMigrationsError, splitStatements } from '../../src/storage/database/migrations.js';
import { getOrCreateSecret } from '../../src/storage/database/secrets.js';
import { closeSql, describeWithServices, throwawayDatabase } from '../helpers/gateway.js';

const REAL_FILES = migrationFiles();

describeWithServices('migrate()', () => {
  let fresh: { url: string; drop(): Promise<void> };
  const opened: Database[] = [];
  const open = () => {
    const db = postgresDatabase(fresh.url);
    opened.push(db);
    return db;
  };
  beforeEach(async () => { fresh = await throwawayDatabase(); });
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((db) => db.close()));
    await fresh.drop();
  });
  afterAll(async () => { await closeSql(); });

  it('two migrate() calls started at once on a fresh database both succeed, one row per file', async () => {
    const [a, b] = [open(), open()];
    const [appliedA, appliedB] = await Promise.all([migrate(a), migrate(b)]);
    // One instance applied everything, the other waited for the lock and found nothing to do.
    expect([...appliedA, ...appliedB].sort()).toEqual(REAL_FILES);
    expect([appliedA.length, appliedB.length].sort()).toEqual([0, REAL_FILES.length]);
    const rows = await a.query<{ name: string }>('SELECT name FROM schema_migrations ORDER BY name');
    expect(rows.map((r) => r.name)).toEqual(REAL_FILES);
    // The contract's tables are there.
    const tables = await a.query<{ table_name: string }>(`SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'`);
    expect(tables.map((t) => t.table_name)).toEqual(expect.arrayContaining(['users', 'subscriptions', 'refresh_tokens', 'api_tokens', 'webhooks', 'gateway_secrets', 'schema_migrations']));
    // And a later start has nothing to apply.
    expect(await migrate(open())).toEqual([]);
  });

  describe('with a migrations folder of its own', () => {
    let dir: string;
    beforeEach(() => { dir = mkdtempSync(path.join(tmpdir(), 'gw-migrations-')); });
    afterEach(() => rmSync(dir, { recursive: true, force: true }));
    const file = (name: string, text: string) => writeFileSync(path.join(dir, name), text);

    it('applies each file once, in name order, and only new files later; other files are ignored', async () => {
      const db = open();
      file('002_second.sql', "INSERT INTO log (entry) VALUES ('second');\n");
      file('001_first.sql', "-- a comment; with a semicolon\nCREATE TABLE log (id serial PRIMARY KEY, entry text NOT NULL);\nINSERT INTO log (entry) VALUES ('first');\n");
      file('README.md', 'not a migration');
      file('3_no_underscore_name.txt', 'SELECT 1;');
      expect(await migrate(db, dir)).toEqual(['001_first.sql', '002_second.sql']);
      expect(await migrate(db, dir)).toEqual([]);
      file('010_third.sql', [
        'CREATE FUNCTION add_entry(e text) RETURNS void AS $$',
        'BEGIN',
        '  INSERT INTO log (entry) VALUES (e);',
        'END',
        '$$ LANGUAGE plpgsql;',
        "SELECT add_entry('third');",
      ].join('\n'));
      expect(await migrate(db, dir)).toEqual(['010_third.sql']);
      expect(await migrate(db, dir)).toEqual([]);
      expect((await db.query<{ entry: string }>('SELECT entry FROM log ORDER BY id')).map((r) => r.entry)).toEqual(['first', 'second', 'third']);
    });

    it('a failing file leaves nothing behind: the whole run is one transaction', async () => {
      const db = open();
      file('001_ok.sql', 'CREATE TABLE kept_or_not (id int);\n');
      file('002_broken.sql', 'CREATE TABLE nope (id int;\n');
      await expect(migrate(db, dir)).rejects.toThrow();
      // Not even schema_migrations is left: it was created in the same transaction.
      expect(await db.query(`SELECT to_regclass('kept_or_not') AS a, to_regclass('schema_migrations') AS b`)).toEqual([{ a: null, b: null }]);
      // Once fixed, the folder applies from the start.
      file('002_broken.sql', 'CREATE TABLE nope (id int);\n');
      expect(await migrate(db, dir)).toEqual(['001_ok.sql', '002_broken.sql']);
    });

    it('pendingMigrations / assertMigrated (storage.migrate: false): what the database lacks, applying nothing', async () => {
      const db = open();
      file('001_first.sql', 'CREATE TABLE t1 (id int);\n');
      file('002_second.sql', 'CREATE TABLE t2 (id int);\n');
      // A fresh database: not even schema_migrations.
      expect(await pendingMigrations(db, dir)).toEqual(['001_first.sql', '002_second.sql']);
      const refused = await assertMigrated(db, dir).catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(PendingMigrationsError);
      expect((refused as PendingMigrationsError).pending).toEqual(['001_first.sql', '002_second.sql']);
      expect(await db.query(`SELECT to_regclass('t1') AS t, to_regclass('schema_migrations') AS m`)).toEqual([{ t: null, m: null }]);

      await migrate(db, dir);
      expect(await pendingMigrations(db, dir)).toEqual([]);
      await assertMigrated(db, dir);
      file('003_third.sql', 'CREATE TABLE t3 (id int);\n');
      expect(await pendingMigrations(db, dir)).toEqual(['003_third.sql']);
      await expect(assertMigrated(db, dir)).rejects.toThrow('the database lacks 1 migration(s): 003_third.sql');
    });
  });

  it('getOrCreateSecret: concurrent first starts agree on one value', async () => {
    const db = open();
    await migrate(db);
    const results = await Promise.all(['one', 'two', 'three', 'four'].map((candidate) => getOrCreateSecret(open(), 'shared', candidate)));
    expect(new Set(results.map((r) => r.value)).size).toBe(1);
    expect(results.filter((r) => r.created)).toHaveLength(1);
    expect(await db.query('SELECT count(*)::int AS n FROM gateway_secrets WHERE name = $1', ['shared'])).toEqual([{ n: 1 }]);
  });

  it('getOrCreateSecret: a row deleted by hand between its insert and its read is stored again, not a crash', async () => {
    const db = open();
    const other = open();
    await migrate(db);
    await getOrCreateSecret(db, 'shared', 'first');
    // The real database, with another connection's DELETE landing right after the insert found the row.
    let deleted = false;
    const interleaved = {
      query: async (sql: string, params?: unknown[]) => {
        const rows = await db.query(sql, params);
        if (sql.startsWith('INSERT') && !deleted) {
          deleted = true;
          await other.query('DELETE FROM gateway_secrets WHERE name = $1', ['shared']);
        }
        return rows;
      },
    } as unknown as Database;
    expect(await getOrCreateSecret(interleaved, 'shared', 'second')).toEqual({ value: 'second', created: true });
    expect(await db.query('SELECT value FROM gateway_secrets WHERE name = $1', ['shared'])).toEqual([{ value: 'second' }]);
  });
});

describe('splitStatements', () => {
  it('splits on ; at line ends, keeps $$ bodies whole, drops comment lines', () => {
    const sql = [
      '-- header; comment',
      'CREATE TABLE a (x int);',
      'CREATE FUNCTION f() RETURNS trigger AS $$',
      'BEGIN',
      '  PERFORM 1;',
      '  RETURN NULL;',
      'END',
      '$$ LANGUAGE plpgsql;',
      'INSERT INTO a VALUES (1); -- trailing',
      'SELECT 1',
    ].join('\n');
    expect(splitStatements(sql)).toEqual([
      'CREATE TABLE a (x int);',
      'CREATE FUNCTION f() RETURNS trigger AS $$\nBEGIN\n  PERFORM 1;\n  RETURN NULL;\nEND\n$$ LANGUAGE plpgsql;',
      'INSERT INTO a VALUES (1); -- trailing',
      'SELECT 1',
    ]);
  });
});

describe('postgresDatabase', () => {
  it('an unreachable server is a StorageUnavailableError (answered 503), not a raw error', async () => {
    const db = postgresDatabase('postgres://root@127.0.0.1:1/none');
    try {
      await expect(db.query('SELECT 1')).rejects.toBeInstanceOf(StorageUnavailableError);
      await expect(db.transaction(async (tx) => tx.query('SELECT 1'))).rejects.toBeInstanceOf(StorageUnavailableError);
    } finally {
      await db.close();
    }
  });
});
