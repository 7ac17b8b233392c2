// A witness of the formation's durability, outside the gateway (CONTRACT §32: the counts hold only
// while every commit a primary acknowledges is on the standby it promotes). It commits one row at
// a time to whichever node takes writes, from a plain node-postgres client of its own, and keeps
// the rows Postgres acknowledged without a warning (a warning on COMMIT is Postgres saying it
// stopped waiting for the synchronous standby). After the switch, an acknowledged row missing from
// the new primary is a commit the formation lost: the same loss would take counted uses with it,
// and a count that differs then says nothing about the gateway.
import pg from 'pg';
import type { AutoFailover, FormationNode } from './pgAutoFailover.js';

export interface CommitWitness {
  /** Rows acknowledged without a warning, by sequence number, with the node that acknowledged each. */
  acknowledged: Map<number, string>;
  /** Commits that failed or were answered with a warning (their outcome unknown). */
  unsure: number;
  stop(): Promise<void>;
  /** The acknowledged rows the node that takes writes now does not have: seq → the node that acknowledged it. */
  lost(): Promise<Map<number, string>>;
}

const TABLE = 'commit_witness';

/** Starts committing rows of `scenario` every few milliseconds, until stop(). */
export async function startCommitWitness(cluster: AutoFailover, scenario: string): Promise<CommitWitness> {
  const onPrimary = async <T>(fn: (client: pg.Client, node: FormationNode) => Promise<T>): Promise<T> => {
    const node = await cluster.primary();
    const client = new pg.Client({ host: '127.0.0.1', port: node.port, user: 'postgres', database: 'app', connectionTimeoutMillis: 1000, query_timeout: 5000 });
    client.on('error', () => {});
    await client.connect();
    try {
      return await fn(client, node);
    } finally {
      await client.end().catch(() => {});
    }
  };
  await onPrimary((c) => c.query(`CREATE TABLE IF NOT EXISTS ${TABLE} (scenario text NOT NULL, seq int NOT NULL)`));
  const witness: CommitWitness = { acknowledged: new Map(), unsure: 0, stop: async () => {}, lost: async () => new Map() };
  let stopped = false;
  let seq = 0;
  const commitEach = async (client: pg.Client, node: FormationNode) => {
    let warned: boolean;
    client.on('notice', (n: { code?: string }) => { if (/^(01|57P01$)/.test(n.code ?? '')) warned = true; });
    while (!stopped) {
      const mine = ++seq;
      warned = false;
      try {
        await client.query(`INSERT INTO ${TABLE} (scenario, seq) VALUES ($1, $2)`, [scenario, mine]);
      } catch (err) {
        witness.unsure++;
        throw err;
      }
      if (warned) witness.unsure++;
      else witness.acknowledged.set(mine, node.name);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  };
  const running = (async () => {
    while (!stopped) {
      // A node that refuses (read-only, shutting down) or dies: the next writable one, as a client would.
      await onPrimary(commitEach).catch(() => new Promise((resolve) => setTimeout(resolve, 20)));
    }
  })();
  witness.stop = async () => {
    stopped = true;
    await running;
  };
  witness.lost = () => onPrimary(async (c) => {
    const present = new Set((await c.query<{ seq: number }>(`SELECT seq FROM ${TABLE} WHERE scenario = $1`, [scenario])).rows.map((r) => r.seq));
    return new Map([...witness.acknowledged].filter(([s]) => !present.has(s)));
  });
  return witness;
}
