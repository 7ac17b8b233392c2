// Embedded storage is one process's (CONTRACT §18): PGlite keeps the database in memory and writes
// it to its directory, so a second process opening the same directory (a second `gateway start`,
// a CLI command that writes) works on its own copy, and its changes are lost or overwrite the
// first's. A lock file holding the holder's pid says who has it: created atomically, removed when
// the database closes or the process exits; one left by a process that died is taken over.
//
// Taking: the pid goes into a file of our own, `gateway.lock.<pid>.<nonce>`, which is then linked
// to `gateway.lock`: the lock appears with its content or not at all (EEXIST: someone holds it).
//
// Taking over: we never remove `gateway.lock` on the strength of something read earlier. We link
// it to a name of our own (a "claim": another name for whatever inode the lock is at that instant),
// read the holder from the claim, and remove `gateway.lock` only when (a) that holder is dead (or
// empty: see below), (b) stat(claim).nlink is 2, so the inode's only names are the lock and our
// claim, and then (c) `gateway.lock` is still that inode. Why no live lock is ever removed: say
// claimers Y and Z both pass (b) and (c) for inode L and Z removes the lock after Y's check (c),
// before Y's unlink. Y's claim lives from before (b) to after its unlink; Z's from before its (b)
// to after its unlink; the lock stays L until Z's unlink. At Y's (b), L had two names, the lock and
// Y's claim, so Z's claim did not exist yet; so at Z's (b) the lock, Y's claim and Z's claim all
// named L: three, not two, and Z could not pass. So one claimer at a time removes L, and only
// while it is the lock (c); the dead holder never does; takers only create (link fails while it
// exists), and a live holder's release reads its own pid first, which no claimer removes (a).
// Claimers that see more than two names drop their claim and retry after a short random pause; names
// left by dead processes (a crash between link and unlink) are removed first, which is safe as
// the dead do nothing more, and keeps a leftover from blocking the count for good.
//
// An empty lock (or one without a pid) is taken over like a dead holder's: this code never makes
// one (the lock appears with its pid), so it is what a crash left (the earlier code's, which wrote
// the pid after creating the file, or a write lost with the machine), and no process stands behind it.
import { randomBytes } from 'node:crypto';
import { linkSync, readdirSync, readFileSync, statSync, unlinkSync, writeFileSync, type Stats } from 'node:fs';
import path from 'node:path';

export const LOCK_FILE = 'gateway.lock';
/** Claims and files being linked: `gateway.lock.<pid>.<nonce>`. */
const OWN_NAME = /^gateway\.lock\.(\d+)\.[0-9a-f]+$/;
/** How long a contended takeover is retried before giving up (normally it settles within milliseconds). */
const TAKEOVER_MS = 5000;

export class StorageLockedError extends Error {
  constructor(readonly dir: string, readonly pid: number) {
    super(`embedded storage ${dir} is in use by process ${pid}: one process holds it at a time (stop that one; while it runs, users commands act through it with --admin URL)`);
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
  removeLeftovers(path.dirname(file));
  const mine = ownName(file);
  writeFileSync(mine, `${process.pid}\n`, { flag: 'wx' });
  let holder: number | undefined;
  const deadline = Date.now() + TAKEOVER_MS;
  try {
    for (let attempt = 0; attempt === 0 || Date.now() < deadline; attempt++) {
      try {
        linkSync(mine, file);
        return;
      } catch (err) {
        if (code(err) !== 'EEXIST') throw err;
      }
      const claim = ownName(file);
      try {
        linkSync(file, claim);
      } catch (err) {
        if (code(err) === 'ENOENT') continue; // let go of meanwhile: take it
        throw err;
      }
      let removed = false;
      try {
        holder = holderOf(claim);
        if (holder !== undefined && holder !== process.pid && isAlive(holder)) throw new StorageLockedError(dir, holder);
        // Dead, empty, or our own pid from an earlier life (a container's pid 1): stale.
        const ours = statSync(claim);
        const lock = statOrNothing(file);
        if (ours.nlink === 2 && lock !== undefined && lock.ino === ours.ino && lock.dev === ours.dev) {
          unlinkSync(file);
          removed = true;
        }
      } finally {
        unlinkQuietly(claim);
      }
      // Another claimer at work (or the lock changed): step back, claim dropped, then look again.
      if (!removed) pause(attempt);
    }
    throw new StorageLockedError(dir, holder ?? 0);
  } finally {
    unlinkQuietly(mine);
  }
}

function ownName(file: string): string {
  return `${file}.${process.pid}.${randomBytes(6).toString('hex')}`;
}

/** Claims and half-taken locks of processes that died; our pid's are an earlier life's (we hold none here yet). */
function removeLeftovers(dir: string): void {
  for (const name of readdirSync(dir)) {
    const pid = OWN_NAME.exec(name)?.[1];
    if (pid !== undefined && (Number(pid) === process.pid || !isAlive(Number(pid)))) unlinkQuietly(path.join(dir, name));
  }
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
    return code(err) === 'EPERM';
  }
}

function statOrNothing(file: string): Stats | undefined {
  try {
    return statSync(file);
  } catch (err) {
    if (code(err) === 'ENOENT') return undefined;
    throw err;
  }
}

/** A random few milliseconds, longer as attempts fail, synchronously (taking the lock is, and it is contended only at a takeover). */
function pause(attempt: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, Math.random() * Math.min(2 + attempt, 20));
}

function code(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException).code;
}

function unlinkQuietly(file: string): void {
  try {
    unlinkSync(file);
  } catch {
    // already gone
  }
}

// The lock is ours only while it holds our pid; no claimer removes a live holder's (see above).
function removeIfOurs(file: string): void {
  if (holderOf(file) !== process.pid) return;
  unlinkQuietly(file);
}

// A process that exits without closing its database (a crash, process.exit) lets go of its directories.
process.once('exit', () => {
  for (const file of held.keys()) removeIfOurs(file);
});
