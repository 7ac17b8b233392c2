// What every cache the change feed keeps fresh shares (issue 73: IdentityCache and MembershipCache
// repeated it): it listens to the feed's events, forgets everything when the feed stops or resumes
// being trusted (changes may have gone unheard), is bypassed while the feed is not trusted, and
// counts its changes in a generation, so that a row read from the database while a change was
// heard is returned but not kept: the change, racing the read, cannot be overwritten by it.
import type { ChangeFeed, ChangeHandlers } from './changeFeed.js';

/** The events a cache listens to itself; trust lost and regained are the base's. */
export type CacheHandlers = Omit<Partial<ChangeHandlers>, 'resumed' | 'interrupted'>;

export abstract class FeedCache {
  // Bumped on every change heard and every change of the feed's trust.
  private generation = 0;

  constructor(private readonly feed: ChangeFeed) {}

  /** Whether cached entries may be used: the feed provably delivers every change. */
  get isLive(): boolean {
    return this.feed.trusted;
  }

  /** Called once by the subclass's constructor, its fields made: what each event forgets. */
  protected listen(handlers: CacheHandlers): void {
    this.feed.subscribe({ ...handlers, resumed: () => this.forgetAll(), interrupted: () => this.forgetAll() });
  }

  /** Drops every entry (the subclass's maps). */
  protected abstract clear(): void;

  protected forgetAll(): void {
    this.generation++;
    this.clear();
  }

  /** Before an entry is dropped: a read under way will not keep what it read. */
  protected changed(): void {
    this.generation++;
  }

  /** `load`'s value, kept by `keep` only if the feed is trusted and no change was heard meanwhile. */
  protected async readThrough<T>(load: () => Promise<T>, keep: (value: T) => void): Promise<T> {
    const generation = this.generation;
    const value = await load();
    if (this.isLive && generation === this.generation) keep(value);
    return value;
  }
}
