// argon2 runs in a child process at the lowest CPU priority. On a small machine a login's
// ~20 ms of hashing otherwise competes with the proxy's event loop and its p99. The child asks
// for SCHED_IDLE (Linux, through util-linux's `chrt`): the scheduler then counts a core that
// only hashes as idle and places every waking proxy thread there at once. nice 19, the fallback
// where `chrt` is missing, still leaves the hasher a core that woken threads queue behind (the
// figures are in docs/benchmark.md). The price is paid by logins, which wait for spare
// CPU while the proxy is busy; passwords.ts bounds that wait. If the child cannot be started
// or dies, the work is done in-process instead: slower neighbours, never a failed login.
// Imported hashes (CONTRACT §27, importedHashes.ts) are checked here too: bcryptjs is plain
// JavaScript that would hold the proxy's event loop for up to 100 ms at a time, and scrypt and
// PBKDF2 are as heavy as argon2; the child runs their key derivations, the caller compares.
import { spawn, type ChildProcess } from 'node:child_process';
import { pbkdf2, scrypt } from 'node:crypto';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import argon2 from 'argon2';
import bcrypt from 'bcryptjs';

/** Salts travel in base64 (IPC carries JSON); scrypt and pbkdf2 answer the derived key in base64. */
export type KdfJob =
  | { op: 'verify'; hash: string; password: string }
  | { op: 'bcrypt'; hash: string; password: string }
  | { op: 'scrypt'; password: string; salt: string; keylen: number; params: { N: number; r: number; p: number; maxmem: number } }
  | { op: 'pbkdf2'; password: string; salt: string; iterations: number; keylen: number; digest: 'sha256' };
export type HashJob = { op: 'hash'; password: string; options: argon2.Options } | KdfJob;

const locate = createRequire(import.meta.url).resolve;
const ARGON2_URL = pathToFileURL(locate('argon2')).href;
const BCRYPT_URL = pathToFileURL(locate('bcryptjs')).href;

// The child's code, run with `node --input-type=module -e`: nothing to build or ship separately.
// Both priorities are set before argon2 starts libuv's threadpool, whose threads inherit them;
// --all-tasks covers the threads V8 has already started.
const CHILD_SOURCE = `
import os from 'node:os';
import { spawnSync } from 'node:child_process';
import { pbkdf2, scrypt } from 'node:crypto';
import { promisify } from 'node:util';
try { os.setPriority(19); } catch {}
spawnSync('chrt', ['--all-tasks', '--idle', '--pid', '0', String(process.pid)], { stdio: 'ignore', timeout: 5000 });
// The listener is in place before the first await, so no job can arrive unheard.
const loading = import(process.argv[1]);
const loadingBcrypt = import(process.argv[2]);
const derived = (key) => key.toString('base64');
async function work(job) {
  switch (job.op) {
    case 'hash': return (await loading).default.hash(job.password, job.options);
    case 'verify': return (await loading).default.verify(job.hash, job.password);
    case 'bcrypt': return (await loadingBcrypt).default.compare(job.password, job.hash);
    case 'scrypt': return derived(await promisify(scrypt)(job.password, Buffer.from(job.salt, 'base64'), job.keylen, job.params));
    case 'pbkdf2': return derived(await promisify(pbkdf2)(job.password, Buffer.from(job.salt, 'base64'), job.iterations, job.keylen, job.digest));
    default: throw new Error('unknown job');
  }
}
process.on('message', async (job) => {
  try {
    const result = await work(job);
    process.send({ id: job.id, result });
  } catch (err) {
    process.send({ id: job.id, error: String(err && err.message || err) });
  }
});
process.on('disconnect', () => process.exit(0));
`;

interface Pending {
  resolve(value: string | boolean): void;
  reject(err: Error): void;
}

const EXITED = 'password hasher exited';

/**
 * The hasher child of one gateway instance: started on first use, started again after it dies,
 * stopped by close() (Instance.close()). Two instances in one process (tests) never share one.
 */
export class HasherProcess {
  private child: ChildProcess | undefined;
  private nextId = 0;
  private readonly pending = new Map<number, Pending>();
  private closed = false;

  /** Runs the job in the child, or in-process when the child cannot be started or dies. */
  run(job: HashJob): Promise<string | boolean> {
    const c = this.hasher();
    if (!c) return inProcess(job);
    const id = this.nextId++;
    return new Promise<string | boolean>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      channel(c)?.ref();
      c.send({ id, ...job }, (err) => {
        if (!err) return;
        this.pending.delete(id);
        reject(err);
      });
    }).catch((err: Error) => (err.message === EXITED || !c.connected ? inProcess(job) : Promise.reject(err)));
  }

  /** Stops the child (jobs still waiting for it are done in-process); later jobs run in-process. */
  close(): void {
    this.closed = true;
    const c = this.child;
    this.child = undefined;
    if (c?.connected) c.disconnect();
  }

  private hasher(): ChildProcess | undefined {
    if (this.closed) return undefined;
    if (this.child?.connected) return this.child;
    try {
      const c = spawn(process.execPath, ['--input-type=module', '-e', CHILD_SOURCE, ARGON2_URL, BCRYPT_URL], {
        stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
        env: { PATH: process.env.PATH ?? '' }, // passwords pass through IPC only; the child needs no settings
      });
      c.on('message', (message: { id: number; result?: string | boolean; error?: string }) => {
        const job = this.pending.get(message.id);
        this.pending.delete(message.id);
        if (this.pending.size === 0) channel(c)?.unref();
        if (message.error !== undefined) job?.reject(new Error(message.error));
        else job?.resolve(message.result!);
      });
      const lost = () => {
        if (this.child === c) this.child = undefined;
        for (const [id, job] of this.pending) {
          this.pending.delete(id);
          job.reject(new Error(EXITED));
        }
      };
      c.on('exit', lost);
      c.on('error', lost);
      // An idle hasher must not keep the process alive; a job waiting for its answer must.
      c.unref();
      channel(c)?.unref();
      this.child = c;
      return c;
    } catch {
      return undefined;
    }
  }
}

function channel(c: ChildProcess): { ref(): void; unref(): void } | undefined {
  return c.channel as { ref(): void; unref(): void } | undefined;
}

/** The child's work done here: when the child is missing, and for checks outside an instance (tests, the CLI). */
export async function inProcess(job: HashJob): Promise<string | boolean> {
  switch (job.op) {
    case 'hash': return argon2.hash(job.password, job.options);
    case 'verify': return argon2.verify(job.hash, job.password);
    case 'bcrypt': return bcrypt.compare(job.password, job.hash);
    case 'scrypt': return derive((done) => scrypt(job.password, Buffer.from(job.salt, 'base64'), job.keylen, job.params, done));
    case 'pbkdf2': return derive((done) => pbkdf2(job.password, Buffer.from(job.salt, 'base64'), job.iterations, job.keylen, job.digest, done));
  }
}

function derive(start: (done: (err: Error | null, key: Buffer) => void) => void): Promise<string> {
  return new Promise((resolve, reject) => start((err, key) => (err ? reject(err) : resolve(key.toString('base64')))));
}
