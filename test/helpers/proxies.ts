// Real nginx and Caddy in front of test gateways (docs/decisions.md): each started by the test on
// loopback ports, in a temporary directory that holds its configuration, pid, logs and state, and
// stopped after. The site configuration is the one the docs ship, with only its ports changed.
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, inject } from 'vitest';
import type { Proxy } from './globalSetup.js';
import { testServices } from './gateway.js';
import { sparePort } from './ports.js';

const proxies = inject('proxies');

/** describe() for suites that need Postgres, Redis and this proxy; skipped, saying why, without them (globalSetup fails the run under REQUIRE_SERVICES=1). */
export function describeWithProxy(proxy: Proxy): typeof describe | typeof describe.skip {
  if (testServices && proxies[proxy]) return describe;
  console.warn(`[tests] skipping the ${proxy} suite: ${testServices ? `${proxy} is not installed` : 'Postgres or Redis is missing'}`);
  return describe.skip;
}

/**
 * `text` with each `127.0.0.1:<example port>` of the docs replaced by the test's port for it. Every
 * example port must appear, and no other loopback address may be left: a docs change that adds or
 * renames one fails here rather than leaving the test on a port it did not start.
 */
export function withPorts(text: string, ports: Record<number, number>): string {
  for (const from of Object.keys(ports)) {
    if (!text.includes(`127.0.0.1:${from}`)) throw new Error(`the docs example no longer mentions 127.0.0.1:${from}`);
  }
  return text.replace(/127\.0\.0\.1:(\d+)/g, (address, port: string) => {
    const to = ports[Number(port)];
    if (to === undefined) throw new Error(`the docs example mentions ${address}, which the test does not map`);
    return `127.0.0.1:${to}`;
  });
}

export interface RunningProxy {
  url: string;
  /** The proxy's own log so far (for failure messages). */
  log(): string;
  close(): Promise<void>;
}

/**
 * nginx with `site` (what an operator puts in conf.d, inside `http {}`) listening on `port`. The
 * main configuration around it only places the pid, logs and temporary files in a directory of the
 * test's own.
 */
export async function startNginx(site: string, port: number): Promise<RunningProxy & { reload(site: string): Promise<void> }> {
  const dir = workDir('nginx');
  writeFileSync(path.join(dir, 'site.conf'), site);
  writeFileSync(path.join(dir, 'nginx.conf'), [
    `pid ${dir}/nginx.pid;`,
    `error_log ${dir}/error.log warn;`,
    'events { worker_connections 1024; }',
    'http {',
    `  access_log ${dir}/access.log;`,
    `  include ${dir}/site.conf;`,
    '}',
    '',
  ].join('\n'));
  // -p: the temporary directories (client_body_temp, proxy_temp, …) go under the test's directory.
  const child = spawn(proxies.nginx!, ['-p', `${dir}/`, '-c', `${dir}/nginx.conf`, '-e', `${dir}/error.log`, '-g', 'daemon off;'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const proxy = await running(child, dir, port, () => readLog(path.join(dir, 'error.log')));
  return {
    ...proxy,
    /** `site` in place of the running one, reloaded as `nginx -s reload` does (SIGHUP): new workers take it, old ones finish. */
    async reload(next: string) {
      writeFileSync(path.join(dir, 'site.conf'), next);
      child.kill('SIGHUP');
      await new Promise((resolve) => setTimeout(resolve, 100));
    },
  };
}

/**
 * Caddy with `site` (a site block of a Caddyfile) listening on `port`. The global options the test
 * adds turn off what would reach outside the test: the admin endpoint and automatic HTTPS; Caddy's
 * own files (autosave, certificates) go to the test's directory.
 */
export async function startCaddy(site: string, port: number): Promise<RunningProxy> {
  const dir = workDir('caddy');
  const file = path.join(dir, 'Caddyfile');
  writeFileSync(file, `{\n\tadmin off\n\tauto_https off\n}\n\n${site}`);
  const env = { ...process.env, HOME: dir, XDG_CONFIG_HOME: dir, XDG_DATA_HOME: dir };
  const child = spawn(proxies.caddy!, ['run', '--config', file, '--adapter', 'caddyfile'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  return running(child, dir, port);
}

/** A spare loopback port for a proxy to listen on. */
export const proxyPort = sparePort;

function workDir(name: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), `gw-${name}-`));
  // nginx's workers run as `nobody` when the tests run as root: they must reach their temp files.
  chmodSync(dir, 0o755);
  return dir;
}

function readLog(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

async function running(child: ChildProcess, dir: string, port: number, fileLog: () => string = () => ''): Promise<RunningProxy> {
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => { output += chunk; });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => { output += chunk; });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let gone = false;
  void exited.then(() => { gone = true; });
  const log = () => `${output}${fileLog()}`.slice(-4000);
  const close = async () => {
    if (!gone) {
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 15_000;
  while (!(await listening(port))) {
    if (gone || Date.now() > deadline) {
      await close();
      throw new Error(`the proxy did not start listening on ${port}:\n${log()}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { url: `http://127.0.0.1:${port}`, log, close };
}

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => { socket.destroy(); resolve(true); });
    socket.once('error', () => resolve(false));
  });
}
