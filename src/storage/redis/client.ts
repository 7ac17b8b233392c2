// The one Redis connection of an instance: one server by URL, the master of a Sentinel group, or a
// Redis Cluster (CONTRACT §9). Every caller has a Postgres-only or in-process fallback, so the
// connection is set up to fail fast rather than queue: a queued request would just hang while
// Redis is away. The guards reach it through a RedisBreaker (breaker.ts).
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import type { Logger } from 'pino';
import type { RedisSettings } from '../../config/schema.js';
import { failureLog } from '../../telemetry/logThrottle.js';
import { withTimeout } from '../../time.js';

export type RedisClient = Redis | Cluster;

const PROBE_TTL_MS = 10_000;
/** How soon a client that gave up ('end') without being closed is started again. */
const RESTART_AFTER_MS = 200;

/** Clients being closed for good (closeRedis): their 'end' is final. */
const closing = new WeakSet<RedisClient>();

/** Closes the client for good (the instance is closing): QUIT lets pending replies arrive, disconnect() closes what QUIT leaves open (the sentinel subscriptions). */
export async function closeRedis(client: RedisClient): Promise<void> {
  closing.add(client);
  await client.quit().catch(() => {});
  client.disconnect();
}

export function connectRedis(settings: Exclude<RedisSettings, ''>, keyPrefix: string, log: Logger): RedisClient {
  const options: RedisOptions = {
    keyPrefix,
    // Fail commands at once while disconnected instead of queueing them (see above).
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: 2000,
    // The guards wait storage.redisTimeout at most (breaker.ts); this only bounds what the
    // client itself keeps waiting for.
    commandTimeout: 1000,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2000),
    // A server that refuses writes is a replica: after a Sentinel failover the old master is
    // demoted under our open connection (or a DNS name moved to another node). Reconnecting asks
    // the sentinels (or DNS) again, so the instance follows the new master; the command itself
    // fails, and its caller uses its fallback.
    reconnectOnError: (err) => {
      const readOnly = isReadOnlyError(err);
      if (readOnly) refusingWrites.add(client);
      return readOnly;
    },
  };
  let client: RedisClient;
  if (typeof settings === 'string') {
    client = new Redis(settings, options);
  } else if ('sentinels' in settings) {
    client = new Redis({
      ...options,
      sentinels: settings.sentinels,
      name: settings.name,
      password: settings.password,
      sentinelPassword: settings.sentinelPassword,
      // Also subscribe to the sentinels' +switch-master: the client moves at the failover itself,
      // not only at the first write the demoted node refuses.
      failoverDetector: true,
      sentinelRetryStrategy: (attempt) => Math.min(attempt * 200, 2000),
      // A sentinel that hangs (accepts, answers nothing) would keep the client waiting for the
      // master's address for good (ioredis sets no bound by default): the next sentinel is asked instead.
      sentinelCommandTimeout: 1000,
    });
  } else {
    const { enableOfflineQueue, retryStrategy, ...redisOptions } = options;
    client = new Cluster(settings.cluster, {
      enableOfflineQueue,
      clusterRetryStrategy: retryStrategy,
      // Each node's connection; keyPrefix is the cluster's too (ioredis takes it from here).
      redisOptions: { ...redisOptions, password: settings.password },
      // Redirections (MOVED after a resharding or failover) are followed, a few times at most.
      maxRedirections: 4,
    });
  }
  const connection = failureLog(log.child({ component: 'redis' }), 'Redis connection lost or refused; the guards use their fallbacks until it is back', {
    recoveredMessage: 'Redis is back (connected)',
  });
  client.on('ready', () => connection.recovered());
  // A lost connection (reconnecting: not at a close of our own) and each failed attempt.
  client.on('reconnecting', () => connection.failed('the connection is lost; reconnecting'));
  client.on('error', (err: Error) => {
    // Unreachable now (refused, reset): whatever it was, it is not a replica that answers.
    refusingWrites.delete(client);
    connection.failed(err);
  });
  client.on('end', () => {
    log.debug('Redis connection ended');
    if (client instanceof Redis) restartUnlessClosing(client, log);
  });
  return client;
}

/**
 * ioredis gives up for good (status 'end', no more reconnection) when an attempt of its Sentinel
 * connector is cut short: after a master is killed, the client asks the sentinels again and again
 * (they still name the dead master until down-after-milliseconds), and the failover detector's
 * `+switch-master` calls the connector's disconnect(); arriving while the connector waits for a
 * sentinel's answer, it makes that attempt fail with "Connection is closed", which ioredis takes
 * as final. The instance then reported Redis down until restarted (issue 72: one of two instances
 * still down 10 s after the switch, in 3 runs of 7). An end that is not ours is a connection to
 * make again.
 */
function restartUnlessClosing(client: Redis, log: Logger): void {
  setTimeout(() => {
    if (closing.has(client) || client.status !== 'end') return;
    log.warn('Redis: the client gave up reconnecting; connecting again');
    client.connect().catch(() => { /* failed again: its own 'end' or retries follow */ });
  }, RESTART_AFTER_MS).unref();
}

/**
 * Proves the server takes writes, as the guards need: a key with a short expiry. PING would
 * answer "ok" from a demoted master (READONLY), and from a Cluster node reached by a plain URL
 * (MOVED for most keys); this fails for both, and for a Cluster that is down (CLUSTERDOWN).
 */
export async function probeRedis(client: RedisClient): Promise<void> {
  await client.set('probe', '1', 'PX', PROBE_TTL_MS);
  refusingWrites.delete(client);
  // One key can live on the very node a plain URL names; the others would answer MOVED.
  if (await isClusterNodeByUrl(client)) throw new Error(CLUSTER_NODE_BY_URL);
}

/**
 * Clients whose last write was refused with READONLY (a replica, a demoted master). Each such
 * refusal reconnects (reconnectOnError), and while it does every command fails at once like an
 * unreachable server: this remembers what the server said, so /readyz can report "readonly"
 * rather than "down" (CONTRACT §25). Forgotten at the next write taken or connection error.
 */
const refusingWrites = new WeakSet<RedisClient>();

export function isReadOnlyError(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith('READONLY');
}

/** Whether Redis answered its last refused write with READONLY, and has taken none since. */
export function refusesWrites(client: RedisClient): boolean {
  return refusingWrites.has(client);
}

export const CLUSTER_NODE_BY_URL = 'storage.redis names one node of a Redis Cluster, which answers MOVED for most keys: configure it as `redis: { cluster: [...] }`';

/** Whether a plain connection (a URL, a Sentinel master) reached a node of a Redis Cluster. */
export async function isClusterNodeByUrl(client: RedisClient): Promise<boolean> {
  return client instanceof Redis && /^cluster_enabled:1\b/m.test(await client.info('cluster'));
}

/** The master nodes that hold keys: the one server, or each master of a Cluster (SCAN covers one node). */
export function masterNodes(client: RedisClient): Redis[] {
  return client instanceof Cluster ? client.nodes('master') : [client];
}

/**
 * Resolves once Redis is ready or `ms` have passed, whichever comes first. A Cluster connects to
 * each master on its first command: done here, so that the first requests do not pay for it.
 */
export async function waitReady(redis: RedisClient, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  if (redis.status !== 'ready') {
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        redis.off('ready', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      redis.once('ready', done);
    });
  }
  if (redis instanceof Cluster && redis.status === 'ready') {
    await withTimeout(Promise.all(redis.nodes('master').map((node) => node.ping())), Math.max(deadline - Date.now(), 0)).catch(() => {});
  }
}
