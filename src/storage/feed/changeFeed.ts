// The one owner of Postgres' change notifications: a single LISTEN connection per instance, its
// reconnection and heartbeat, and typed events that the caches subscribe to.
// Triggers announce every change that a cache in memory must not miss, however it was made (admin
// API, CLI, or SQL run by hand): 001 and 005 a user's plan, active flag or email, a user deleted,
// and an API key created or revoked (a deleted user's keys included), 031 a membership or an
// organization's plan, 003 an assertion key
// rotation, 004 a daily count lowered by hand, 006 a TRUNCATE of users or api_tokens and a user id
// that comes into being, 009 an email verified, 010 a webhook message due now that nobody holds,
// 038 the cost classes of imported password hashes.
// While the connection is down, notifications are lost, so subscribers are told (interrupted) and
// must not trust what they cached; when it is back they are told again (resumed) and must assume
// they missed something. A connection can also die without a reset (partition, failover) and the
// client would not notice for hours: a heartbeat NOTIFY sent through the pool must come back on
// the LISTEN connection, or the feed counts as interrupted. The heartbeat is the fleet's, one for
// all instances (migration 011): an idle instance costs the same whatever the fleet's size.
import type { Logger } from 'pino';
import type { Database } from '../database/db.js';

const CHANNELS = {
  user: 'gw_user_changed',
  apiKey: 'gw_api_token_changed',
  dailyUsageReset: 'gw_daily_usage_reset',
  truncated: 'gw_identities_truncated',
  assertionKeys: 'gw_assertion_keys_changed',
  jwtKeys: 'gw_jwt_keys_changed',
  webhookDue: 'gw_webhook_due',
  org: 'gw_org_changed',
  importedHashCosts: 'gw_imported_hash_costs_changed',
} as const;

const HEARTBEAT_CHANNEL = 'gw_heartbeat';
/** Notified by `gateway keys rotate-jwt` in its transaction (credentials/jwtSecrets.ts): no table trigger, no migration. */
export const JWT_KEYS_CHANNEL = CHANNELS.jwtKeys;

// Interrupted once two heartbeats committed by Postgres (one per timer tick) have not been heard:
// 400–600 ms, well under the one second a change may take to reach every instance (CONTRACT §4),
// with room for a loaded machine (three took 780 ms on a busy two-core one, too close to that second). Counted by
// number, not "any heard lately": a connection that delivers everything, but seconds late, hears
// some older beat all the time, and would be trusted while serving every change that late. Ticks,
// not elapsed time: a busy event loop that has not read the answers yet is not a dead connection.
// A beat still waiting for a pool connection does not count, so a congested pool alone cannot
// turn the caches off and add load.
const HEARTBEAT_EVERY_MS = 200;
const HEARTBEATS_MISSED = 2;
// Every instance asks every tick; whichever finds the last beat at least this old sends the next
// one (one UPDATE wins, the others see its row and send nothing), so the fleet beats about every
// tick, and each instance reads the latest seq committed in the same statement.
const BEAT_GAP_MS = 150;
const BEAT = `WITH beat AS (
    UPDATE gateway_heartbeat SET seq = seq + 1, beat_at = clock_timestamp()
     WHERE id = 1 AND beat_at < clock_timestamp() - interval '${BEAT_GAP_MS} milliseconds'
    RETURNING seq
  ), sent AS (SELECT pg_notify('${HEARTBEAT_CHANNEL}', seq::text) FROM beat)
  SELECT greatest((SELECT seq FROM beat), (SELECT seq FROM gateway_heartbeat WHERE id = 1))::text AS seq,
         (SELECT count(*) FROM sent)::int AS sent`;

/**
 * Gateway processes serving from this database now (workers counted one by one): each holds one
 * change-feed connection, whose last statement is always a LISTEN on one of our channels (the
 * ping repeats one). Not its application_name: an operator's in the URL would replace any we
 * set. Embedded storage is one process's by construction.
 */
