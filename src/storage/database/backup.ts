// Backups of embedded storage (CONTRACT §25): `gateway backup --out FILE` writes the PGlite data
// directory as one gzipped tarball, `gateway restore FILE` makes a data directory from one. Both
// hold the directory's lock (dirLock.ts): with the gateway running, they refuse rather than copy a
// database another process is writing. On Postgres, pg_dump and pg_restore do this (docs/operating.md).
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdir, mkdtemp, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { holdDirectory, LOCK_FILE } from './dirLock.js';

/** What a data directory holds besides its lock: empty means there is nothing to lose. */
function contents(dir: string): string[] {
  return existsSync(dir) ? readdirSync(dir).filter((name) => name !== LOCK_FILE && !name.startsWith(`${LOCK_FILE}.`)) : [];
}

/** Writes the embedded database of `dir` to `out`; the byte size written. */
export async function backupEmbedded(dir: string, out: string): Promise<number> {
  if (!contents(dir).length) throw new Error(`${dir} holds no database: nothing to back up (storage.embeddedDir)`);
  const { PGlite } = await import('@electric-sql/pglite');
  const release = holdDirectory(dir);
  try {
    const db = await PGlite.create(dir);
    try {
      const dump = await db.dumpDataDir('gzip');
      const bytes = Buffer.from(await dump.arrayBuffer());
      // Written whole, then renamed: a backup file is complete or absent.
      writeFileSync(`${out}.partial`, bytes);
      await rename(`${out}.partial`, out);
      return bytes.length;
    } finally {
      await db.close();
    }
  } finally {
    release();
  }
}

/**
 * Makes the data directory `dir` from the backup `file`. `dir` must be empty or absent: a restore
 * never overwrites a database (move it away first), and a failed restore leaves nothing behind.
 */
export async function restoreEmbedded(file: string, dir: string): Promise<void> {
  const found = contents(dir);
  if (found.length) throw new Error(`${dir} already holds a database (${found.slice(0, 3).join(', ')}…): move it away or point storage.embeddedDir elsewhere, then restore`);
  const blob = new Blob([readFileSync(file)]);
  const { PGlite } = await import('@electric-sql/pglite');
  await mkdir(dir, { recursive: true });
  // The target is held for the whole restore (no gateway starts on half a database); the files are
  // made beside it, then moved in. A backup holds the lock file of the process that wrote it: dropped.
  const release = holdDirectory(dir);
  const staging = await mkdtemp(path.join(path.dirname(path.resolve(dir)), '.gateway-restore-'));
  try {
    try {
      const db = await PGlite.create(staging, { loadDataDir: blob });
      // A file that is not a backup fails here, not at the next start.
      await db.query('SELECT count(*) FROM users');
      await db.close();
    } catch (err) {
      throw new Error(`${file} is not a backup this gateway can restore: ${(err as Error).message}`, { cause: err });
    }
    for (const name of contents(staging)) await rename(path.join(staging, name), path.join(dir, name));
  } finally {
    await rm(staging, { recursive: true, force: true });
    release();
  }
}
