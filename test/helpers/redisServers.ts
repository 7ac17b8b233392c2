// Redis servers of a test's own, on loopback ports, in temp dirs: one server (that the test can
// pause with SIGSTOP), a Sentinel group (master, replica, three sentinels; failover on demand) and
// a 3-master Redis Cluster. Real redis-server and redis-cli processes: a stub would hide exactly
// the behaviour under test (READONLY after a failover, MOVED, a hung server). Every process is
// killed by stop(), and by the exit of the test worker if a test failed before it got there.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { describe } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import type { Config } from '../../src/config/schema.js';
import { docsExample } from './docs.js';
import { describeWithServices, eventually, testConfigFromYaml, testServices } from './gateway.js';
import { sparePort } from './ports.js';

const hasRedisBinaries = spawnSync('redis-server', ['--version']).status === 0 && spawnSync('redis-cli', ['--version']).status === 0;
// Same rule as for Postgres and Redis themselves (helpers/globalSetup.ts): without the binaries the
// suite is skipped, unless REQUIRE_SERVICES=1 (CI), where it fails instead of passing unseen.
const requireServices = process.env.REQUIRE_SERVICES === '1';
if (!hasRedisBinaries && !requireServices) console.warn('\n[tests] redis-server or redis-cli is not installed: the suites that run Redis servers of their own are skipped\n');

/** describe() for suites that start Redis servers of their own (and use the run's Postgres). */
export const describeWithRedisServers = hasRedisBinaries || requireServices ? describeWithServices : describe.skip;

/** Throws in a suite's beforeAll when CI requires the binaries and they are missing. */
export function requireRedisBinaries(): void {
  if (!hasRedisBinaries) throw new Error('REQUIRE_SERVICES=1 but redis-server or redis-cli is not installed (or not on PATH)');
}

const running = new Set<ChildProcess>();
process.once('exit', () => { for (const child of running) child.kill('SIGKILL'); });

export interface RedisServer {
  port: number;
  /** host:port, as storage.redis.sentinels and .cluster spell it. */
  address: string;
  url: string;
  /** A client of the test's own, without the gateway's key prefix (one per server, closed by stop). */
  client: Redis;
  /** SIGSTOP: the server keeps its connections and answers nothing, as a hung server does. */
  pause(): void;
  /** SIGCONT: it answers again, the commands sent meanwhile included. */
  resume(): void;
  /** SIGKILL, keeping its port for start(): Redis gone, as when it crashes. */
  kill(): Promise<void>;
  /** After kill(): the server again, on the same port, empty (no persistence), as after a restart. */
  start(): Promise<void>;
  flushAll(): Promise<void>;
  keys(pattern: string): Promise<string[]>;
  /** Kills it for good and removes its files. */
  stop(): Promise<void>;
}

/** A client that fails at once rather than retry: a test asks, and sees the answer or the error. */
function testClient(port: number): Redis {
  const client = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1, connectTimeout: 2000, lazyConnect: true });
  client.on('error', () => {});
  return client;
}

/** redis-server with `settings` (redis.conf lines), without persistence, its files in a temp dir. */
export async function startRedisServer(settings: string[] = [], options: { sentinel?: boolean } = {}): Promise<RedisServer> {
  const port = await sparePort();
  const dir = mkdtempSync(path.join(tmpdir(), 'gw-redis-'));
  const conf = path.join(dir, 'redis.conf');
  writeFileSync(conf, [
    `port ${port}`, 'bind 127.0.0.1', `dir ${dir}`, `logfile ${path.join(dir, 'redis.log')}`,
    ...(options.sentinel ? [] : ['save ""', 'appendonly no']),
    ...settings,
  ].join('\n') + '\n');
  const client = testClient(port);
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  const kill = async () => {
    const c = child;
    if (c && c.exitCode === null && c.signalCode === null) {
      c.kill('SIGKILL');
      await exited;
    }
  };
  const start = async () => {
    const c = spawn('redis-server', [conf, ...(options.sentinel ? ['--sentinel'] : [])], { stdio: 'ignore' });
    child = c;
    running.add(c);
    exited = new Promise<void>((resolve) => c.once('exit', () => { running.delete(c); resolve(); }));
    await eventually(async () => {
      if (c.exitCode !== null) throw new Error(`redis-server exited with ${c.exitCode} (config: ${settings.join('; ')})`);
      return client.ping().then(() => true, () => false);
    }, 10_000, 50);
  };
  const stop = async () => {
    client.disconnect();
    await kill();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await start();
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    port, address: `127.0.0.1:${port}`, url: `redis://127.0.0.1:${port}`, client,
    pause: () => child?.kill('SIGSTOP'),
    resume: () => child?.kill('SIGCONT'),
    kill, start, stop,
    flushAll: async () => { await client.flushall(); },
    keys: (pattern) => client.keys(pattern),
  };
}