export async function countInstances(db: Database): Promise<number> {
  if (db.kind === 'embedded') return 1;
  const [row] = await db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query LIKE $1',
    ['LISTEN "gw\\_%'],
  );
  return row?.n ?? 0;
}

export interface ChangeHandlers {
  /**
   * A user's plan, active flag, email or email verification changed, or the id came into being or
   * went: a deleted account (DELETE /api/v1/user/me, the admin API, `gateway users delete`, SQL)
   * is announced here too. Whatever holds something of a user beyond one request, such as the
   * open WebSockets of CONTRACT §10, subscribes and asks IdentityCache.activeUser(id) again:
   * undefined means the user is gone or inactive, and its connections must close.
   */
  userChanged(userId: number): void;
  /** An API key was created or revoked (its hash). */
  apiKeyChanged(keyHash: string): void;
  /** A user's daily count was lowered by hand. */
  dailyUsageReset(userId: number): void;
  /** An organization's pooled daily or monthly count was lowered (035_org_pooled_counters.sql). */
  orgUsageReset(orgId: number): void;
  /** A table was emptied (TRUNCATE): `users` or `api_tokens`. */
  truncated(table: string): void;
  assertionKeysChanged(): void;
  /** The database-kept token secret was rotated, or the previous one dropped. */
  jwtKeysChanged(): void;
  /**
   * An organization's memberships, roles or plan changed, or it went (031_org_changed.sql): its id;
   * undefined after a TRUNCATE (every organization).
   */
  orgChanged(orgId: number | undefined): void;
  /** The cost classes of the imported password hashes changed (038_imported_hash_costs.sql). */
  importedHashCostsChanged(): void;
  /** A webhook message may be attempted now and nobody holds it (new, or handed back at a shutdown). */
  webhookDue(): void;
  /** The feed can be trusted again; changes made meanwhile may have been missed. */
  resumed(): void;
  /** The feed can no longer be trusted: changes may go unheard until resumed(). */
  interrupted(): void;
}

export class ChangeFeed {
  private readonly subscribers = new Set<Partial<ChangeHandlers>>();
  private live = false;
  private suspect = false; // listening, but our heartbeats stopped coming back
  // The fleet's heartbeats are numbered (gateway_heartbeat.seq): the last one heard, the latest one
  // known committed, and, for each tick that learnt of a newer one, that beat while unheard (in
  // order; emptied on every reconnection, after which only beats committed after LISTEN are awaited).
  private beatsHeard = 0;
  private beatsKnown: number | undefined;
  private unheard: number[] = [];
  private beating = false; // one heartbeat query at a time: a slow pool must not pile them up
  private listening = 0; // counts (re)connections: a beat read before one says nothing of it
  /** Notifications this instance received (heartbeats included): flat in the fleet's size. */
  notificationsHeard = 0;
  private heartbeat: NodeJS.Timeout | undefined;
  private stop: (() => Promise<void>) | undefined;

  constructor(private readonly db: Database, private readonly log: Logger) {}

  /** Subscribes to some of the events; returns the unsubscribe function. */
  subscribe(handlers: Partial<ChangeHandlers>): () => void {
    this.subscribers.add(handlers);
    return () => this.subscribers.delete(handlers);
  }

  /** Listening, and provably hearing what is committed: what subscribers cached may be used. */
  get trusted(): boolean {
    return this.live && !this.suspect;
  }

