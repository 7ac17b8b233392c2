// A witness of the formation's durability, outside the gateway (CONTRACT §32: the counts hold only
// while every commit a primary acknowledges is on the standby it promotes). It commits one row at
// a time to whichever node takes writes, from a plain node-postgres client of its own, and keeps
// the rows Postgres acknowledged without a warning (a warning on COMMIT is Postgres saying it
// stopped waiting for the synchronous standby). After the switch, an acknowledged row missing from
// the new primary is a commit the formation lost: the same loss would take counted uses with it,
// and a count that differs then says nothing about the gateway.
import pg from 'pg';
import { UNREPLICATED_COMMIT_SQLSTATE } from '../../src/storage/database/failures.js';
import { nodeQuery, type AutoFailover, type FormationNode } from './pgAutoFailover.js';

export interface CommitWitness {
  /** Rows acknowledged without a warning, by sequence number, with the node that acknowledged each. */
  acknowledged: Map<number, string>;
  /** Commits that failed or were answered with a warning (their outcome unknown). */
  readonly unsure: number;
  stop(): Promise<void>;
  /** The acknowledged rows the node that takes writes now does not have: seq → the node that acknowledged it. */
  lost(): Promise<Map<number, string>>;
}

const TABLE = 'commit_witness';

/** Starts committing rows of `scenario` every few milliseconds, until stop(). */
export async function startCommitWitness(cluster: AutoFailover, scenario: string): Promise<CommitWitness> {
  const writable = async () => (await cluster.primary()).port;
  await nodeQuery(await writable(), 'app', `CREATE TABLE IF NOT EXISTS ${TABLE} (scenario text NOT NULL, seq int NOT NULL)`);
  const acknowledged = new Map<number, string>();
  let unsure = 0;
  let stopped = false;
  let seq = 0;
  /** One connection to the writable node, committing until it fails or the witness stops. */
  const commitOn = async (node: FormationNode) => {
    const client = new pg.Client({ host: '127.0.0.1', port: node.port, user: 'postgres', database: 'app', connectionTimeoutMillis: 1000, query_timeout: 5000 });
    client.on('error', () => {});
    let warned: boolean;
    client.on('notice', (n: { code?: string }) => { if (UNREPLICATED_COMMIT_SQLSTATE.test(n.code ?? '')) warned = true; });
    try {
      await client.connect();
      while (!stopped) {
        const mine = ++seq;
        warned = false;
        try {
          await client.query(`INSERT INTO ${TABLE} (scenario, seq) VALUES ($1, $2)`, [scenario, mine]);
        } catch (err) {
          unsure++;
          throw err;
        }
        if (warned) unsure++;
        else acknowledged.set(mine, node.name);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    } finally {
      await client.end().catch(() => {});
    }
  };
  const running = (async () => {
    while (!stopped) {
      // A node that refuses (read-only, shutting down) or dies: the next writable one, as a client would.
      await cluster.primary().then(commitOn).catch(() => new Promise((resolve) => setTimeout(resolve, 20)));
    }
  })();
  return {
    acknowledged,
    get unsure() { return unsure; },
    async stop() {
      stopped = true;
      await running;
    },
    async lost() {
      const rows = await nodeQuery<{ seq: number }>(await writable(), 'app', `SELECT seq FROM ${TABLE} WHERE scenario = $1`, [scenario]);
      const present = new Set(rows.map((r) => r.seq));
      return new Map([...acknowledged].filter(([s]) => !present.has(s)));
    },
  };
}
