// storage (CONTRACT §9, §25, §32): Postgres (one URL, or libpq's multi-host form), the pool, Redis,
// and the bounds of waiting for them. The multi-host URL is read here, without node-postgres, so
// that `gateway check` refuses what the gateway cannot use and storage/database/pgHosts.ts parses nothing.
import { z } from 'zod';
import { bool, duration, int, text } from './values.js';
import { redisSchema } from './redis.js';

// scheme, user info (with its @), the hosts, then path, query and fragment as they were.
const URL_PARTS = /^(postgres(?:ql)?:\/\/)([^@/?#]*@)?([^/?#]*)(.*)$/s;
const TARGET = /^target_session_attrs=(.*)$/;
/** target_session_attrs values that mean "a host that takes writes": everything the gateway does writes, or reads its own writes. */
const WRITABLE_TARGETS = new Set(['read-write', 'primary']);

export interface PostgresHosts {
  /** One single-host URL per host, in the URL's order, without target_session_attrs. */
  urls: string[];
  /** The URL's target_session_attrs, undecoded; undefined when it has none. */
  target: string | undefined;
}

/** A URL's percent-encoded text, or as written when it is not valid percent-encoding. */
function decodeText(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** The hosts of a postgres:// URL; undefined for anything that is not one (a socket path, a key=value string). */
export function postgresHosts(url: string): PostgresHosts | undefined {
  const m = URL_PARTS.exec(url);
  if (!m) return undefined;
  const [, scheme, userInfo = '', hostList = '', rest = ''] = m;
  const q = rest.indexOf('?');
  const path = q < 0 ? rest : rest.slice(0, q);
  const hash = rest.indexOf('#', q);
  const query = q < 0 ? '' : rest.slice(q + 1, hash < 0 ? undefined : hash);
  let target: string | undefined;
  const kept = query.split('&').filter((pair) => {
    const t = TARGET.exec(pair);
    if (t) target = decodeText(t[1]!);
    return pair !== '' && !t;
  });
  const tail = `${path}${kept.length ? `?${kept.join('&')}` : ''}`;
  return { urls: hostList.split(',').map((host) => `${scheme}${userInfo}${host}${tail}`), target };
}

/** Why `gateway check` refuses a storage URL's hosts (CONTRACT §32); undefined when they are fine. */
export function postgresHostsProblem(url: string): string | undefined {
  const hosts = postgresHosts(url);
  if (!hosts) return undefined;
  if (hosts.target !== undefined && !WRITABLE_TARGETS.has(hosts.target)) {
    return `target_session_attrs=${hosts.target} is not supported: the gateway writes, or reads its own writes, on every connection; use target_session_attrs=read-write (or primary)`;
  }
  if (hosts.urls.length > 1 && hosts.target === undefined) {
    return `${hosts.urls.length} hosts need target_session_attrs=read-write (or primary): without it a connection may go to a standby that refuses every write`;
  }
  return undefined;
}

const postgresUrl = text.superRefine((url, ctx) => {
  const problem = postgresHostsProblem(url);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});
const POSTGRES_EXAMPLES = ['postgres://gateway:secret@127.0.0.1:5432/gateway', 'postgres://gateway:secret@10.0.0.1:5432,10.0.0.2:5432/gateway?target_session_attrs=read-write'];

export const storageSchema = z.strictObject({
  postgres: postgresUrl.meta({
    examples: POSTGRES_EXAMPLES,
    description: 'Postgres URL; several hosts (h1:5432,h2:5432) with target_session_attrs=read-write: the first that takes writes is used, '
      + 'and looked for again after a failover. Empty: embedded storage.',
  }),
  // A pooler in transaction mode (PgBouncer) cannot carry LISTEN: the change feed connects here.
  postgresDirect: postgresUrl.meta({ examples: POSTGRES_EXAMPLES }),
  // Per instance, plus one LISTEN connection: with N instances, Postgres (or PgBouncer) must
  // accept N × (poolSize + 1) connections.
  poolSize: int(1, 1000).prefault(20),
  // CONTRACT §32: the most one statement may take; past it the request is answered 503.
  queryTimeout: duration.prefault('5s').meta({
    description: 'The most one Postgres statement may take (the client gives up, and Postgres is told to stop a little before): past it, the request is answered 503.',
  }),
  embeddedDir: z.string().default('./data'),
  redis: redisSchema,
  redisKeyPrefix: z.string().default('gw:'),
  redisTimeout: duration.prefault('100ms'),
  migrate: bool().prefault(true),
  // CONTRACT §25: at start, how long to wait for a Postgres that does not answer yet (compose,
  // Kubernetes start the database beside the gateway) before exiting 1.
  startTimeout: duration.prefault('60s').meta({
    description: 'At start, how long to wait for a Postgres that does not answer yet (refused, unreachable, starting up) before exiting 1. '
      + 'A wrong password or a missing database stops the start at once.',
  }),
}).prefault({});
