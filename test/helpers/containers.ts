// Podman for the container tests (CONTRACT §25): the gateway's image built from the Dockerfile
// as it is, on stand-ins of its base images (scripts/standins, tagged under the official names:
// there is no registry here). Runtime runc (crun cannot set rlimits on these machines) and the
// rlimits this process already has (runc may only lower them here), through a containers.conf of
// those limits (CONTAINERS_CONF), which podman-compose's podman reads too. Without Podman the
// suites are skipped, saying why, unless REQUIRE_SERVICES=1 (CI), where that fails the run.
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe } from 'vitest';
import { sha256Hex } from '../../src/credentials/digest.js';
import { ROOT } from './cli.js';

// debootstrap is in /usr/sbin, off some PATHs (the stand-in builders add it).
const has = (command: string, args = ['--version']) =>
  spawnSync(command, args, { stdio: 'ignore', env: { ...process.env, PATH: `${process.env.PATH ?? ''}:/usr/sbin:/sbin` } }).status === 0;

/** Why the container suites cannot run here, or null. */
function missing(tools: string[]): string | null {
  const absent = tools.filter((tool) => !has(tool));
  if (absent.length) return `${absent.join(', ')} not installed (apt-get install -y ${absent.join(' ')})`;
  if (!has('podman', ['info'])) return '`podman info` fails (Podman cannot run here)';
  return null;
}

/** describe() for suites that need Podman and the given tools; skipped, saying why, without them. */
export function describeWithPodman(suite: string, tools: string[] = []): typeof describe | typeof describe.skip {
  const reason = process.getuid?.() === 0 ? missing(['podman', 'runc', 'debootstrap', ...tools])
    : 'not root (the stand-in images are built with debootstrap and chroot; Podman runs as root here)';
  if (!reason) return describe;
  if (process.env.REQUIRE_SERVICES === '1') throw new Error(`REQUIRE_SERVICES=1 but ${reason}: ${suite} cannot run (.ci/run installs them)`);
  console.warn(`\n[tests] ${reason}: ${suite} skipped\n`);
  return describe.skip;
}

/**
 * This process's soft:hard limit from /proc/self/limits, at most `cap` (a container may have it,
 * not more: runc cannot raise a limit here).
 */
function limit(name: string, cap = Infinity): string {
  const line = readFileSync('/proc/self/limits', 'utf8').split('\n').find((l) => l.startsWith(name));
  const [soft, hard] = (line ?? '').slice(name.length).trim().split(/\s+/).map((v) => Math.min(v === 'unlimited' ? Infinity : Number(v), cap));
  return `${soft}:${hard}`;
}

// Podman lowers its own process limit to kernel.pid_max before it starts runc.
const pidMax = () => Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8'));

let env: NodeJS.ProcessEnv | undefined;
/** The environment podman and podman-compose run with (CONTAINERS_CONF: runc, this process's rlimits). */
export function podmanEnv(): NodeJS.ProcessEnv {
  if (env) return env;
  const conf = [
    '[containers]',
    `default_ulimits = ["nofile=${limit('Max open files')}", "nproc=${limit('Max processes', pidMax())}"]`,
    '[engine]',
    'runtime = "runc"',
    '',
  ].join('\n');
  // Named by its content, one file for every process with the same limits: a directory of each
  // process's own was left in /tmp by every test file that ran podman. Written whole, then renamed:
  // a podman of another file never reads it half-written.
  const file = path.join(tmpdir(), `auth-gateway-containers-${sha256Hex(conf).slice(0, 16)}.conf`);
  const partial = `${file}.${process.pid}`;
  writeFileSync(partial, conf);
  renameSync(partial, file);
  env = { ...process.env, CONTAINERS_CONF: file };
  return env;
}

export interface Run { status: number; stdout: string; stderr: string }

/** Runs a command (podman, podman-compose, flock…) with podmanEnv(); resolves when it exits, never rejects. */
export function run(command: string, args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd: options.cwd ?? ROOT, env: { ...podmanEnv(), ...options.env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString(); });
    child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString(); });
    child.on('error', (err) => resolve({ status: -1, stdout, stderr: stderr + err.message }));
    child.on('close', (status) => resolve({ status: status ?? -1, stdout, stderr }));
  });
}

/** run(), throwing with its output when it fails. */
export async function mustRun(command: string, args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<string> {
  const result = await run(command, args, options);
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} exited ${result.status}:\n${result.stdout.slice(-2000)}\n${result.stderr.slice(-4000)}`);
  return result.stdout;
}

export const podman = (...args: string[]) => mustRun('podman', ['--runtime', 'runc', ...args]);

// One lock for the machine: two files (or two worktrees) building the same image wait for each other.
const LOCK = path.join(tmpdir(), 'auth-gateway-containers.lock');

/** The stand-in base images (scripts/standins/all.sh: a second call imports nothing). */
export async function ensureStandins(): Promise<void> {
  await mustRun('flock', [LOCK, 'bash', path.join(ROOT, 'scripts/standins/all.sh')]);
}

/** What the Dockerfile copies (scripts/container-image.sh hashes the same): what a copy of the repository needs to build the image. */
export const IMAGE_INPUTS = ['Dockerfile', '.dockerignore', 'package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json',
  'gateway.yaml', 'gateway.schema.json', 'src', 'migrations', 'console'];

/**
 * The gateway's image (scripts/container-image.sh: the Dockerfile unchanged, on the stand-ins),
 * built unless an image of the same inputs exists: once per change, not once per file or per Node.
 */
export async function gatewayImage(): Promise<{ tag: string; built: string | null }> {
  await ensureStandins();
  const result = await run('bash', [path.join(ROOT, 'scripts/container-image.sh')]);
  if (result.status !== 0) throw new Error(`scripts/container-image.sh exited ${result.status}:\n${result.stderr.slice(-4000)}`);
  return { tag: result.stdout.trim(), built: /\[image\] (built .*)/.exec(result.stderr)?.[1] ?? null };
}
