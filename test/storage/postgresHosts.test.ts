// libpq's multi-host URL (CONTRACT §32) without a failover cluster: what `gateway check` refuses,
// how the URL is read, and a Database whose first host is down going to the next one that takes
// writes (the failover itself: test/failover/postgresFailover.test.ts).
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { postgresHosts } from '../../src/config/schema.js';
import { postgresDatabase, type Database } from '../../src/storage/database/db.js';
import { hostAddress, WritableHost } from '../../src/storage/database/pgHosts.js';
import { waitForPostgres } from '../../src/storage/database/startWait.js';
import { closeSql, configProblems, describeWithServices, testServices, throwawayDatabase, type ThrowawayDatabase } from '../helpers/gateway.js';
import { hasPostgresBinaries, startOwnPostgres, type OwnPostgres } from '../helpers/ownPostgres.js';
import { refusedPort } from '../helpers/ports.js';

const storage = (url: string) => `storage:\n  postgres: "${url}"\n`;

describe('storage.postgres with several hosts', () => {
  it('is read as one URL per host, target_session_attrs taken out and the rest kept', () => {
    expect(postgresHosts('postgres://gw:s%40cret@10.0.0.1:5432,10.0.0.2:6432,[::1]:5433/app?sslmode=disable&target_session_attrs=read-write&application_name=x')).toEqual({
      urls: [
        'postgres://gw:s%40cret@10.0.0.1:5432/app?sslmode=disable&application_name=x',
        'postgres://gw:s%40cret@10.0.0.2:6432/app?sslmode=disable&application_name=x',
        'postgres://gw:s%40cret@[::1]:5433/app?sslmode=disable&application_name=x',
      ],
      target: 'read-write',
    });
    expect(postgresHosts('postgres://gw@db/app')).toEqual({ urls: ['postgres://gw@db/app'], target: undefined });
    expect(postgresHosts('/var/run/postgresql')).toBeUndefined();
  });

  it('is refused by gateway check without target_session_attrs=read-write (or primary), and with any other value', () => {
    expect(configProblems(storage('postgres://gw@h1:5432,h2:5432/app?target_session_attrs=read-write'))).toEqual([]);
    expect(configProblems(storage('postgres://gw@h1:5432,h2:5432/app?target_session_attrs=primary'))).toEqual([]);
    expect(configProblems(storage('postgres://gw@h1:5432/app?target_session_attrs=read-write'))).toEqual([]);
    expect(configProblems(storage('postgres://gw@h1:5432,h2:5432/app'))).toEqual([
      'storage.postgres: 2 hosts need target_session_attrs=read-write (or primary): without it a connection may go to a standby that refuses every write',
    ]);
    for (const target of ['any', 'read-only', 'standby', 'prefer-standby']) {
      expect(configProblems(`storage:\n  postgresDirect: "postgres://gw@h1,h2/app?target_session_attrs=${target}"\n`)).toEqual([
        `storage.postgresDirect: target_session_attrs=${target} is not supported: the gateway writes, or reads its own writes, on every connection; use target_session_attrs=read-write (or primary)`,
      ]);
    }
  });

  it('checks each connection only with several hosts and target_session_attrs (a URL gateway check takes); any other is passed whole', () => {
    const hosts = (url: string) => { const h = new WritableHost(url); return { urls: h.urls, several: h.several }; };
    expect(hosts('postgres://gw@h1:5432,h2:5432/app?target_session_attrs=read-write'))
      .toEqual({ urls: ['postgres://gw@h1:5432/app', 'postgres://gw@h2:5432/app'], several: true });
    expect(hosts('postgres://gw@h1:5432/app?target_session_attrs=read-write')).toEqual({ urls: ['postgres://gw@h1:5432/app'], several: false });
    expect(hosts('postgres://gw@h1:5432/app')).toEqual({ urls: ['postgres://gw@h1:5432/app'], several: false });
    expect(hosts('postgres://gw@h1:5432,h2:5432/app')).toEqual({ urls: ['postgres://gw@h1:5432,h2:5432/app'], several: false });
    expect(hosts('/var/run/postgresql')).toEqual({ urls: ['/var/run/postgresql'], several: false });
  });

  it('names a host in logs and errors by host and port, never its user or password', () => {
    expect(hostAddress('postgres://gw:s%40cret@10.0.0.1:5432/app?sslmode=disable')).toBe('10.0.0.1:5432');
    expect(hostAddress('postgresql://db.internal/app')).toBe('db.internal');
    expect(hostAddress('postgres://[::1]:5433')).toBe('[::1]:5433');
    expect(hostAddress('postgres:///app?host=/var/run/postgresql')).toBe('the default host');
    expect(hostAddress('/var/run/postgresql')).toBe('the default host');
  });

  it('takes storage.queryTimeout as a duration, 5s by default', () => {
    expect(configProblems('storage:\n  queryTimeout: 5\n')).toEqual([
      'storage.queryTimeout: expected a duration such as 500ms, 30s, 15m or 30d (a number needs its unit: 30s, not 30)',
    ]);
  });
});

