// argon2 runs in a child process at the lowest CPU priority. On a small machine a login's
// ~20 ms of hashing otherwise competes with the proxy's event loop and its p99. The child asks
// for SCHED_IDLE (Linux, through util-linux's `chrt`): the scheduler then counts a core that
// only hashes as idle and places every waking proxy thread there at once. nice 19, the fallback
// where `chrt` is missing, still leaves the hasher a core that woken threads queue behind (the
// figures are in docs/benchmark.md). The price is paid by logins, which wait for spare
// CPU while the proxy is busy; passwords.ts bounds that wait. If the child cannot be started
// or dies, the work is done in-process instead: slower neighbours, never a failed login.
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import argon2 from 'argon2';

export type HashJob = { op: 'hash'; password: string; options: argon2.Options } | { op: 'verify'; hash: string; password: string };

const ARGON2_URL = pathToFileURL(createRequire(import.meta.url).resolve('argon2')).href;

// The child's code, run with `node --input-type=module -e`: nothing to build or ship separately.
// Both priorities are set before argon2 starts libuv's threadpool, whose threads inherit them;
// --all-tasks covers the threads V8 has already started.
const CHILD_SOURCE = `
import os from 'node:os';
import { spawnSync } from 'node:child_process';
try { os.setPriority(19); } catch {}
spawnSync('chrt', ['--all-tasks', '--idle', '--pid', '0', String(process.pid)], { stdio: 'ignore', timeout: 5000 });
// The listener is in place before the first await, so no job can arrive unheard.
const loading = import(process.argv[1]);
process.on('message', async (job) => {
  try {
    const { default: argon2 } = await loading;
    const result = job.op === 'hash' ? await argon2.hash(job.password, job.options) : await argon2.verify(job.hash, job.password);
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

let child: ChildProcess | undefined;
let nextId = 0;
const pending = new Map<number, Pending>();

function hasher(): ChildProcess | undefined {
  if (child?.connected) return child;
  try {
    const c = spawn(process.execPath, ['--input-type=module', '-e', CHILD_SOURCE, ARGON2_URL], {
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      env: { PATH: process.env.PATH ?? '' }, // passwords pass through IPC only; the child needs no settings
    });
    c.on('message', (message: { id: number; result?: string | boolean; error?: string }) => {
      const job = pending.get(message.id);
      pending.delete(message.id);
      if (pending.size === 0) channel(c)?.unref();
      if (message.error !== undefined) job?.reject(new Error(message.error));
      else job?.resolve(message.result!);
    });
    const lost = () => {
      if (child === c) child = undefined;
      for (const [id, job] of pending) {
        pending.delete(id);
        job.reject(new Error('password hasher exited'));
      }
    };
    c.on('exit', lost);
    c.on('error', lost);
    // An idle hasher must not keep the process alive; a job waiting for its answer must.
    c.unref();
    channel(c)?.unref();
    child = c;
    return c;
  } catch {
    return undefined;
  }
}

function channel(c: ChildProcess): { ref(): void; unref(): void } | undefined {
  return c.channel as { ref(): void; unref(): void } | undefined;
}

function inProcess(job: HashJob): Promise<string | boolean> {
  return job.op === 'hash' ? argon2.hash(job.password, job.options) : argon2.verify(job.hash, job.password);
}

export function runHashJob(job: HashJob): Promise<string | boolean> {
  const c = hasher();
  if (!c) return inProcess(job);
  const id = nextId++;
  return new Promise<string | boolean>((resolve, reject) => {
    pending.set(id, { resolve, reject });
    channel(c)?.ref();
    c.send({ id, ...job }, (err) => {
      if (!err) return;
      pending.delete(id);
      reject(err);
    });
  }).catch((err: Error) => (err.message === 'password hasher exited' || !c.connected ? inProcess(job) : Promise.reject(err)));
}
