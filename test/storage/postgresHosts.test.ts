// libpq's multi-host URL (CONTRACT §32) without a failover cluster: what `gateway check` refuses,
// how the URL is read, and a Database whose first host is down going to the next one that takes
// writes (the failover itself: test/failover/postgresFailover.test.ts).
import { afterAll, describe, expect, it } from 'vitest';
import { postgresHosts } from '../../src/config/schema.js';
import { postgresDatabase, type Database } from '../../src/storage/database/db.js';
import { waitForPostgres } from '../../src/storage/database/startWait.js';
import { configProblems, describeWithServices, testServices } from '../helpers/gateway.js';
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
