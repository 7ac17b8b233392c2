// A pg_auto_failover formation of the test's own (CONTRACT §32): a monitor, a primary and a
// secondary from Debian's postgresql-15-auto-failover, on loopback ports of their own, in a
// temporary directory, run as the `postgres` user (pg_autoctl refuses root). Each node runs in a
// process group of its own, so a "lost primary" is its pg_autoctl and its Postgres killed together
// (a postmaster killed alone is restarted by its keeper). Measured on this machine (2 cores): the
// monitor is up in about 6 s, the primary in about 10 s more, the secondary in about 10 s more
// once the base backup's checkpoint is forced (pg_basebackup waits for a spread checkpoint, which
// took half a minute on an idle primary).
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { sparePort } from './ports.js';

const run = promisify(execFile);
const PG_BIN = '/usr/lib/postgresql/15/bin';
export const PG_AUTOCTL = '/usr/bin/pg_autoctl';
export const hasPgAutoFailover = existsSync(PG_AUTOCTL) && existsSync(`${PG_BIN}/postgres`);

/** The monitor's settings a test shortens (ms): how soon a lost primary is replaced. */
export interface MonitorTimings {
  healthCheckPeriod: number;
  unhealthyTimeout: number;
  demoteTimeout: number;
}

/** How long steady() lets a primary and a secondary stand with the primary asynchronous before it has the settings applied again. */
const ASYNC_PATIENCE_MS = 3000;

/** Seconds instead of the defaults' tens of seconds (5 s, 20 s, 30 s). */
export const FAST_MONITOR: MonitorTimings = { healthCheckPeriod: 1000, unhealthyTimeout: 3000, demoteTimeout: 3000 };

export interface FormationNode {
  name: string;
  port: number;
  /** Running (not killed). */
  alive: boolean;
}

/** One of the monitor's events (pgautofailover.event): a state reported or a goal assigned, and why. */
export interface FormationEvent {
  /** Date.now() of the event. */
  at: number;
  node: string;
  reported: string;
  goal: string;
  description: string;
}

export interface AutoFailover {
  nodes: FormationNode[];
  /** `pg_autoctl show uri --formation default`, as it printed it. */
  shownUri: string;
  /** That URI for a client: user postgres, no TLS (the nodes run without it). */
  uri: string;
  /** The node that takes writes (primary, or wait_primary alone after a failover). */
  primary(): Promise<FormationNode>;
  /** Resolves with the time (Date.now()) a node other than `than` first took writes. */
  newPrimary(than: FormationNode, timeoutMs?: number): Promise<{ node: FormationNode; at: number }>;
  /** `pg_autoctl perform switchover`, run to its end. */
  switchover(): Promise<void>;
  /** SIGKILL of the node's pg_autoctl and its Postgres together (its process group). */
  kill(node: FormationNode): void;
  /** A node's log so far (pg_autoctl's). */
  log(node: FormationNode | 'monitor'): string;
  /** The monitor's events so far, oldest first. */
  events(): Promise<FormationEvent[]>;
  /** Resolves once the monitor reports a primary and a secondary, and the primary replicates synchronously. */
  steady(): Promise<void>;
  /** The primary's synchronous_standby_names and its standbys' sync_state (pg_stat_replication). */
  replication(node: FormationNode): Promise<Replication>;
  stop(): Promise<void>;
}

export interface Replication {
  /** '' while the primary's commits wait for no standby. */
  names: string;
  /** One per connected standby: 'quorum' or 'sync' when it confirms commits, 'async' or 'potential' otherwise. */
  states: string[];
}

/** Whether a primary's commits wait for a standby's confirmation. */
export const synchronous = (r: Replication): boolean => r.names !== '' && r.states.some((s) => s === 'quorum' || s === 'sync');

interface Running {
  child: ChildProcess;
  output: string[];
}

/** The unprivileged user the nodes run as (pg_autoctl refuses root). */
function postgresUser(): { uid: number; gid: number } {
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

/** One statement on a node (or the monitor) as the superuser, on a connection of its own. */
export async function nodeQuery<T>(port: number, database: string, text: string, params: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', database, connectionTimeoutMillis: 1000, query_timeout: 2000 });
  client.on('error', () => {});
  try {
    await client.connect();
    return (await client.query(text, params)).rows as T[];
  } finally {
    await client.end().catch(() => {});
  }
}

async function until<T>(what: string, timeoutMs: number, attempt: () => Promise<T | undefined>, stepMs = 200): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await attempt();
      if (value !== undefined) return value;
    } catch (err) {
      last = err;
    }
    await new Promise((resolve) => setTimeout(resolve, stepMs));
  }
  throw new Error(`pg_auto_failover: ${what} not within ${timeoutMs} ms${last ? ` (${(last as Error).message})` : ''}`);
}