/** Stops them all, even when some fail to. */
async function stopAll(servers: readonly RedisServer[]): Promise<void> {
  await Promise.allSettled(servers.map((s) => s.stop()));
}

// ---------------------------------------------------------------------------------------------

export interface SentinelGroup {
  /** The master group name the sentinels monitor. */
  name: string;
  sentinels: RedisServer[];
  /** The data nodes: [initial master, replica]. */
  servers: RedisServer[];
  /** The data node the sentinels name as master now. */
  master(): Promise<RedisServer>;
  /** SENTINEL FAILOVER; resolves with the new master once it takes writes and every sentinel names it. */
  failover(): Promise<RedisServer>;
  stop(): Promise<void>;
}

const role = async (server: RedisServer) => String(((await server.client.call('ROLE')) as unknown[])[0]);

/** A master, its replica, and three sentinels (quorum 2), as a production group is laid out. */
export async function startSentinelGroup(name = 'mymaster'): Promise<SentinelGroup> {
  const started: RedisServer[] = [];
  try {
    const master = await startRedisServer();
    started.push(master);
    const replica = await startRedisServer([`replicaof 127.0.0.1 ${master.port}`]);
    started.push(replica);
    const servers = [master, replica];
    await eventually(async () => /master_link_status:up/.test(await replica.client.info('replication')), 10_000, 50);
    const sentinels: RedisServer[] = [];
    for (let i = 0; i < 3; i++) {
      const sentinel = await startRedisServer([
        `sentinel monitor ${name} 127.0.0.1 ${master.port} 2`,
        `sentinel down-after-milliseconds ${name} 2000`,
        `sentinel failover-timeout ${name} 10000`,
      ], { sentinel: true });
      started.push(sentinel);
      sentinels.push(sentinel);
    }
    // A failover needs a replica the sentinels know, and the sentinels each other (to agree on the new config).
    await eventually(async () => {
      for (const s of sentinels) {
        const replicas = (await s.client.call('SENTINEL', 'REPLICAS', name)) as unknown[];
        const peers = (await s.client.call('SENTINEL', 'SENTINELS', name)) as unknown[];
        if (replicas.length !== 1 || peers.length !== 2) return false;
      }
      return true;
    }, 30_000, 100);
    const masterNow = async () => {
      const [, port] = (await sentinels[0]!.client.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name)) as [string, string];
      return servers.find((s) => s.port === Number(port))!;
    };
    return {
      name, sentinels, servers,
      master: masterNow,
      async failover() {
        const old = await masterNow();
        const next = servers.find((s) => s !== old)!;
        await sentinels[0]!.client.call('SENTINEL', 'FAILOVER', name);
        await eventually(async () => {
          if ((await role(next)) !== 'master' || (await role(old)) !== 'slave') return false;
          for (const s of sentinels) {
            const [, port] = (await s.client.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name)) as [string, string];
            if (Number(port) !== next.port) return false;
          }
          return true;
        }, 30_000, 50);
        return next;
      },
      stop: () => stopAll(started),
    };
  } catch (err) {
    await stopAll(started);
    throw err;
  }
}

