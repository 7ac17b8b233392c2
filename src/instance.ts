// The composition root: every part one gateway instance holds (storage connections, the change
// feed, caches, guards, the pipeline, signers, webhook deliveries), built once in dependency order
// by server.ts (or a test) and closed in reverse. Only the listeners' builders (app.ts,
// admin/app.ts) read this record, to hand each module the few parts it uses; no module takes it.
import type { Logger } from 'pino';
import type { Config } from './config/schema.js';
import { AssertionKeyring } from './credentials/assertionKeyring.js';
import { HookWriter } from './hooks/hooks.js';
import { AuditLog } from './audit.js';
import { Housekeeping } from './housekeeping.js';
import { recheckDomains, type RecheckDeps } from './domains/index.js';
import { AssertionSigner, DailyLimiter, MinuteLimiter, Pipeline, UseRefunds } from './pipeline/index.js';
import { isSingleMailbox } from './credentials/emailAddress.js';
import { DearestImportedHash, MailQueue, Passwords } from './auth/index.js';
import { TokenKeyring } from './credentials/tokenKeyring.js';
import { createTokens, type Tokens } from './credentials/tokens.js';
import { ApiKeyUsage } from './keys/index.js';
import { OwnerDenials } from './storage/usage/index.js';
import { ChangeFeed, IdentityCache, MembershipCache } from './storage/feed/index.js';
import { Live, liveSettingsOf } from './live/live.js';
import { createMetrics, type Metrics } from './telemetry/metrics.js';
import { OutboxEmitter, type Events } from './webhooks/emitter.js';
import { OutboxWorker, type DeliveryDeps } from './webhooks/outbox.js';
import { oldestPendingSeconds } from './storage/events/index.js';
import type { LookupAll } from './webhooks/ssrf.js';
import { openDatabase, type Database } from './storage/database/index.js';
import { assertMigrated, migrate } from './storage/database/migrations.js';
import { closeRedis, connectRedis, RedisBreaker, waitReady } from './storage/redis/index.js';
import { waitForPostgres } from './storage/database/startWait.js';
import { emailsToRecheck } from './storage/accounts/index.js';
import { Tracing, tracingSettings } from './telemetry/tracing.js';
import type { FleetLink } from './fleet/workerLink.js';
import { mailWordsOf, type MailWords } from './mail/index.js';
import { errorStyleOf, type ErrorStyle } from './errors/index.js';
import { Billing, type BillingDeps } from './billing/billing.js';
import { StripeGateway } from './billing/stripe.js';
import { isStripeDouble } from './config/schema/billing.js';
import { MeterReporter, meterEventSender, METER_EVENT_TYPE } from './billing/meterReporter.js';

/** Where the instance is in its life: told by server.ts, read by readiness and every response. */
export interface Lifecycle {
  /** Shutting down: /readyz answers 503 and responses close their connection. */
  draining: boolean;
}

export interface Instance {
  lifecycle: Lifecycle;
  /** The configuration the instance started with: what a reload does not change. */
  config: Config;
  /** What a reload may change (routes, upstreams, limits): a request pins `live.current` once (requestContext.ts). */
  live: Live;
  db: Database;
  /** The Redis connection behind the breaker every guard's command goes through; null without Redis. */
  redis: RedisBreaker | null;
  clock: () => Date;
  log: Logger;
  feed: ChangeFeed;
  tokens: Tokens;
  /** Password hashing: the instance's hasher child and its queue. */
  passwords: Passwords;
  identities: IdentityCache;
  /** Memberships and roles in memory (CONTRACT §22); only with organizations.enabled. */
  memberships: MembershipCache | undefined;
  keyUsage: ApiKeyUsage;
  /** Quota refusals per owner and day (CONTRACT §30's usage), flushed once a second. */
  denials: OwnerDenials;
  daily: DailyLimiter;
  /** Counted uses given back when the upstream failed them (CONTRACT §23, plans.refundOn). */
  refunds: UseRefunds;
  keyring: AssertionKeyring;
  pipeline: Pipeline;
  metrics: Metrics;
  /** Webhook events, stored in the outbox with the change that causes them. */
  events: Events;
  /** The outbox worker's one seam, for tests and operators' health: settled(), a claim pass begun after the call, finished. */
  deliveries: Pick<OutboxWorker, 'settled'>;
  /** Account mails (reset and verification links), sent off the request path. */
  mailer: MailQueue;
  /** The audit log: account events, in the transactions of their changes. */
  audit: AuditLog;
  /** Hourly purge of expired single-use tokens. */
  housekeeping: Housekeeping;
  /** Traces, when telemetry.otlp (or OTEL_EXPORTER_OTLP_ENDPOINT) names a collector. */
  tracing: Tracing | undefined;
  /** How answers read (CONTRACT §20): codes, problem details, languages, the operator's texts. */
  errorStyle: ErrorStyle;
  /** The account mails' words: built-in texts and mail.templates (mail/). */
  mailWords: MailWords;
  /** In a worker (server.workers > 1): the primary, which gathers /metrics and /readyz of every worker. */
  fleet?: FleetLink;
  /** Plans that follow payment (billing.stripe, CONTRACT §23); absent without it. */
  billing?: { billing: Billing; stripe: StripeGateway; meter?: MeterReporter };
  close(): Promise<void>;
}