describeWithServices('a Database on several hosts', () => {
  let db: Database | undefined;
  afterAll(async () => {
    await db?.close();
  });

  it('connects to the first host that answers and takes writes, the pool and the LISTEN connection alike', async () => {
    const url = new URL(testServices!.postgres);
    const down = `127.0.0.1:${await refusedPort()}`;
    const several = `${url.protocol}//${url.username}${url.password ? `:${url.password}` : ''}@${down},${url.host}${url.pathname}?target_session_attrs=read-write`;
    await waitForPostgres(several, 3000, { warn: () => {} });
    db = postgresDatabase(several, { poolSize: 2 });
    expect(await db.query<{ ro: string }>("SELECT current_setting('transaction_read_only') AS ro")).toEqual([{ ro: 'off' }]);
    expect(await db.transaction((tx) => tx.query<{ n: number }>('SELECT 1 AS n'))).toEqual([{ n: 1 }]);
    const heard: string[] = [];
    let live = false;
    const stop = await db.listen(['gw_test_hosts'], (_channel, payload) => heard.push(payload), (state) => { live = state; });
    try {
      await expect.poll(() => live).toBe(true);
      await db.query("SELECT pg_notify('gw_test_hosts', 'hello')");
      await expect.poll(() => heard).toEqual(['hello']);
    } finally {
      await stop();
    }
  });

  it('answers 503 (storage unavailable) when no host takes writes, within the connect bound', async () => {
    const down = `127.0.0.1:${await refusedPort()}`;
    const none = postgresDatabase(`postgres://gw@${down},${down}/app?target_session_attrs=read-write`, { poolSize: 1 });
    try {
      const started = Date.now();
      await expect(none.query('SELECT 1')).rejects.toMatchObject({ name: 'StorageUnavailableError' });
      expect(Date.now() - started).toBeLessThan(2500);
    } finally {
      await none.close();
    }
  });
});

// The shared server must never be made read-only: a server of the test's own is the host that gets
// demoted, the shared one the host that takes over (the failover itself, pg_auto_failover's:
// test/failover/postgresFailover.test.ts, in the system tier).
// Under REQUIRE_SERVICES=1 (CI) a machine without Postgres' binaries fails here rather than skipping.
const describeWithOwnServer = (hasPostgresBinaries || process.env.REQUIRE_SERVICES === '1') && testServices ? describe : describe.skip;

