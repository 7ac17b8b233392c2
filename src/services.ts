// Everything one gateway instance holds: storage connections, caches, guards, route table.
// Built once by server.ts (or a test) and handed to buildApp; closed in reverse order.
import { Redis } from 'ioredis';
import type { JWK } from 'jose';
import type { Logger } from 'pino';
import type { Config } from './config/schema.js';
import { openDatabase, type Database } from './storage/db.js';
import { migrate } from './storage/migrations.js';
import { createTokens, type Tokens } from './auth/tokens.js';
import { IdentityCache } from './guards/identityCache.js';
import { ApiKeyUsage } from './guards/apiKeyUsage.js';
import { DailyLimiter } from './guards/dailyLimit.js';
import { RouteTable } from './proxy/routeTable.js';
import { createMetrics, type Metrics } from './admin/metrics.js';
import { AssertionKeyring } from './assertion/keyring.js';
import { AssertionSigner } from './assertion/signer.js';
import { WebhookEvents } from './pro/deliveries.js';
import type { User } from './storage/users.js';
import type { AuthMethod } from './guards/authenticate.js';

export interface Assertions {
  headerFor(user: User, method: AuthMethod, upstreamName: string): Promise<Record<string, string>>;
}

/** Webhook events (pro/): queued for delivery, never awaited by the request that caused them. */
export interface Events {
  emit(userId: number, type: string, data: Record<string, unknown>): void;
}

export interface Services {
  config: Config;
  db: Database;
  redis: Redis | null;
  clock: () => Date;
  log: Logger;
  tokens: Tokens;
  identities: IdentityCache;
  keyUsage: ApiKeyUsage;
  daily: DailyLimiter;
  /** Replaced as a whole on reload; requests in flight keep the table they matched. */
  routes: RouteTable;
  metrics: Metrics;
  assertions?: Assertions;
  /** Public keys of the upstream assertion signer, for /.well-known/jwks.json. */
  assertionKeys?: () => Promise<JWK[]>;
  events?: Events;
  close(): Promise<void>;
}

export interface ServiceOptions {
  log: Logger;
  clock?: () => Date;
  /** A database already opened (tests share one between two instances' worth of services). */
  db?: Database;
  defaultMetrics?: boolean;
}

export function connectRedis(url: string, keyPrefix: string, log: Logger): Redis {
  const redis = new Redis(url, {
    keyPrefix,
    // Fail commands at once while disconnected instead of queueing them: every caller has a
    // Postgres-only or in-process fallback, and a queued request would just hang.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: 2000,
    commandTimeout: 1000,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2000),
  });
  let wasReady = false;
  redis.on('ready', () => {
    if (wasReady) log.info('Redis is back');
    wasReady = true;
  });
  redis.on('error', (err) => log.debug({ err }, 'Redis connection error'));
  redis.on('end', () => log.debug('Redis connection ended'));
  return redis;
}

async function waitReady(redis: Redis, ms: number): Promise<void> {
  if (redis.status === 'ready') return;
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

export async function createServices(config: Config, options: ServiceOptions): Promise<Services> {
  const { log } = options;
  const clock = options.clock ?? (() => new Date());
  const ownsDb = !options.db;
  const db = options.db ?? (await openDatabase(config.storage));
  const closers: Array<() => Promise<unknown>> = [];
  if (ownsDb) closers.push(() => db.close());
  try {
    if (config.storage.migrate) {
      const applied = await migrate(db);
      if (applied.length) log.info({ applied }, 'migrations applied');
    }
    let redis: Redis | null = null;
    if (config.storage.redis) {
      const r = connectRedis(config.storage.redis, config.storage.redisKeyPrefix, log);
      redis = r;
      closers.push(() => r.quit().catch(() => r.disconnect()));
      // Start without Redis if it is not there yet: the guards work on Postgres alone meanwhile.
      await waitReady(r, 2000);
      if (r.status !== 'ready') log.warn('Redis is not answering; daily limits are counted in Postgres alone until it is');
    }
    const tokens = await createTokens(config.auth, db, clock, (message) => log.warn(message));
    const identities = new IdentityCache(db, log);
    await identities.start();
    closers.push(() => identities.close());
    const keyUsage = new ApiKeyUsage(db, log);
    closers.push(() => keyUsage.close());
    // Upstream assertions (CONTRACT §3): one Ed25519 key shared by all instances through the database.
    const keyring = new AssertionKeyring(db, clock, log);
    await keyring.start();
    closers.push(() => keyring.close());
    const services: Services = {
      config, db, redis, clock, log, tokens, identities, keyUsage,
      daily: new DailyLimiter(db, redis, config.plans.freeDailyLimit, clock, log),
      routes: new RouteTable(config),
      metrics: createMetrics({ defaultMetrics: options.defaultMetrics }),
      assertions: new AssertionSigner(keyring, clock, config.auth.jwt.issuer),
      assertionKeys: async () => keyring.publicJwks(),
      async close() {
        for (const close of closers.reverse()) await close().catch((err: unknown) => log.warn({ err }, 'error while closing'));
      },
    };
    services.metrics.observeIdentityCache(identities.stats);
    // services.daily, not the limiter made above: a reload may replace it.
    identities.onDailyUsageReset = (userId) => void (userId === 'all' ? services.daily.forgetToday('the users table was emptied') : services.daily.forget(userId));
    // Those announcements reach Redis only through an instance that hears them and reaches Redis at
    // that moment. One made while none did (LISTEN connection lost, Redis unreachable, no instance
    // running) would leave a gate refusing all day a user Postgres admits: check today's gates
    // against Postgres whenever this instance starts, hears Postgres again or reaches Redis again.
    identities.onNotificationsMissed = () => void services.daily.reconcileToday('the LISTEN connection is back');
    redis?.on('ready', () => void services.daily.reconcileToday('Redis is back'));
    void services.daily.reconcileToday('instance started');
    const events = new WebhookEvents({ db, config: config.webhooks, clock, log, metrics: services.metrics });
    services.events = events;
    closers.push(() => events.close());
    return services;
  } catch (err) {
    for (const close of closers.reverse()) await close().catch(() => {});
    throw err;
  }
}
