// A reader's terminals, for the docs walks that run a page's shell blocks as written
// (test/docs/billingFake.system.test.ts): one bash that keeps what earlier blocks set (variables,
// functions) between blocks, as one terminal does, and servers run in the background as in
// terminals of their own. Every process is a group of its own, ended by its id.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';

/** A terminal: bash, with what the reader's earlier commands set (variables) kept between blocks. */
export class Terminal {
  private out = '';
  private err = '';
  readonly child: ChildProcess;
  constructor(cwd: string, env: NodeJS.ProcessEnv) {
    this.child = spawn('bash', ['--norc', '--noprofile'], { cwd, env, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    this.child.stdout!.on('data', (c: Buffer) => { this.out += c.toString(); });
    this.child.stderr!.on('data', (c: Buffer) => { this.err += c.toString(); });
    this.child.stdin!.write('set -o pipefail\n');
  }

  /** Runs a block; its output and the status of its last command once it is done. */
  async run(block: string, timeoutMs = 60_000): Promise<{ code: number; stdout: string; stderr: string }> {
    const marker = `__done_${randomBytes(6).toString('hex')}__`;
    const [from, fromErr] = [this.out.length, this.err.length];
    this.child.stdin!.write(`${block}\necho "${marker} $?"\n`);
    const deadline = Date.now() + timeoutMs;
    while (!this.out.includes(marker, from)) {
      if (Date.now() > deadline) throw new Error(`block did not finish:\n${block}\n${this.out.slice(from)}\n${this.err.slice(fromErr)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const at = this.out.indexOf(marker, from);
    return { code: Number(/ (\d+)/.exec(this.out.slice(at))![1]), stdout: this.out.slice(from, at), stderr: this.err.slice(fromErr) };
  }

  /** Runs a block that does not end (a server), in the background of its own terminal. */
  static background(block: string, cwd: string, env: NodeJS.ProcessEnv): { child: ChildProcess; output: () => string } {
    const child = spawn('bash', ['-e', '-c', block], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let output = '';
    child.stdout!.on('data', (c: Buffer) => { output += c.toString(); });
    child.stderr!.on('data', (c: Buffer) => { output += c.toString(); });
    return { child, output: () => output };
  }
}

/** Ends a process group this test started, and waits for it. */
export async function stop(child: ChildProcess | undefined): Promise<void> {
  if (!child?.pid || child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  try { process.kill(-child.pid, 'SIGTERM'); } catch { /* gone already */ }
  await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
  try { process.kill(-child.pid, 'SIGKILL'); } catch { /* gone */ }
}

/** A line of output as a page shows it (`…` standing for anything), matched whole. */
export function shownLine(shown: string): RegExp {
  return new RegExp(`^${shown.split('…').map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('.*?')}$`);
}
