// Operating tests: the built CLI as a child process, a TCP proxy that can cut the gateway off
// Postgres, a Redis server of the test's own that can be stopped, and an upstream that holds
// requests until the test lets them go. Real processes and sockets only: a stub would hide
// exactly the failure being tested.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type http from 'node:http';
import { Redis } from 'ioredis';
import { eventually, testServices, TEST_JWT_SECRET } from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/upstream.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const CLI = path.join(ROOT, 'dist/cli.js');

/** A port nobody listens on right now (for listeners that cannot take port 0, like admin or Redis). */
export async function sparePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Redis keys of this test alone (cleaned with the run's prefix by globalSetup). */
export const ownRedisPrefix = (tag: string) => `${testServices!.redisPrefix}${tag}-${randomBytes(4).toString('hex')}:`;

// ---------------------------------------------------------------------------------------------
// The gateway as an operator runs it: `node dist/cli.js start --config FILE`.

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

/** A config object for the spawned CLI: the run's Postgres and Redis, ports 0, no admin listener. */
export function cliConfig(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  const s = testServices!;
  const base: Record<string, unknown> = {
    server: { host: '127.0.0.1', port: 0 },
    storage: { postgres: s.postgres, redis: s.redis, redisKeyPrefix: s.redisPrefix },
    auth: { jwt: { secret: TEST_JWT_SECRET }, rateLimit: { max: 0 } },
    admin: { port: 0 },
    webhooks: { allowPrivateNetworks: true },
  };
  for (const [k, v] of Object.entries(overrides)) base[k] = v && typeof v === 'object' && !Array.isArray(v) ? { ...(base[k] as object), ...v } : v;
  return base;
}

/** `onListening` runs the moment the "listening" line is read, as an operator's script would act on it. */
export async function spawnGateway(config: Record<string, unknown>, options: { onListening?: (child: ChildProcess) => void } = {}): Promise<GatewayProcess> {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npm run build\` first (npm test does)`);
  const dir = mkdtempSync(path.join(tmpdir(), 'gw-ops-'));
  const configFile = path.join(dir, 'gateway.yaml');
  // JSON is YAML: the file is written exactly as the object says.
  const writeConfig = (c: Record<string, unknown> | string) => writeFileSync(configFile, typeof c === 'string' ? c : JSON.stringify(c, null, 2));
  writeConfig(config);
  // PORT and HOST would override the file's listener settings.
  const env: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: 'info' };
  delete env.PORT;
  delete env.HOST;
  const child = spawn(process.execPath, [CLI, 'start', '--config', configFile], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
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
      const m = /^gateway listening on (\S+)(?: \(admin on (\S+)\))?/.exec(line);
      if (m) {
        listening = { url: m[1]!, adminUrl: m[2] };
        options.onListening?.(child);
      }
      try { logs.push(JSON.parse(line) as LogLine); } catch { /* the plain "listening" line */ }
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
    await eventually(() => listening !== undefined || gone, 30_000);
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

// ---------------------------------------------------------------------------------------------
// A TCP proxy in front of a dependency, so a test can take it away and give it back.

export interface TcpProxy {
  port: number;
  /** Refuses new connections and resets the open ones, as a stopped server does. */
  cut(): Promise<void>;
  /** Accepts again, on the same port. */
  restore(): Promise<void>;
  /**
   * Stops moving bytes either way, new connections included, without closing anything: a
   * firewall dropping packets, a partition, a hung server. Nothing is lost, as with TCP.
   */
  blackhole(): void;
  /** Moves the held bytes and the new ones again. */
  forward(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const sockets = new Set<net.Socket>();
  const pairs = new Set<[net.Socket, net.Socket]>();
  let holding = false;
  let server: net.Server | undefined;
  let port = 0;
  const join = ([client, upstream]: [net.Socket, net.Socket]) => { client.pipe(upstream).pipe(client); };
  const listen = async () => {
    const s = net.createServer((client) => {
      const upstream = net.connect(target.port, target.host);
      const pair: [net.Socket, net.Socket] = [client, upstream];
      sockets.add(client);
      sockets.add(upstream);
      pairs.add(pair);
      const drop = () => { client.destroy(); upstream.destroy(); sockets.delete(client); sockets.delete(upstream); pairs.delete(pair); };
      client.on('error', drop).on('close', drop);
      upstream.on('error', drop).on('close', drop);
      if (holding) client.pause();
      else join(pair);
    });
    await new Promise<void>((resolve, reject) => s.once('error', reject).listen(port, '127.0.0.1', () => resolve()));
    port = (s.address() as net.AddressInfo).port;
    server = s;
  };
  const cut = async () => {
    const s = server;
    server = undefined;
    for (const socket of sockets) socket.destroy();
    sockets.clear();
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
  };
  // Unpiped and paused, a socket is no longer read: its bytes wait in the kernel buffers.
  const blackhole = () => {
    holding = true;
    for (const [client, upstream] of pairs) {
      client.unpipe(upstream);
      upstream.unpipe(client);
      client.pause();
      upstream.pause();
    }
  };
  const forward = () => {
    holding = false;
    for (const pair of pairs) join(pair);
  };
  await listen();
  return { port, cut, restore: listen, blackhole, forward, close: cut };
}

/** The run's Postgres URL, reached through the proxy. */
export function throughProxy(postgresUrl: string, proxy: TcpProxy): string {
  const url = new URL(postgresUrl);
  url.hostname = '127.0.0.1';
  url.port = String(proxy.port);
  return url.toString();
}

export function postgresTarget(): { host: string; port: number } {
  const url = new URL(testServices!.postgres);
  return { host: url.hostname || '127.0.0.1', port: Number(url.port || 5432) };
}

// ---------------------------------------------------------------------------------------------
// A Redis server of the test's own, that the test can stop and start again on the same port.

export interface OwnRedis {
  url: string;
  stop(): Promise<void>;
  start(): Promise<void>;
  flushAll(): Promise<void>;
  keys(pattern: string): Promise<string[]>;
}

export async function startOwnRedis(): Promise<OwnRedis> {
  const port = await sparePort();
  let child: ChildProcess | undefined;
  const start = async () => {
    const c = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    child = c;
    await eventually(() => new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      socket.once('connect', () => { socket.destroy(); resolve(true); });
      socket.once('error', () => resolve(false));
    }), 10_000, 50);
  };
  const stop = async () => {
    const c = child;
    child = undefined;
    if (!c || c.exitCode !== null) return;
    const gone = new Promise((resolve) => c.once('exit', resolve));
    c.kill('SIGKILL');
    await gone;
  };
  const client = async <T>(work: (r: Redis) => Promise<T>): Promise<T> => {
    const r = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1 });
    try { return await work(r); } finally { r.disconnect(); }
  };
  await start();
  return {
    url: `redis://127.0.0.1:${port}`, start, stop,
    flushAll: () => client(async (r) => { await r.flushall(); }),
    keys: (pattern) => client((r) => r.keys(pattern)),
  };
}

// ---------------------------------------------------------------------------------------------
// An upstream that holds requests whose path contains a marker until the test releases them.

export interface HoldingUpstream extends EchoUpstream {
  /** Requests with this marker in their path wait; release() answers them normally. */
  hold(marker: string): { held(): number; release(): void };
}

export async function startHoldingUpstream(): Promise<HoldingUpstream> {
  const upstream = await startEchoUpstream() as HoldingUpstream;
  const holds = new Map<string, { waiting: Array<() => void>; released: boolean }>();
  upstream.handle = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const path = (req.url ?? '').split('?')[0]!;
    for (const [marker, hold] of holds) {
      if (!path.includes(marker) || hold.released) continue;
      hold.waiting.push(() => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ released: marker, path }));
      });
      return true;
    }
    return false;
  };
  upstream.hold = (marker) => {
    const hold = { waiting: [] as Array<() => void>, released: false };
    holds.set(marker, hold);
    return {
      held: () => hold.waiting.length,
      release: () => { hold.released = true; for (const answer of hold.waiting.splice(0)) answer(); },
    };
  };
  return upstream;
}
