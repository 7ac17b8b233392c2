// A Postgres server of the test's own (Debian's binaries, the shared server's version), on a spare
// loopback port, in a temporary directory, run as the `postgres` user (initdb and postgres refuse
// root): for what the shared server must never be made, such as read-only (CONTRACT §32's
// demoted primary). initdb takes about a second here; nothing is synced to disk.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { sparePort } from './ports.js';

const versions = existsSync('/usr/lib/postgresql') ? readdirSync('/usr/lib/postgresql').sort() : [];
const PG_BIN = `/usr/lib/postgresql/${versions.at(-1) ?? '15'}/bin`;
export const hasPostgresBinaries = existsSync(`${PG_BIN}/initdb`);

export interface OwnPostgres {
  port: number;
  /** A URL to `database` as the superuser `root`, trusted on loopback. */
  url(database: string): string;
  /** A statement as `root` on database `postgres`, on a connection of its own: its rows. */
  query<T = Record<string, unknown>>(sql: string): Promise<T[]>;
  stop(): Promise<void>;
}

export async function startOwnPostgres(): Promise<OwnPostgres> {
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  const user = { uid: id('-u'), gid: id('-g') };
  const dir = mkdtempSync(path.join(tmpdir(), 'gw-ownpg-'));
  chownSync(dir, user.uid, user.gid);
  const data = path.join(dir, 'data');
  execFileSync(`${PG_BIN}/initdb`, ['-D', data, '-U', 'root', '-A', 'trust', '--no-sync', '-E', 'UTF8'], { ...user, stdio: 'ignore' });
  const port = await sparePort();
  const server: ChildProcess = spawn(`${PG_BIN}/postgres`, ['-D', data, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off'], {
    ...user, stdio: 'ignore',
  });
  const url = (database: string) => `postgres://root@127.0.0.1:${port}/${database}`;
  const query = async <T>(sql: string): Promise<T[]> => {
    const client = new pg.Client({ connectionString: url('postgres'), connectionTimeoutMillis: 1000 });
    client.on('error', () => {});
    try {
      await client.connect();
      return (await client.query(sql)).rows as T[];
    } finally {
      await client.end().catch(() => {});
    }
  };
  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      await query('SELECT 1');
      break;
    } catch (err) {
      if (Date.now() > deadline || server.exitCode !== null) throw new Error(`own Postgres on ${port} did not start: ${(err as Error).message}`, { cause: err });
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  const stop = async () => {
    if (server.exitCode === null && server.signalCode === null) {
      const exited = new Promise((resolve) => server.once('exit', resolve));
      server.kill('SIGQUIT'); // immediate shutdown: nothing here is worth a checkpoint
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  return { port, url, query, stop };
}
