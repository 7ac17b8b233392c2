// Who a bearer's `sub` or an API key names, served from memory on the hot path.
// Freshness comes from Postgres NOTIFY (triggers in 001_initial.sql fire on any change to a
// user's plan, active flag or email, and on any key revocation, however it was made). While the
// LISTEN connection is down, notifications can be missed, so the cache is bypassed entirely.
import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import type { Database } from '../storage/db.js';
import { findActiveById, type User } from '../storage/users.js';
import { findActiveKey } from '../storage/apiTokens.js';

const USER_CHANNEL = 'gw_user_changed';
const KEY_CHANNEL = 'gw_api_token_changed';
const MAX_ENTRIES = 100_000;

export interface CacheStats {
  hits: number;
  misses: number;
}

export class IdentityCache {
  // null = "no active user with this id": cached too, so a deleted user's tokens cost no query.
  private readonly users = new LRUCache<number, User | { missing: true }>({ max: MAX_ENTRIES });
  private readonly keys = new LRUCache<string, number>({ max: MAX_ENTRIES });
  // Bumped on every notification and connection change. A value read from the database is cached
  // only if no bump happened during the read, so a change racing the read cannot be overwritten.
  private generation = 0;
  private live = false;
  private stop: (() => Promise<void>) | undefined;
  readonly stats: CacheStats = { hits: 0, misses: 0 };

  constructor(private readonly db: Database, private readonly log: Logger) {}

  async start(): Promise<void> {
    this.stop = await this.db.listen([USER_CHANNEL, KEY_CHANNEL], (channel, payload) => {
      this.generation++;
      if (channel === USER_CHANNEL) this.users.delete(Number(payload));
      else this.keys.delete(payload);
    }, (live) => {
      this.generation++;
      this.users.clear();
      this.keys.clear();
      this.live = live;
      if (live) this.log.info('identity cache: listening for user and key changes');
      else this.log.warn('identity cache: lost the LISTEN connection; reading users from the database until it is back');
    });
  }

  get isLive(): boolean {
    return this.live;
  }

  /** The active user with this id, or undefined. */
  async activeUser(id: number): Promise<User | undefined> {
    const cached = this.live ? this.users.get(id) : undefined;
    if (cached) {
      this.stats.hits++;
      return 'missing' in cached ? undefined : cached;
    }
    this.stats.misses++;
    const generation = this.generation;
    const user = await findActiveById(this.db, id);
    if (this.live && generation === this.generation) this.users.set(id, user ?? { missing: true });
    return user;
  }

  /** The id of the active user owning this non-revoked key hash, or undefined. */
  async keyOwner(tokenHash: string): Promise<number | undefined> {
    const cached = this.live ? this.keys.get(tokenHash) : undefined;
    if (cached !== undefined) {
      this.stats.hits++;
      return cached;
    }
    this.stats.misses++;
    const generation = this.generation;
    const userId = await findActiveKey(this.db, tokenHash);
    // Only hits are cached: a key created a moment ago on another instance must work at once.
    if (userId !== undefined && this.live && generation === this.generation) this.keys.set(tokenHash, userId);
    return userId;
  }

  /** Local changes take effect at once here; the NOTIFY carries them to the other instances. */
  forgetUser(id: number): void {
    this.generation++;
    this.users.delete(id);
  }

  forgetKey(tokenHash: string): void {
    this.generation++;
    this.keys.delete(tokenHash);
  }

  async close(): Promise<void> {
    this.live = false;
    await this.stop?.();
  }
}
