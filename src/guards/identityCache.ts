// Who a bearer's `sub` or an API key names, served from memory on the hot path.
// Freshness comes from Postgres NOTIFY (triggers in migrations 001 and 005 fire on any change to a
// user's plan, active flag or email, and on any key created or revoked, however it was made; 006
// on a TRUNCATE of either table and on a user id that comes into being).
// While the LISTEN connection is down, notifications can be missed, so the cache is bypassed.
// A connection can also die without a reset (partition, failover) and the client would not
// notice for hours, serving a deactivated user from memory: a heartbeat NOTIFY sent through the
// pool must come back on the LISTEN connection, or the cache stops being trusted.
import { randomUUID } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import type { Database } from '../storage/db.js';
import { findActiveById, type User } from '../storage/users.js';
import { findKeyOwner } from '../storage/apiTokens.js';

const USER_CHANNEL = 'gw_user_changed';
const KEY_CHANNEL = 'gw_api_token_changed';
const HEARTBEAT_CHANNEL = 'gw_identity_heartbeat';
const DAILY_RESET_CHANNEL = 'gw_daily_usage_reset'; // 004_daily_usage_reset.sql
const TRUNCATED_CHANNEL = 'gw_identities_truncated'; // 006_truncate_and_reused_ids.sql
const MAX_ENTRIES = 100_000;
// Hashes that matched no key: a client spraying made-up keys must not cost a query each. Kept
// apart from the known keys so that such a client cannot evict them; a key that comes into being
// is announced on the key channel (005_api_token_appeared.sql) and drops its hash from here.
const MAX_UNKNOWN_KEYS = 10_000;
// Distrusted once three heartbeats committed by Postgres (one per timer tick) have not been heard:
// well under the one second a change may take to reach every instance (CONTRACT §4). Counted by
// number, not "any heard lately": a connection that delivers everything, but seconds late, hears
// some older beat all the time, and would be trusted while serving every change that late. Ticks,
// not elapsed time: a busy event loop that has not read the answers yet is not a dead connection.
// A beat still waiting for a pool connection does not count, so a congested pool alone cannot
// turn the cache off and add load.
const HEARTBEAT_EVERY_MS = 200;
const HEARTBEATS_MISSED = 3;

export interface CacheStats {
  hits: number;
  misses: number;
}

export class IdentityCache {
  // null = "no active user with this id": cached too, so a deleted user's tokens cost no query.
  private readonly users = new LRUCache<number, User | { missing: true }>({ max: MAX_ENTRIES });
  private readonly keys = new LRUCache<string, number>({ max: MAX_ENTRIES });
  private readonly unknownKeys = new LRUCache<string, true>({ max: MAX_UNKNOWN_KEYS });
  // Bumped on every notification and connection change. A value read from the database is cached
  // only if no bump happened during the read, so a change racing the read cannot be overwritten.
  private generation = 0;
  private live = false;
  private suspect = false; // listening, but our heartbeats stopped coming back
  // Heartbeats are numbered: the last one sent, the last one heard, and those Postgres committed
  // that have not been heard yet (in order; at most one more per tick, emptied on every reconnection).
  private beatsSent = 0;
  private beatsHeard = 0;
  private unheard: number[] = [];
  private beating = false; // one heartbeat query at a time: a slow pool must not pile them up
  private readonly beatId = randomUUID();
  private heartbeat: NodeJS.Timeout | undefined;
  private stop: (() => Promise<void>) | undefined;
  readonly stats: CacheStats = { hits: 0, misses: 0 };
  /** Told, over the same LISTEN connection, of a user whose daily count was lowered by hand ('all': the users table was emptied). */
  onDailyUsageReset: (userId: number | 'all') => void = () => {};
  /** Told when the cache trusts its LISTEN connection again: notifications, daily resets included, may have been missed. */
  onNotificationsMissed: () => void = () => {};

  constructor(private readonly db: Database, private readonly log: Logger) {}