/** Starts a monitor, a primary and a secondary; resolves once the monitor reports them primary and secondary. */
export async function startAutoFailover(timings: MonitorTimings = FAST_MONITOR): Promise<AutoFailover> {
  const user = postgresUser();
  const dir = mkdtempSync(path.join(tmpdir(), 'gw-pgaf-'));
  chownSync(dir, user.uid, user.gid);
  const env = {
    PATH: `${PG_BIN}:/usr/bin:/bin`, HOME: dir, XDG_CONFIG_HOME: path.join(dir, 'config'), XDG_DATA_HOME: path.join(dir, 'data'), XDG_RUNTIME_DIR: path.join(dir, 'run'),
  };
  for (const sub of ['config', 'data', 'run']) {
    mkdirSync(path.join(dir, sub));
    chownSync(path.join(dir, sub), user.uid, user.gid);
  }
  const running = new Map<string, Running>();
  const start = (name: string, args: string[]) => {
    // detached: a process group of its own, which kill() ends as one.
    const child = spawn(PG_AUTOCTL, [...args, '--pgdata', path.join(dir, name), '--hostname', '127.0.0.1', '--auth', 'trust', '--no-ssl', '--run'], {
      ...user, env, cwd: dir, detached: true, stdio: ['ignore', 'pipe', 'pipe'],
    });
    const output: string[] = [];
    child.stdout!.on('data', (d: Buffer) => output.push(d.toString()));
    child.stderr!.on('data', (d: Buffer) => output.push(d.toString()));
    running.set(name, { child, output });
  };
  const autoctl = (args: string[]) => run(PG_AUTOCTL, args, { ...user, env, cwd: dir, timeout: 60_000 });
  const [monitorPort, port1, port2] = [await sparePort(), await sparePort(), await sparePort()];
  const nodes: FormationNode[] = [{ name: 'n1', port: port1, alive: true }, { name: 'n2', port: port2, alive: true }];
  const monitorUrl = `postgres://autoctl_node@127.0.0.1:${monitorPort}/pg_auto_failover?sslmode=disable`;
  const states = () => nodeQuery<{ nodename: string; reportedstate: string; goalstate: string }>(monitorPort, 'pg_auto_failover',
    'SELECT nodename, reportedstate::text, goalstate::text FROM pgautofailover.node ORDER BY nodeid');
  const stateOf = async (name: string) => (await states()).find((s) => s.nodename === name);
  const writable = async (node: FormationNode) => (await nodeQuery<{ r: boolean }>(node.port, 'app', 'SELECT pg_is_in_recovery() AS r'))[0]?.r === false;

  const replication = async (node: FormationNode): Promise<Replication> => {
    const [row] = await nodeQuery<{ names: string; states: string[] }>(node.port, 'postgres',
      "SELECT current_setting('synchronous_standby_names') AS names, ARRAY(SELECT sync_state::text FROM pg_stat_replication) AS states");
    return row!;
  };

  /**
   * Until one node is primary and the other secondary, reported and assigned alike, and the primary
   * replicates synchronously; `each` runs before every look. The states alone do not say so:
   * pg_auto_failover 2.0's primary reads synchronous_standby_names from the monitor once, as it
   * enters `primary`, and the monitor gives '' unless the standby's goal is `secondary` at that
   * moment; such a primary stays asynchronous, acknowledging commits its standby never confirmed,
   * until its settings are applied again. Seen for a few seconds, the test does what an operator
   * would: sets the formation's number_sync_standbys to the 0 it has, which sends the primary
   * through apply_settings (by the monitor's function: Debian's `pg_autoctl set formation
   * number-sync-standbys 0` refuses 0, reading a stale errno after strtol).
   */
  const steady = (each?: () => Promise<void>) => {
    let asyncSince: number | undefined;
    let reapplied = false;
    return until('a primary and a secondary, replicating synchronously', 120_000, async () => {
      await each?.();
      const seen = await states();
      if (seen.map((s) => `${s.reportedstate}/${s.goalstate}`).sort().join(' ') !== 'primary/primary secondary/secondary') return undefined;
      const primary = nodes.find((n) => n.name === seen.find((s) => s.reportedstate === 'primary')!.nodename)!;
      const r = await replication(primary);
      if (synchronous(r)) return true;
      const why = `${primary.name} is primary with synchronous_standby_names '${r.names}' and standbys [${r.states.join(', ')}]`;
      asyncSince ??= Date.now();
      if (!reapplied && Date.now() - asyncSince >= ASYNC_PATIENCE_MS) {
        reapplied = true;
        // Said in the test's output: how often pg_auto_failover reports a steady formation that is not.
        console.warn(`[pg_auto_failover] the monitor reports a primary and a secondary, but ${why}: its settings applied again`);
        await nodeQuery(monitorPort, 'pg_auto_failover', "SELECT pgautofailover.set_formation_number_sync_standbys('default', 0)");
      }
      throw new Error(why);
    }, 500);
  };

  const stop = async () => {
    for (const { child } of running.values()) {
      try {
        process.kill(-child.pid!, 'SIGTERM');
      } catch { /* gone already */ }
    }
    await Promise.all([...running.values()].map(({ child }) => child.exitCode !== null || child.signalCode !== null ? undefined
      : new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          try {
            process.kill(-child.pid!, 'SIGKILL');
          } catch { /* gone */ }
        }, 10_000);
        child.once('exit', () => {
          clearTimeout(timer);
          resolve();
        });
      })));
    // The postmasters of SIGTERMed keepers exit on their own; their process groups are gone with them.
    for (const { child } of running.values()) {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch { /* gone */ }
    }
    rmSync(dir, { recursive: true, force: true });
  };

  try {
    start('monitor', ['create', 'monitor', '--pgport', String(monitorPort)]);
    await until('the monitor', 60_000, async () => ((await states()) ? true : undefined));
    await nodeQuery(monitorPort, 'pg_auto_failover', `ALTER SYSTEM SET pgautofailover.health_check_period = ${timings.healthCheckPeriod}`);
    await nodeQuery(monitorPort, 'pg_auto_failover', `ALTER SYSTEM SET pgautofailover.node_considered_unhealthy_timeout = ${timings.unhealthyTimeout}`);
    await nodeQuery(monitorPort, 'pg_auto_failover', `ALTER SYSTEM SET pgautofailover.primary_demote_timeout = ${timings.demoteTimeout}`);
    await nodeQuery(monitorPort, 'pg_auto_failover', 'SELECT pg_reload_conf()');
    const create = (node: FormationNode) => start(node.name, ['create', 'postgres', '--pgport', String(node.port), '--name', node.name, '--monitor', monitorUrl, '--dbname', 'app']);
    create(nodes[0]!);
    await until('the first node', 90_000, async () => ((await stateOf('n1'))?.reportedstate === 'single' ? true : undefined));
    create(nodes[1]!);
    // pg_basebackup waits for a spread checkpoint on the primary: forced, it is done at once.
    await steady(async () => void (await nodeQuery(port1, 'postgres', 'CHECKPOINT').catch(() => {})));
    const shownUri = (await autoctl(['show', 'uri', '--pgdata', path.join(dir, 'monitor'), '--formation', 'default'])).stdout.trim();
    const uri = shownUri.replace('postgres://', 'postgres://postgres@').replace('sslmode=prefer', 'sslmode=disable');
    return {
      nodes, shownUri, uri, stop,
      async primary() {
        return until('a primary', 30_000, async () => {
          for (const node of nodes) if (node.alive && (await writable(node).catch(() => false))) return node;
          return undefined;
        });
      },
      async newPrimary(than, timeoutMs = 60_000) {
        const node = await until('a new primary', timeoutMs, async () => {
          for (const n of nodes) if (n !== than && n.alive && (await writable(n).catch(() => false))) return n;
          return undefined;
        }, 50);
        return { node, at: Date.now() };
      },
      async switchover() {
        await autoctl(['perform', 'switchover', '--pgdata', path.join(dir, 'monitor')]);
      },
      kill(node) {
        process.kill(-running.get(node.name)!.child.pid!, 'SIGKILL');
        node.alive = false;
      },
      log(node) {
        return running.get(node === 'monitor' ? 'monitor' : node.name)?.output.join('') ?? '';
      },
      async events() {
        return nodeQuery<FormationEvent>(monitorPort, 'pg_auto_failover', `SELECT (extract(epoch FROM eventtime) * 1000)::float8 AS at, nodename AS node,
          reportedstate::text AS reported, goalstate::text AS goal, description FROM pgautofailover.event ORDER BY eventid`);
      },
      steady: async () => void (await steady()),
      replication,
    };
  } catch (err) {
    const logs = [...running].map(([name, r]) => `--- ${name}\n${r.output.join('').slice(-3000)}`).join('\n');
    await stop();
    throw new Error(`${(err as Error).message}\n${logs}`, { cause: err });
  }
}
