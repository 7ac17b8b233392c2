// The gateway as an operator runs it: the built CLI, `node dist/cli.js start --config FILE`, as a
// child process whose JSON log lines the test reads, and to which it sends signals (SIGHUP,
// SIGTERM). For operating tests: reload, shutdown, start-up.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { eventually } from './gateway.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const CLI = path.join(ROOT, 'dist/cli.js');

export interface LogLine {
  level: number;
  msg: string;
  [key: string]: unknown;
}

export interface GatewayProcess {
  url: string;
  adminUrl?: string;
  child: ChildProcess;
  logs: LogLine[];
  configFile: string;
  /** Rewrites the config file (a raw string is written as is, so it can be invalid). */
  writeConfig(config: Record<string, unknown> | string): void;
  waitForLog(match: (line: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stop(): Promise<void>;
}

/**
 * Starts the CLI on `config` (see rawTestConfig; a string is written as is), written as the config
 * file. `onListening` runs the moment the "listening" line is read, as an operator's script would
 * act on it; `onLog` runs on every line as it is read, start-up's included. `env` is added to the
 * environment (for a file's ${VAR} references; PORT and HOST apply only when given here). `cli` is
 * another build's CLI (the previous release's, for the upgrade tests); `startTimeoutMs` how long
 * to wait for its "gateway listening" line (30 s).
 */
export async function spawnGateway(
  config: Record<string, unknown> | string,
  options: { onListening?: (child: ChildProcess) => void; onLog?: (line: LogLine) => void; asInstalled?: boolean; env?: Record<string, string>; cli?: string; startTimeoutMs?: number } = {},
): Promise<GatewayProcess> {
  const cli = options.cli ?? CLI;
  if (!existsSync(cli)) throw new Error(`${cli} is missing: run \`npm run build\` first (npm test does)`);
  const dir = mkdtempSync(path.join(tmpdir(), 'gw-ops-'));
  const configFile = path.join(dir, 'gateway.yaml');
  // JSON is YAML: the file is written exactly as the object says.
  const writeConfig = (c: Record<string, unknown> | string) => writeFileSync(configFile, typeof c === 'string' ? c : JSON.stringify(c, null, 2));
  writeConfig(config);
  // PORT and HOST would override the file's listener settings.
  const env: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: 'info' };
  delete env.PORT;
  delete env.HOST;
  Object.assign(env, options.env);
  // asInstalled: the file run as the installed `gateway` command is, by its first line (#!), not by `node dist/cli.js`.
  const [command, args] = options.asInstalled ? [cli, ['start', '--config', configFile]] : [process.execPath, [cli, 'start', '--config', configFile]];
  const child = spawn(command, args, { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const logs: LogLine[] = [];
  const waiters = new Set<() => void>();
  let stdout = '';
  let stderr = '';
  let listening: { url: string; adminUrl?: string } | undefined;
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
    let nl: number;
    while ((nl = stdout.indexOf('\n')) >= 0) {
      const line = stdout.slice(0, nl);
      stdout = stdout.slice(nl + 1);
      // Every line is JSON: `start` writes nothing else on stdout.
      const log = JSON.parse(line) as LogLine;
      logs.push(log);
      options.onLog?.(log);
      if (log.msg === 'gateway listening') {
        listening = { url: log.url as string, adminUrl: log.admin as string | undefined };
        options.onListening?.(child);
      }
      for (const wake of waiters) wake();
    }
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => { stderr += chunk; });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => {
      rmSync(dir, { recursive: true, force: true });
      resolve({ code, signal });
    });
  });
  let gone = false;
  void exited.then(() => { gone = true; for (const wake of waiters) wake(); });

  const waitForLog = (match: (line: LogLine) => boolean, timeoutMs = 10_000) => new Promise<LogLine>((resolve, reject) => {
    const check = () => {
      const found = logs.find(match);
      if (found) { done(); resolve(found); } else if (gone) { done(); reject(new Error(`gateway exited before the expected log line; stderr: ${stderr}`)); }
    };
    const timer = setTimeout(() => { done(); reject(new Error(`log line not seen within ${timeoutMs} ms; last lines: ${JSON.stringify(logs.slice(-5))}`)); }, timeoutMs);
    const done = () => { clearTimeout(timer); waiters.delete(check); };
    waiters.add(check);
    check();
  });

  try {
    await eventually(() => listening !== undefined || gone, options.startTimeoutMs ?? 30_000);
  } catch { /* reported below */ }
  if (!listening) {
    child.kill('SIGKILL');
    throw new Error(`the gateway did not start; stderr: ${stderr}; logs: ${JSON.stringify(logs.slice(-5))}`);
  }
  return {
    ...listening, child, logs, configFile, writeConfig, waitForLog, exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

