// Embedded storage is one process's (CONTRACT §18): PGlite keeps the database in memory and writes
// it to its directory, so a second process opening the same directory (a second `gateway start`,
// a CLI command that writes) works on its own copy, and its changes are lost or overwrite the
// first's. A lock file holding the holder's pid says who has it: created atomically, removed when
// the database closes or the process exits; one left by a process that died is taken over.
import { closeSync, openSync, readFileSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import path from 'node:path';

export const LOCK_FILE = 'gateway.lock';

export class StorageLockedError extends Error {
  constructor(readonly dir: string, readonly pid: number) {
    super(`embedded storage ${dir} is in use by process ${pid}: one process holds it at a time (stop that one; with a gateway running, users and keys commands take --admin URL)`);
    this.name = 'StorageLockedError';
  }
}

// In this process: how many databases are open on each directory it holds (tests open one twice).
const held = new Map<string, number>();

/** Takes the directory for this process, or throws StorageLockedError; returns the release. */
export function holdDirectory(dir: string): () => void {
  const file = path.join(path.resolve(dir), LOCK_FILE);
  const count = held.get(file);
  if (count === undefined) take(file, dir);
  held.set(file, (count ?? 0) + 1);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    const left = (held.get(file) ?? 1) - 1;
    if (left > 0) return void held.set(file, left);
    held.delete(file);
    removeIfOurs(file);
  };
}

function take(file: string, dir: string): void {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(file, 'wx');
      try {
        writeSync(fd, `${process.pid}\n`);
      } finally {
        closeSync(fd);
      }
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const holder = holderOf(file);
    if (holder !== undefined && holder !== process.pid && isAlive(holder)) throw new StorageLockedError(dir, holder);
    // Stale (its process is gone), or unreadable: moved aside by rename, which only one taker wins.
    try {
      renameSync(file, `${file}.stale-${process.pid}`);
      unlinkSync(`${file}.stale-${process.pid}`);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }
  const holder = holderOf(file);
  throw new StorageLockedError(dir, holder ?? 0);
}

function holderOf(file: string): number | undefined {
  try {
    const pid = Number.parseInt(readFileSync(file, 'utf8'), 10);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, under another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function removeIfOurs(file: string): void {
  if (holderOf(file) !== process.pid) return;
  try {
    unlinkSync(file);
  } catch {
    // already gone
  }
}

// A process that exits without closing its database (a crash, process.exit) lets go of its directories.
process.once('exit', () => {
  for (const file of held.keys()) removeIfOurs(file);
});
