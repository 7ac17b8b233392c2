// Podman for the container tests (CONTRACT §25): the gateway's image built from the Dockerfile
// as it is, on stand-ins of its base images (scripts/standins, tagged under the official names:
// there is no registry here). Runtime runc (crun cannot set rlimits on these machines) and the
// rlimits this process already has (runc may only lower them here), through a containers.conf of
// the run's own (CONTAINERS_CONF), which podman-compose's podman reads too. Without Podman the
// suites are skipped, saying why, unless REQUIRE_SERVICES=1 (CI), where that fails the run.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe } from 'vitest';
import { ROOT } from './cli.js';

const has = (command: string, args = ['--version']) => spawnSync(command, args, { stdio: 'ignore' }).status === 0;

/** Why the container suites cannot run here, or null. */
function missing(tools: string[]): string | null {
  const absent = tools.filter((tool) => !has(tool));
  if (absent.length) return `${absent.join(', ')} not installed (apt-get install -y ${absent.join(' ')})`;
  if (!has('podman', ['info'])) return '`podman info` fails (Podman cannot run here)';
  return null;
}

/** describe() for suites that need Podman and the given tools; skipped, saying why, without them. */
export function describeWithPodman(suite: string, tools: string[] = []): typeof describe | typeof describe.skip {
  const reason = missing(['podman', 'runc', 'debootstrap', ...tools]);
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
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'gw-podman-')), 'containers.conf');
  writeFileSync(file, [
    '[containers]',
    `default_ulimits = ["nofile=${limit('Max open files')}", "nproc=${limit('Max processes', pidMax())}"]`,
    '[engine]',
    'runtime = "runc"',
    '',
  ].join('\n'));
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

/** What the Dockerfile copies: a change to any of them is a new image. */
export const IMAGE_INPUTS = ['Dockerfile', '.dockerignore', 'package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json',
  'gateway.yaml', 'gateway.schema.json', 'src', 'migrations', 'console'];

function hashInto(hash: ReturnType<typeof createHash>, file: string): void {
  if (statSync(file).isDirectory()) {
    for (const entry of readdirSync(file).sort()) hashInto(hash, path.join(file, entry));
    return;
  }
  hash.update(path.relative(ROOT, file)).update('\0').update(readFileSync(file)).update('\0');
}

/** The tag of the image built from this tree's Dockerfile (and the base image it is built on). */
async function imageTag(): Promise<string> {
  const hash = createHash('sha256');
  for (const input of IMAGE_INPUTS) hashInto(hash, path.join(ROOT, input));
  const from = [...new Set(readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8').match(/^FROM \S+/gm) ?? [])].map((line) => line.slice(5));
  for (const image of from) hash.update(await podman('image', 'inspect', '--format', '{{.Id}}', image));
  return `localhost/auth-gateway:test-${hash.digest('hex').slice(0, 16)}`;
}

/**
 * The gateway's image, built from the Dockerfile unchanged (--pull=never: the stand-ins are the
 * base) unless an image of the same inputs exists: once per change, not once per file or per Node.
 * Docker format: the OCI one has no HEALTHCHECK.
 */
export async function gatewayImage(): Promise<{ tag: string; builtInMs: number | null }> {
  await ensureStandins();
  const tag = await imageTag();
  const started = Date.now();
  const script = `podman image exists ${tag} && exit 0; podman --runtime runc build --pull=never --format docker -t ${tag} -f Dockerfile . && echo '[image built]'`;
  const out = await mustRun('flock', [LOCK, 'bash', '-c', script]);
  return { tag, builtInMs: out.includes('[image built]') ? Date.now() - started : null };
}
