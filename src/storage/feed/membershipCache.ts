// Who belongs to which organization, with which role, and the organization's plan, served from
// memory on the hot path (CONTRACT §22: a request naming Gateway-Org, an organization key). Kept
// fresh as storage/feed/identityCache.ts keeps users: every membership or plan change, however it was
// made, is announced on the change feed (031_org_changed.sql) and drops the organization here on
// every instance; while the feed cannot be trusted the cache is bypassed (FeedCache, feedCache.ts).
import { LRUCache } from 'lru-cache';
import type { ChangeFeed } from './changeFeed.js';
import { FeedCache } from './feedCache.js';
import type { Database } from '../database/db.js';
import type { OrgRole } from '../orgs/organizations.js';
import { untraced, type StoreCall, type StoreCalls } from '../../telemetry/storeCalls.js';

const SELECT_MEMBERSHIP: StoreCall = { system: 'postgresql', operation: 'SELECT', collection: 'memberships' };
const MAX_ORGS = 20_000;
// Per organization: the members asked about (and non-members, so a stranger costs one query).
const MAX_USERS_PER_ORG = 10_000;

/** A user's membership as a request acting for the organization reads it. */
export interface Membership {
  orgId: number;
  role: OrgRole;
  /** The organization's plan. */
  plan: string;
}

interface OrgEntry {
  /** null: no such organization. */
  plan: string | null;
  roles: Map<number, OrgRole | null>;
}

export class MembershipCache extends FeedCache {
  private readonly orgs = new LRUCache<number, OrgEntry>({ max: MAX_ORGS });

  constructor(private readonly db: Database, feed: ChangeFeed) {
    super(feed);
    this.listen({ orgChanged: (orgId) => (orgId === undefined ? this.forgetAll() : this.forget(orgId)) });
  }

  protected clear(): void {
    this.orgs.clear();
  }

  /** The user's membership of the organization, or undefined (not a member, or no such organization). */
  async membership(orgId: number, userId: number, calls: StoreCalls = untraced): Promise<Membership | undefined> {
    const cached = this.isLive ? this.orgs.get(orgId) : undefined;
    if (cached && (cached.plan === null || cached.roles.has(userId))) return this.found(orgId, cached.plan, cached.roles.get(userId) ?? null);
    const { plan, role } = await this.readThrough(async () => {
      const [row] = await calls(SELECT_MEMBERSHIP, () => this.db.query<{ plan: string; role: OrgRole | null }>(
        'SELECT o.plan, m.role FROM organizations o LEFT JOIN memberships m ON m.org_id = o.id AND m.user_id = $2 WHERE o.id = $1',
        [orgId, userId],
      ));
      return { plan: row?.plan ?? null, role: row?.role ?? null };
    }, ({ plan, role }) => {
      let entry = this.orgs.get(orgId);
      if (!entry || entry.plan !== plan) entry = { plan, roles: new Map() };
      if (entry.roles.size >= MAX_USERS_PER_ORG) entry.roles.clear();
      if (plan !== null) entry.roles.set(userId, role);
      this.orgs.set(orgId, entry);
    });
    return this.found(orgId, plan, role);
  }

  private found(orgId: number, plan: string | null, role: OrgRole | null): Membership | undefined {
    return plan === null || role === null ? undefined : { orgId, role, plan };
  }

  /** Local changes take effect at once here; the feed carries them to the other instances. */
  forget(orgId: number): void {
    this.changed();
    this.orgs.delete(orgId);
  }
}