  async start(): Promise<void> {
    // Embedded PGlite notifies in-process: that subscription cannot be lost silently.
    const beats = this.db.kind === 'postgres';
    const channels = [USER_CHANNEL, KEY_CHANNEL, DAILY_RESET_CHANNEL, TRUNCATED_CHANNEL, ...(beats ? [HEARTBEAT_CHANNEL] : [])];
    this.stop = await this.db.listen(channels, (channel, payload) => {
      if (channel === HEARTBEAT_CHANNEL) {
        const [id, seq] = payload.split(':');
        if (id === this.beatId) this.heard(Number(seq));
        return;
      }
      if (channel === DAILY_RESET_CHANNEL) {
        this.onDailyUsageReset(Number(payload));
        return;
      }
      if (channel === TRUNCATED_CHANNEL) {
        this.forgetAll();
        this.log.info({ table: payload }, 'identity cache: a table was emptied; forgot every cached user and key');
        if (payload === 'users') this.onDailyUsageReset('all');
        return;
      }
      this.generation++;
      if (channel === USER_CHANNEL) this.users.delete(Number(payload));
      else this.forgetKeyHash(payload);
    }, (live) => {
      this.forgetAll();
      this.live = live;
      this.suspect = false;
      this.unheard = []; // beats sent before this connection listened are not awaited
      if (live) {
        this.log.info('identity cache: listening for user and key changes');
        this.onNotificationsMissed();
      } else this.log.warn('identity cache: lost the LISTEN connection; reading users from the database until it is back');
    });
    if (beats) {
      this.heartbeat = setInterval(() => this.beat(), HEARTBEAT_EVERY_MS);
      this.heartbeat.unref();
    }
  }

  /** Whether cached entries may be used: listening, and the listener provably hears us. */
  get isLive(): boolean {
    return this.live && !this.suspect;
  }

  private beat(): void {
    if (!this.live) return;
    if (this.unheard.length >= HEARTBEATS_MISSED && !this.suspect) {
      this.suspect = true;
      this.forgetAll();
      this.log.warn('identity cache: the LISTEN connection stopped hearing notifications; reading users from the database until it does');
    }
    if (this.beating) return;
    this.beating = true;
    const seq = ++this.beatsSent;
    this.db.query('SELECT pg_notify($1, $2)', [HEARTBEAT_CHANNEL, `${this.beatId}:${seq}`])
      .then(() => {
        // Bounded: a listener that never delivers stays distrusted with the last few just the same.
        if (seq > this.beatsHeard && this.unheard.push(seq) > 100) this.unheard.shift();
      }, () => { /* Postgres away: the LISTEN connection will say so */ })
      .finally(() => { this.beating = false; });
  }

  private heard(seq: number): void {
    this.beatsHeard = Math.max(this.beatsHeard, seq);
    this.unheard = this.unheard.filter((s) => s > seq);
    // An old beat heard late proves the connection delivers, not that it is up to date.
    if (!this.suspect || this.unheard.length >= HEARTBEATS_MISSED) return;
    // Notifications may have been lost while it was silent: start from an empty cache.
    this.forgetAll();
    this.suspect = false;
    this.log.info('identity cache: the LISTEN connection hears notifications again');
    this.onNotificationsMissed();
  }

  private forgetAll(): void {
    this.generation++;
    this.users.clear();
    this.keys.clear();
    this.unknownKeys.clear();
  }

  private forgetKeyHash(tokenHash: string): void {
    this.keys.delete(tokenHash);
    this.unknownKeys.delete(tokenHash);
  }

  /** The active user with this id, or undefined. */
  async activeUser(id: number): Promise<User | undefined> {
    const cached = this.isLive ? this.users.get(id) : undefined;
    if (cached) {
      this.stats.hits++;
      return 'missing' in cached ? undefined : cached;
    }
    this.stats.misses++;
    const generation = this.generation;
    const user = await findActiveById(this.db, id);
    if (this.isLive && generation === this.generation) this.users.set(id, user ?? { missing: true });
    return user;
  }

  /** The id of the user owning this non-revoked key hash (active or not: see activeUser), or undefined. */
  async keyOwner(tokenHash: string): Promise<number | undefined> {
    if (this.isLive) {
      const cached = this.keys.get(tokenHash);
      if (cached !== undefined || this.unknownKeys.has(tokenHash)) {
        this.stats.hits++;
        return cached;
      }
    }
    this.stats.misses++;
    const generation = this.generation;
    const userId = await findKeyOwner(this.db, tokenHash);
    if (this.isLive && generation === this.generation) {
      if (userId === undefined) this.unknownKeys.set(tokenHash, true);
      else this.keys.set(tokenHash, userId);
    }
    return userId;
  }

  /** Local changes take effect at once here; the NOTIFY carries them to the other instances. */
  forgetUser(id: number): void {
    this.generation++;
    this.users.delete(id);
  }

  forgetKey(tokenHash: string): void {
    this.generation++;
    this.forgetKeyHash(tokenHash);
  }

  async close(): Promise<void> {
    this.live = false;
    clearInterval(this.heartbeat);
    await this.stop?.();
  }
}
