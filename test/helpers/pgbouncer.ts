// A PgBouncer of the test's own, in transaction mode, in front of the run's database: the pooler
// operators put between their gateways and Postgres (docs/production.md). It runs the docs'
// example pgbouncer.ini made local (bench/pgbouncerIni.mjs, which the bench runs too).
// PgBouncer refuses to run as root: it runs as the postgres user, in a directory it may write.
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { inject } from 'vitest';
import { localPgBouncerIni } from '../../bench/pgbouncerIni.mjs';
import { eventually, testServices } from './gateway.js';
import { sparePort } from './ports.js';

export interface PgBouncer {
  /** The run's database, through PgBouncer. */
  url: string;
  stop(): Promise<void>;
}

export async function startPgBouncer(): Promise<PgBouncer> {
  const port = await sparePort();
  const dir = mkdtempSync(path.join(tmpdir(), 'gw-pgbouncer-'));
  chmodSync(dir, 0o777);
  const ini = localPgBouncerIni(testServices!.postgres, port, dir);
  const file = path.join(dir, 'pgbouncer.ini');
  writeFileSync(file, ini);
  chmodSync(file, 0o644);
  const child: ChildProcess = spawn(inject('proxies').pgbouncer!, ['-u', 'postgres', file], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => { stderr += c.toString(); });
  try {
    await eventually(() => new Promise<boolean>((resolve) => {
      if (child.exitCode !== null) throw new Error(`pgbouncer exited: ${stderr}`);
      const socket = net.connect(port, '127.0.0.1');
      socket.once('connect', () => { socket.destroy(); resolve(true); });
      socket.once('error', () => resolve(false));
    }), 10_000, 50);
  } catch (err) {
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const url = new URL(testServices!.postgres);
  url.port = String(port);
  return {
    url: url.toString(),
    async stop() {
      if (child.exitCode === null) {
        const gone = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGINT');
        await gone;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