// ---------------------------------------------------------------------------------------------

export interface RedisClusterGroup {
  nodes: RedisServer[];
  /** host:port of each node, as storage.redis.cluster takes them. */
  addresses: string[];
  /** Keys matching `pattern` on each node (SCAN on one node sees that node's keys only). */
  keysPerNode(pattern: string): Promise<string[][]>;
  /** The index in `nodes` of the master that holds `key`'s slot. */
  nodeOf(key: string): Promise<number>;
  stop(): Promise<void>;
}

/** Three masters holding the 16384 slots between them, no replicas (`redis-cli --cluster create`). */
export async function startRedisCluster(): Promise<RedisClusterGroup> {
  const nodes: RedisServer[] = [];
  try {
    for (let i = 0; i < 3; i++) {
      // The bus port is set apart: port + 10000 may be above 65535 for a high spare port.
      nodes.push(await startRedisServer(['cluster-enabled yes', 'cluster-config-file nodes.conf', 'cluster-node-timeout 3000', `cluster-port ${await sparePort()}`]));
    }
    const addresses = nodes.map((n) => n.address);
    const create = spawn('redis-cli', ['--cluster', 'create', ...addresses, '--cluster-replicas', '0', '--cluster-yes'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    create.stdout!.on('data', (chunk: Buffer) => { output += String(chunk); });
    create.stderr!.on('data', (chunk: Buffer) => { output += String(chunk); });
    const code = await new Promise<number | null>((resolve) => create.once('exit', resolve));
    if (code !== 0) throw new Error(`redis-cli --cluster create failed (${code}): ${output}`);
    await eventually(async () => {
      for (const node of nodes) {
        const info = String(await node.client.call('CLUSTER', 'INFO'));
        if (!/cluster_state:ok/.test(info) || !/cluster_known_nodes:3/.test(info)) return false;
      }
      return true;
    }, 20_000, 100);
    return {
      nodes, addresses,
      keysPerNode: (pattern) => Promise.all(nodes.map(async (node) => {
        const keys: string[] = [];
        let cursor = '0';
        do {
          const [next, batch] = await node.client.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
          cursor = next;
          keys.push(...batch);
        } while (cursor !== '0');
        return keys;
      })),
      async nodeOf(key) {
        const slot = Number(await nodes[0]!.client.call('CLUSTER', 'KEYSLOT', key));
        const ranges = (await nodes[0]!.client.call('CLUSTER', 'SLOTS')) as Array<[number, number, [string, number]]>;
        const [, , [, port]] = ranges.find(([from, to]) => slot >= from && slot <= to)!;
        return nodes.findIndex((n) => n.port === port);
      },
      stop: () => stopAll(nodes),
    };
  } catch (err) {
    await stopAll(nodes);
    throw err;
  }
}

// ---------------------------------------------------------------------------------------------

/**
 * A storage.redis example of docs/production.md as written, completed with a daily route (/daily)
 * and a per-minute one (/minute) under the free plan's `limits`. The test settings put the run's
 * database, ports and redisTimeout over it (testConfigFromYaml); the example's own storage.redis
 * is kept, under `keyPrefix`.
 */
export function productionExampleConfig(name: string, env: Record<string, string>, options: { upstream: string; daily: number; perMinute: number; keyPrefix: string }): Config {
  const text = `${docsExample('production', name)}plans:
  limits:
    free: { daily: ${options.daily}, perMinute: ${options.perMinute} }
upstreams:
  app:
    url: ${options.upstream}
routes:
  - path: /daily
    upstream: app
    dailyLimit: true
  - path: /minute
    upstream: app
    rateLimit: true
`;
  const withEnv = { DATABASE_URL: testServices!.postgres, ...env };
  const config = testConfigFromYaml(text, withEnv);
  config.storage.redis = parseConfig(text, name, withEnv).storage.redis;
  config.storage.redisKeyPrefix = options.keyPrefix;
  return config;
}