export interface InstanceOptions {
  log: Logger;
  clock?: () => Date;
  /** A database already opened (tests share one between two instances' worth of parts). */
  db?: Database;
  defaultMetrics?: boolean;
  /** Test seam: how webhook hosts are resolved at delivery (tests of DNS rebinding and of a silent resolver). */
  webhookLookup?: LookupAll;
  /** Test seam: how often the clean-up of expired rows runs (housekeeping.ts; hourly). */
  housekeepingEveryMs?: number;
  /** Set in a worker of server.workers. */
  fleet?: FleetLink;
}

export async function createInstance(config: Config, options: InstanceOptions): Promise<Instance> {
  const { log } = options;
  const clock = options.clock ?? (() => new Date());
  const closers: Closers = [];
  const closeAll = async (onError: (err: unknown) => void) => {
    for (const close of closers.reverse()) await close().catch(onError);
  };
  try {
    const db = await openMigratedDatabase(config, options, closers);
    const redis = config.storage.redis ? await connectRedisBreaker(config.storage, log, closers) : null;

    const live = new Live(liveSettingsOf(config));
    const metrics = createMetrics({ defaultMetrics: options.defaultMetrics });
    const feed = new ChangeFeed(db, log);
    closers.push(() => feed.close());
    // Subscribers first, then the feed: its first "resumed" is their start signal.
    const identities = new IdentityCache(db, feed);
    metrics.observeIdentityCache(identities.stats);
    const daily = new DailyLimiter({ db, redis, feed, clock, log, config: () => live.current.settings });
    metrics.observeInDoubt({ commits: db.stats, uses: daily.stats });
    closers.push(() => daily.close()); // hands back the uses it reserved, before the pool closes
    const refunds = new UseRefunds({ db, forget: (counter) => daily.forget(counter), clock, log });
    const keyring = new AssertionKeyring(db, feed, clock, log);
    // Webhook deliveries (the outbox worker): closed before the feed and the pool, so it can hand
    // back the attempts a shutdown cuts short.
    const tracing = startTracing(config, metrics, log, closers, clock);
    const errorStyle = await errorStyleOf(config.errors);
    const mailWords = await mailWordsOf(errorStyle, config.mail);
    // The Stripe client first: the outbox sends the meter events of billing.stripe.meter (CONTRACT §23).
    const stripe = stripeOf(config, log);
    const outbox = new OutboxWorker({
      db, feed, config: config.webhooks, clock, log, metrics, lookup: options.webhookLookup, tracing, hooks: () => live.current.settings.hooks, handlers: outboxHandlers(config, stripe),
    });
    closers.push(() => outbox.close());
    outbox.start();
    const events = new OutboxEmitter({ db, config: config.webhooks, clock });
    // hooks: as the live configuration has it (SIGHUP changes it, CONTRACT §24).
    const hooks = new HookWriter({ db, config: () => live.current.settings.hooks, retries: config.webhooks.retries, clock });
    const audit = new AuditLog({ db, clock, log, retentionMs: config.audit.retention, hooks });
    const billing = billingOf(config, stripe, { db, audit, identities, clock, log, plans: () => live.current.settings.plans }, () => longestUpstreamMs(live.current.settings.upstreams), closers);
    const minutely = billing ? [{ name: 'billing grace', run: () => billing.billing.endGraces() }] : [];
    metrics.observe({ outboxAge: () => oldestPendingSeconds(db), meterReported: () => billing?.meter?.lastPassAt });
    const housekeeping = new Housekeeping({ db, clock, log, audit, everyMs: options.housekeepingEveryMs, minutely, hourly: hourlyTasks(config, { db, audit, clock, log }) });
    closers.push(() => housekeeping.close());
    await feed.start();

    const passwords = new Passwords();
    closers.push(async () => passwords.close());
    // The dearest imported hash a failed login is padded with (CONTRACT §27): in memory, kept current by the feed.
    const dearestImported = new DearestImportedHash({ db, feed, passwords, log });
    await dearestImported.start();
    closers.push(() => dearestImported.close());
    // Access and refresh token keys (CONTRACT §25): rotations of the stored secret heard through the feed.
    const warn = (message: string) => log.warn(message);
    const tokenKeys = new TokenKeyring({ jwt: config.auth.jwt, refreshTokenTtlMs: config.auth.refreshTokenTtl, db, warn, feed });
    await tokenKeys.start();
    closers.push(() => tokenKeys.close());
    const tokens = await createTokens(config.auth, db, clock, warn, tokenKeys);
    const keyUsage = new ApiKeyUsage(db, log);
    closers.push(() => keyUsage.close());
    const denials = new OwnerDenials(db, log);
    closers.push(() => denials.close());
    // Upstream assertions (CONTRACT §3): one Ed25519 key shared by all instances through the database.
    await keyring.start();
    closers.push(() => keyring.close());
    const mailer = new MailQueue(config.mail, log);
    closers.push(() => mailer.close());
    const memberships = config.organizations?.enabled ? new MembershipCache(db, feed) : undefined;
    const pipeline = pipelineOf(config, { tokens, identities, clock, keyUsage, denials, daily, redis, keyring, tallies: metrics.tallies, memberships });

    return {
      lifecycle: { draining: false }, config, live, db, redis, clock, log, feed, tokens, passwords, identities, memberships, keyUsage, denials, daily, refunds, keyring, pipeline,
      metrics, events, deliveries: outbox, mailer, audit, housekeeping, tracing, errorStyle, mailWords, fleet: options.fleet, billing,
      close: () => closeAll((err) => log.warn({ err }, 'error while closing')),
    };
  } catch (err) {
    await closeAll(() => {});
    throw err;
  }
}