describeWithOwnServer('a Database on several hosts when one stops taking writes', () => {
  let own: OwnPostgres;
  let shared: ThrowawayDatabase;
  let several: string;
  const dbs: Database[] = [];
  const open = (url: string, poolSize: number) => {
    const db = postgresDatabase(url, { poolSize });
    dbs.push(db);
    return db;
  };
  const port = async (db: Database) => (await db.query<{ port: number }>('SELECT inet_server_port() AS port'))[0]!.port;
  /** The connections open to the own server's copy of the test's database. */
  const clients = async () => (await own.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = '${new URL(shared.url).pathname.slice(1)}' AND backend_type = 'client backend'`))[0]!.n;
  const readOnly = async (on: boolean) => {
    await own.query(`ALTER SYSTEM SET default_transaction_read_only = ${on ? 'on' : 'off'}`);
    await own.query('SELECT pg_reload_conf()');
    // pg_reload_conf() only signals the postmaster: once a new connection sees the setting, the
    // postmaster has read it and signalled every backend, the pool's included.
    await expect.poll(async () => (await own.query<{ ro: string }>("SELECT current_setting('default_transaction_read_only') AS ro"))[0]!.ro).toBe(on ? 'on' : 'off');
  };

  beforeAll(async () => {
    [own, shared] = await Promise.all([startOwnPostgres(), throwawayDatabase()]);
    const url = new URL(shared.url);
    await own.query(`CREATE DATABASE "${url.pathname.slice(1)}"`);
    several = `postgres://root@127.0.0.1:${own.port},${url.host}${url.pathname}?target_session_attrs=read-write`;
  });
  afterEach(async () => {
    await Promise.all(dbs.splice(0).map((db) => db.close()));
    await readOnly(false);
  });
  afterAll(async () => {
    await own?.stop();
    await shared?.drop();
    await closeSql();
  });

  it('a primary demoted under it: the write that meets it is 503, the next statement goes to the next host and writes there', async () => {
    const db = open(several, 1);
    expect(await port(db)).toBe(own.port);
    await readOnly(true);
    await expect(db.query('CREATE TABLE demoted_probe (x int)')).rejects.toMatchObject({ name: 'StorageUnavailableError', message: expect.stringMatching(/read-only transaction/) });
    expect(await port(db)).toBe(Number(new URL(shared.url).port));
    await db.exec('CREATE TABLE demoted_probe (x int)');
    expect(await db.query('SELECT count(*)::int AS n FROM demoted_probe')).toEqual([{ n: 0 }]);
  });

  it('a new connection to the host it remembers, found read-only: 503 that once (ReadOnlyHostError), the host looked for again after', async () => {
    const db = open(several, 2);
    expect(await port(db)).toBe(own.port);
    await readOnly(true);
    // The idle connection stays checked out by a transaction: each statement below opens a new one, the first to the remembered host.
    let release!: () => void;
    const held = db.transaction(async (tx) => {
      await tx.query('SELECT 1');
      await new Promise<void>((resolve) => { release = resolve; });
    });
    await expect.poll(() => release).toBeTypeOf('function');
    try {
      await expect(db.query('SELECT 1')).rejects.toMatchObject({
        name: 'StorageUnavailableError', code: '25006', message: `storage unavailable: 127.0.0.1:${own.port} does not accept writes (a standby, or a demoted primary)`,
      });
      expect(await port(db)).toBe(Number(new URL(shared.url).port));
      // The connection found read-only is closed, not left open beside the held one.
      await expect.poll(clients).toBe(1);
    } finally {
      release();
      await held;
    }
  });

  it('a single host is used as it is, read-only or not: reads go on, a write is 503 (a proxy that follows the primary)', async () => {
    await readOnly(true);
    const single = own.url(new URL(shared.url).pathname.slice(1));
    expect(await new WritableHost(single).url()).toBe(single);
    const db = open(single, 1);
    expect(await port(db)).toBe(own.port);
    await expect(db.exec('CREATE TABLE read_only_probe (x int)')).rejects.toMatchObject({ name: 'StorageUnavailableError' });
  });

  it('remembers the host that takes writes until a connection to it is lost, and leaves no connection of its search open', async () => {
    const hosts = new WritableHost(several);
    const [ownUrl, sharedUrl] = hosts.urls;
    expect(await hosts.url()).toBe(ownUrl);
    await expect.poll(clients).toBe(0);
    await readOnly(true);
    hosts.lost(sharedUrl!); // another host's connection: the one found is kept
    expect(await hosts.url()).toBe(ownUrl);
    hosts.lost(ownUrl!);
    expect(await hosts.url()).toBe(sharedUrl);
    await expect.poll(clients).toBe(0);
  });

  it('never connects to a host that is read-only from the start, and names each host\'s reason when none takes writes', async () => {
    await readOnly(true);
    expect(await port(open(several, 1))).toBe(Number(new URL(shared.url).port));
    const down = `127.0.0.1:${await refusedPort()}`;
    const none = open(`postgres://root@${down},127.0.0.1:${own.port}/postgres?target_session_attrs=read-write`, 1);
    const err = await none.query('SELECT 1').then(() => new Error('answered'), (e: Error) => e);
    expect(err).toMatchObject({ name: 'StorageUnavailableError' });
    expect(err.message).toMatch(new RegExp(`^storage unavailable: no host of the URL accepts writes \\(${down}: connect ECONNREFUSED ${down}; 127\\.0\\.0\\.1:${own.port}: read-only\\)$`));
  });
});
