// Who a bearer's `sub` or an API key names, served from memory on the hot path.
// Freshness comes from the change feed (storage/feed/changeFeed.ts): every change to a user's plan,
// active flag or email, and every key created or revoked, however it was made, drops the entry on
// every instance. While the feed cannot be trusted, changes may go unheard, so the cache is bypassed.
// How (trust, forgetting, a read racing a change) is FeedCache's (feedCache.ts), shared with MembershipCache.
import { LRUCache } from 'lru-cache';
import type { ChangeFeed } from './changeFeed.js';
import { FeedCache } from './feedCache.js';
import type { Database } from '../database/db.js';
import { findById, type User } from '../accounts/users.js';
import { findKey, type KeyRecord } from '../keys/apiKeys.js';
import { untraced, type StoreCall, type StoreCalls } from '../../telemetry/storeCalls.js';

const SELECT_USER: StoreCall = { system: 'postgresql', operation: 'SELECT', collection: 'users' };
const SELECT_KEY: StoreCall = { system: 'postgresql', operation: 'SELECT', collection: 'api_tokens' };

const MAX_ENTRIES = 100_000;
// Hashes that matched no key: a client spraying made-up keys must not cost a query each. Kept
// apart from the known keys so that such a client cannot evict them; a key that comes into being
// is announced on the feed (005_api_token_appeared.sql) and drops its hash from here.
const MAX_UNKNOWN_KEYS = 10_000;

export interface CacheStats {
  hits: number;
  misses: number;
}

export class IdentityCache extends FeedCache {
  // { missing } = "no active user with this id", and why: cached too, so a deleted user's tokens cost no query.
  private readonly users = new LRUCache<number, User | { missing: 'gone' | 'inactive' }>({ max: MAX_ENTRIES });
  private readonly keys = new LRUCache<string, KeyRecord>({ max: MAX_ENTRIES });
  private readonly unknownKeys = new LRUCache<string, true>({ max: MAX_UNKNOWN_KEYS });
  readonly stats: CacheStats = { hits: 0, misses: 0 };

  constructor(private readonly db: Database, feed: ChangeFeed) {
    super(feed);
    this.listen({
      userChanged: (id) => this.forgetUser(id),
      apiKeyChanged: (hash) => this.forgetKey(hash),
      truncated: () => this.forgetAll(),
    });
  }

  protected clear(): void {
    this.users.clear();
    this.keys.clear();
    this.unknownKeys.clear();
  }

  /** The active user with this id, or undefined; `calls` traces the lookup a miss makes. */
  async activeUser(id: number, calls: StoreCalls = untraced): Promise<User | undefined> {
    const found = await this.user(id, calls);
    return typeof found === 'string' ? undefined : found;
  }

  /** The active user, or why there is none: `inactive` (deactivated) or `gone` (no such user). */
  user(id: number, calls: StoreCalls = untraced): User | 'gone' | 'inactive' | Promise<User | 'gone' | 'inactive'> {
    const cached = this.isLive ? this.users.get(id) : undefined;
    if (cached) {
      this.stats.hits++;
      return 'missing' in cached ? cached.missing : cached;
    }
    this.stats.misses++;
    return this.userFromDatabase(id, calls);
  }

  private userFromDatabase(id: number, calls: StoreCalls): Promise<User | 'gone' | 'inactive'> {
    return this.readThrough(
      async () => {
        const row = await calls(SELECT_USER, () => findById(this.db, id));
        return !row ? 'gone' : row.is_active === 1 ? row : 'inactive';
      },
      (found) => this.users.set(id, typeof found === 'string' ? { missing: found } : found),
    );
  }

  /** The id of the user owning this non-revoked key hash (active or not: see activeUser), or undefined. */
  async keyOwner(keyHash: string, calls: StoreCalls = untraced): Promise<number | undefined> {
    return (await this.key(keyHash, calls))?.userId;
  }

  /** This non-revoked key (its owner active or not, expired or not: the guard decides), or undefined. */
  async key(keyHash: string, calls: StoreCalls = untraced): Promise<KeyRecord | undefined> {
    if (this.isLive) {
      const cached = this.keys.get(keyHash);
      if (cached !== undefined || this.unknownKeys.has(keyHash)) {
        this.stats.hits++;
        return cached;
      }
    }
    this.stats.misses++;
    return this.readThrough(
      () => calls(SELECT_KEY, () => findKey(this.db, keyHash)),
      (record) => (record === undefined ? this.unknownKeys.set(keyHash, true) : this.keys.set(keyHash, record)),
    );
  }

  /** Local changes take effect at once here; the feed carries them to the other instances. */
  forgetUser(id: number): void {
    this.changed();
    this.users.delete(id);
  }

  forgetKey(keyHash: string): void {
    this.changed();
    this.keys.delete(keyHash);
    this.unknownKeys.delete(keyHash);
  }
}