type Closers = Array<() => Promise<unknown>>;

/** billing.stripe's client; a test double (gateway stripe-fake, a mock) is said out loud at every start: no real payment reaches this gateway. */
function stripeOf(config: Config, log: Logger): StripeGateway | undefined {
  if (!config.billing) return undefined;
  const { apiBase } = config.billing.stripe;
  if (isStripeDouble(apiBase)) log.warn({ apiBase }, `billing: Stripe is a test double at ${apiBase} (billing.stripe.apiBase): no real payment is seen`);
  return new StripeGateway(config.billing.stripe);
}

/** Spans over OTLP when telemetry.otlp is set; closed after the listeners and the outbox worker (closers run in reverse), so the last spans go out. */
function startTracing(config: Config, metrics: Metrics, log: Logger, closers: Closers, clock: () => Date): Tracing | undefined {
  const traced = tracingSettings(config.telemetry.otlp);
  if (!traced) return undefined;
  const tracing = new Tracing(traced, clock);
  closers.push(() => tracing.close());
  metrics.observeTracing(tracing.stats);
  log.info({ endpoint: traced.endpoint, serviceName: traced.serviceName, sampleRatio: traced.sampleRatio }, 'tracing: spans exported over OTLP/HTTP');
  return tracing;
}

interface PipelineParts {
  tokens: Tokens;
  identities: IdentityCache;
  clock: () => Date;
  keyUsage: ApiKeyUsage;
  denials: OwnerDenials;
  daily: DailyLimiter;
  redis: Instance['redis'];
  keyring: AssertionKeyring;
  tallies: Instance['metrics']['tallies'];
  memberships: MembershipCache | undefined;
}

/** The public request's decision (pipeline/), from the instance's parts. */
function pipelineOf(config: Config, parts: PipelineParts): Pipeline {
  const { tokens, identities, clock, keyUsage, denials, daily, redis, keyring, tallies, memberships } = parts;
  return new Pipeline({
    auth: { tokens, identities, clock, keyPrefix: config.apiKeys.prefix },
    keyUsage,
    denials,
    daily,
    minute: new MinuteLimiter(redis, clock),
    assertions: new AssertionSigner(keyring, clock, config.auth.jwt.issuer),
    tallies,
    forwardExternalId: config.import.forwardExternalId,
    // CONTRACT §22: Gateway-Org is read only while organizations are enabled.
    orgs: memberships ? { memberships } : undefined,
  });
}

