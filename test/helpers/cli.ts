// The built CLI (dist/cli.js) run as an operator runs it: its own process, an environment of the
// test's choosing (nothing of the test run's DATABASE_URL, PORT or LOG_LEVEL leaks in).
import { execFile, execFileSync } from 'node:child_process';
import { chmodSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';

export const ROOT = path.resolve(import.meta.dirname, '../..');
export const CLI = path.join(ROOT, 'dist/cli.js');

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

function newestSource(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestSource(full) : statSync(full).mtimeMs);
  }
  return newest;
}

/** `npm test` builds first; a file run alone builds when dist is missing or older than src. */
export function ensureBuilt(): void {
  let built = 0;
  try { built = statSync(CLI).mtimeMs; } catch { /* not built */ }
  if (built >= newestSource(path.join(ROOT, 'src'))) return;
  try {
    execFileSync(process.execPath, [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], { cwd: ROOT, stdio: 'pipe' });
  } catch {
    // tsc still emits when another file has a type error; the tests judge the result.
  }
  // As `npm run build` leaves it: the installed `gateway` command runs the file by its #! line.
  try { chmodSync(CLI, 0o755); } catch { /* nothing emitted: the tests that need it fail and say so */ }
}

/** Runs `gateway ARGS` with only PATH and the given environment. */
export function gateway(args: string[], { env = {}, cwd = ROOT, timeout = 30_000 }: { env?: Record<string, string>; cwd?: string; timeout?: number } = {}): Promise<CliRun> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { cwd, env: { PATH: process.env.PATH ?? '', ...env }, timeout }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

/** stdout of `gateway start` as log lines; throws on a line that is not JSON (start writes nothing else). */
export function logLines(stdout: string): Array<{ level: number; msg: string; [key: string]: unknown }> {
  return stdout.split('\n').filter((line) => line !== '').map((line) => JSON.parse(line) as { level: number; msg: string });
}