  async start(): Promise<void> {
    // Embedded PGlite notifies in-process: that subscription cannot be lost silently.
    const beats = this.db.kind === 'postgres';
    const channels: string[] = [...Object.values(CHANNELS), ...(beats ? [HEARTBEAT_CHANNEL] : [])];
    this.stop = await this.db.listen(channels, (channel, payload) => this.notified(channel, payload), (live) => {
      this.live = live;
      this.suspect = false;
      this.listening++;
      this.unheard = []; // beats committed before this connection listened are not awaited
      this.beatsKnown = undefined;
      if (live) {
        this.log.info('change feed: listening for user, key and daily-usage changes');
        this.emit('resumed');
      } else {
        this.log.warn('change feed: lost the LISTEN connection; caches read the database until it is back');
        this.emit('interrupted');
      }
    });
    if (beats) {
      this.heartbeat = setInterval(() => this.beat(), HEARTBEAT_EVERY_MS);
      this.heartbeat.unref();
    }
  }

  async close(): Promise<void> {
    this.live = false;
    clearInterval(this.heartbeat);
    await this.stop?.();
  }

  private notified(channel: string, payload: string): void {
    this.notificationsHeard++;
    if (channel === HEARTBEAT_CHANNEL) return this.heard(Number(payload));
    switch (channel) {
      case CHANNELS.user: return this.emit('userChanged', Number(payload));
      case CHANNELS.apiKey: return this.emit('apiKeyChanged', payload);
      case CHANNELS.dailyUsageReset:
        return payload.startsWith('org:') ? this.emit('orgUsageReset', Number(payload.slice(4))) : this.emit('dailyUsageReset', Number(payload));
      case CHANNELS.assertionKeys: return this.emit('assertionKeysChanged');
      case CHANNELS.jwtKeys: return this.emit('jwtKeysChanged');
      case CHANNELS.webhookDue: return this.emit('webhookDue');
      case CHANNELS.importedHashCosts: return this.emit('importedHashCostsChanged');
      case CHANNELS.org: return this.emit('orgChanged', payload === '*' ? undefined : Number(payload));
      case CHANNELS.truncated:
        this.log.info({ table: payload }, 'change feed: a table was emptied');
        return this.emit('truncated', payload);
    }
  }

  private emit<E extends keyof ChangeHandlers>(event: E, ...args: Parameters<ChangeHandlers[E]>): void {
    for (const handlers of this.subscribers) {
      try {
        (handlers[event] as ((...a: Parameters<ChangeHandlers[E]>) => void) | undefined)?.(...args);
      } catch (err) {
        this.log.error({ err, event }, 'change feed: a subscriber failed');
      }
    }
  }

  private beat(): void {
    if (!this.live) return;
    if (this.unheard.length >= HEARTBEATS_MISSED && !this.suspect) {
      this.suspect = true;
      this.log.warn('change feed: the LISTEN connection stopped hearing notifications; caches read the database until it does');
      this.emit('interrupted');
    }
    if (this.beating) return;
    this.beating = true;
    const connection = this.listening;
    this.db.query<{ seq: string }>(BEAT)
      .then(([row]) => {
        if (!row || connection !== this.listening) return;
        const latest = Number(row.seq);
        // The first read after LISTEN: beats up to here may have been committed before it.
        const from = this.beatsKnown ?? latest;
        // One entry per tick, the latest beat committed by then, however many instances beat
        // meanwhile: HEARTBEATS_MISSED ticks with a committed beat still unheard is what counts, as when each
        // instance had its own, so a busy event loop is not taken for a dead connection.
        // Bounded: a listener that never delivers stays distrusted with the last few just the same.
        if (latest > from && latest > this.beatsHeard && this.unheard.push(latest) > 100) this.unheard.shift();
        this.beatsKnown = Math.max(from, latest);
      }, () => { /* Postgres away: the LISTEN connection will say so */ })
      .finally(() => { this.beating = false; });
  }

  private heard(seq: number): void {
    this.beatsHeard = Math.max(this.beatsHeard, seq);
    this.unheard = this.unheard.filter((s) => s > seq);
    // An old beat heard late proves the connection delivers, not that it is up to date.
    if (!this.suspect || this.unheard.length >= HEARTBEATS_MISSED) return;
    this.suspect = false;
    this.log.info('change feed: the LISTEN connection hears notifications again');
    this.emit('resumed');
  }
}