/** The database, waited for, migrated (or checked to be), with the odd-address scan started. */
async function openMigratedDatabase(config: Config, options: InstanceOptions, closers: Closers): Promise<Database> {
  const { log } = options;
  // A Postgres that is not up yet is waited for (storage.startTimeout), not a reason to exit at once.
  if (!options.db && config.storage.postgres) await waitForPostgres(config.storage.postgres, config.storage.startTimeout, log);
  // CONTRACT §32: a COMMIT sent whose answer was lost (a failover), or answered with the standby
  // warning (storage/database/failures.ts), is said once each, with /metrics' count.
  const inDoubt = 'Postgres: a COMMIT was sent and its answer lost, or it was not confirmed by the synchronous standby; '
    + 'the transaction may or may not outlive a failover (gateway_storage_in_doubt_commits_total)';
  const db = options.db ?? (await openDatabase(config.storage, (err) => log.warn({ err }, inDoubt)));
  if (!options.db) closers.push(() => db.close());
  if (config.storage.migrate) {
    const applied = await migrate(db);
    if (applied.length) log.info({ applied }, 'migrations applied');
  } else await assertMigrated(db);
  // Off the start path (a scan of the odd-looking addresses); closing waits for it.
  const emailCheck = reportUnfitEmails(db, log);
  closers.push(() => emailCheck);
  return db;
}

/** Redis behind its breaker; a Redis not there yet is no reason to wait: the guards count in Postgres meanwhile. */
async function connectRedisBreaker(storage: Config['storage'], log: Logger, closers: Closers): Promise<RedisBreaker> {
  const r = connectRedis(storage.redis, storage.redisKeyPrefix, log);
  closers.push(() => closeRedis(r));
  await waitReady(r, 2000);
  if (r.status !== 'ready') log.warn('Redis is not answering; daily limits are counted in Postgres alone until it is');
  const breaker = new RedisBreaker(r, { timeoutMs: storage.redisTimeout, log });
  closers.push(async () => breaker.close());
  return breaker;
}

/** The Stripe client and what applies its events, when billing.stripe is set. */
type BillingParts = Pick<BillingDeps, 'db' | 'audit' | 'clock' | 'log' | 'plans'> & { identities: IdentityCache };
function billingOf(config: Config, stripe: StripeGateway | undefined, deps: BillingParts, longestUpstream: () => number, closers: Closers): Instance['billing'] {
  if (!config.billing || !stripe) return undefined;
  const billing = new Billing({ ...deps, stripe, config: config.billing.stripe, forgetUser: (id) => deps.identities.forgetUser(id) });
  const eventName = config.billing.stripe.meter;
  const meter = eventName ? new MeterReporter({ db: deps.db, eventName, longestUpstreamMs: longestUpstream, log: deps.log }) : undefined;
  if (meter) {
    meter.start();
    closers.push(() => meter.close()); // before the outbox worker and the pool
  }
  return { billing, stripe, meter };
}

/** The outbox messages not posted to a user's webhook: billing's meter events, with billing.stripe.meter. */
function outboxHandlers(config: Config, stripe: StripeGateway | undefined): DeliveryDeps['handlers'] {
  return stripe && config.billing?.stripe.meter ? { [METER_EVENT_TYPE]: meterEventSender(stripe) } : undefined;
}

/** The longest upstream timeout: a use's refund is decided within it. */
function longestUpstreamMs(upstreams: Config['upstreams']): number {
  return Math.max(0, ...Object.values(upstreams).map((u) => u.timeout));
}

/** The sweep's tasks: the domains' daily re-check with organizations.sso (CONTRACT §31). */
function hourlyTasks(config: Config, deps: Omit<RecheckDeps, 'resolvers'>): Array<{ name: string; run: () => Promise<unknown> }> {
  const sso = config.organizations?.enabled ? config.organizations.sso : undefined;
  return sso ? [{ name: 'domain re-check', run: () => recheckDomains({ ...deps, resolvers: sso.dns.resolvers }) }] : [];
}

/**
 * Warns, once at start, of accounts stored with an address that is not a single mailbox (saved
 * before CONTRACT §19): they get no mail until an operator fixes them. Ids only: an address is
 * personal data.
 */

async function reportUnfitEmails(db: Database, log: Logger): Promise<void> {
  try {
    const unfit = (await emailsToRecheck(db, 10_000)).filter((u) => !isSingleMailbox(u.email)).map((u) => u.id);
    if (unfit.length) log.warn({ userIds: unfit.slice(0, 100), count: unfit.length }, 'accounts whose email is not a single mailbox get no mail until an operator fixes the address');
  } catch (err) {
    log.warn({ err }, 'could not check stored emails');
  }
}
