// organizations and memberships (migration 025, CONTRACT §22): one aggregate, an organization and
// who belongs to it with which role. Statements that change a membership run in orgs/change.ts's
// transaction, after the organization's row is locked (lockOrganization), so counts read there
// (owners left, organizations owned) stay true until the commit.
import { parseIntegerId, type Queryable } from '../database/db.js';
import { Conditions, containsPattern } from '../database/listing.js';

export const ORG_ROLES = ['owner', 'admin', 'member'] as const;
export type OrgRole = (typeof ORG_ROLES)[number];

export interface Organization {
  id: number;
  name: string;
  plan: string;
  created_at: Date;
}

export interface Member {
  user_id: number;
  email: string;
  role: OrgRole;
  joined_at: Date;
}

/** Locks the organization's row for the rest of the transaction (after the user's: orgs/change.ts); undefined when there is none. */
export async function lockOrganization(tx: Queryable, id: number): Promise<Organization | undefined> {
  return (await tx.query<Organization>('SELECT id, name, plan, created_at FROM organizations WHERE id = $1 FOR UPDATE', [id]))[0];
}

export async function insertOrganization(tx: Queryable, name: string, now: Date): Promise<Organization> {
  return (await tx.query<Organization>('INSERT INTO organizations (name, created_at) VALUES ($1, $2) RETURNING id, name, plan, created_at', [name, now]))[0]!;
}

export async function renameOrganization(tx: Queryable, id: number, name: string): Promise<Organization | undefined> {
  return (await tx.query<Organization>('UPDATE organizations SET name = $2 WHERE id = $1 RETURNING id, name, plan, created_at', [id, name]))[0];
}

/** Deletes the organization; its memberships, invitations and (revoked first: revokeOrganizationKeys) keys go with it. */
export async function deleteOrganization(tx: Queryable, id: number): Promise<boolean> {
  return (await tx.query('DELETE FROM organizations WHERE id = $1 RETURNING id', [id])).length > 0;
}

/** Revokes the organization's keys: the api_tokens triggers tell every instance's cache. How many. */
export async function revokeOrganizationKeys(tx: Queryable, orgId: number): Promise<number> {
  return (await tx.query('UPDATE api_tokens SET revoked = 1 WHERE org_id = $1 AND revoked = 0 RETURNING id', [orgId])).length;
}

/** The user's role in the organization, or undefined for a non-member (or no such organization). */
export async function roleOf(q: Queryable, orgId: number, userId: number): Promise<OrgRole | undefined> {
  return (await q.query<{ role: OrgRole }>('SELECT role FROM memberships WHERE org_id = $1 AND user_id = $2', [orgId, userId]))[0]?.role;
}

export async function addMember(tx: Queryable, orgId: number, userId: number, role: OrgRole, now: Date): Promise<void> {
  await tx.query('INSERT INTO memberships (org_id, user_id, role, joined_at) VALUES ($1, $2, $3, $4)', [orgId, userId, role, now]);
}

export async function setRole(tx: Queryable, orgId: number, userId: number, role: OrgRole): Promise<boolean> {
  return (await tx.query('UPDATE memberships SET role = $3 WHERE org_id = $1 AND user_id = $2 RETURNING user_id', [orgId, userId, role])).length > 0;
}

export async function removeMember(tx: Queryable, orgId: number, userId: number): Promise<boolean> {
  return (await tx.query('DELETE FROM memberships WHERE org_id = $1 AND user_id = $2 RETURNING user_id', [orgId, userId])).length > 0;
}

export async function ownerCount(q: Queryable, orgId: number): Promise<number> {
  return Number((await q.query<{ n: string }>("SELECT count(*) AS n FROM memberships WHERE org_id = $1 AND role = 'owner'", [orgId]))[0]!.n);
}

/** How many organizations the user owns (organizations.maxOwnedPerUser); exact under the user's row lock. */
export async function ownedCount(q: Queryable, userId: number): Promise<number> {
  return Number((await q.query<{ n: string }>("SELECT count(*) AS n FROM memberships WHERE user_id = $1 AND role = 'owner'", [userId]))[0]!.n);
}

/** The user's organizations and role in each, oldest first. */
export async function organizationsOf(q: Queryable, userId: number): Promise<Array<Pick<Organization, 'id' | 'name' | 'plan'> & { role: OrgRole }>> {
  return q.query(
    'SELECT o.id, o.name, o.plan, m.role FROM memberships m JOIN organizations o ON o.id = m.org_id WHERE m.user_id = $1 ORDER BY o.id',
    [userId],
  );
}

export async function findOrganization(q: Queryable, id: number): Promise<Organization | undefined> {
  return (await q.query<Organization>('SELECT id, name, plan, created_at FROM organizations WHERE id = $1', [id]))[0];
}

/** The members, by the time they joined. */
export async function membersOf(q: Queryable, orgId: number): Promise<Member[]> {
  return q.query<Member>(
    'SELECT m.user_id, u.email, m.role, m.joined_at FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.org_id = $1 ORDER BY m.joined_at, m.user_id',
    [orgId],
  );
}

/** Whether an account with this (lower-cased) email is a member. */
export async function isMemberByEmail(q: Queryable, orgId: number, email: string): Promise<boolean> {
  return (await q.query('SELECT 1 FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.org_id = $1 AND u.email = $2', [orgId, email])).length > 0;
}

/** An organization as operators list it: with how many members it has. */
export interface ListedOrganization extends Organization {
  member_count: number;
}

export interface OrgFilter {
  /** A name substring (case-insensitive), or an exact id when it is one. */
  query?: string;
  plan?: string;
  /** Only organizations with a smaller id: the keyset page after one already read. */
  beforeId?: number;
  limit: number;
}

/**
 * Organizations newest first, for operators (admin API, console, `gateway orgs list`). Keyed on
 * the id as users are (userList.ts): one created while an operator pages never shows twice.
 */
export async function listOrganizations(q: Queryable, filter: OrgFilter): Promise<ListedOrganization[]> {
  const conditions = new Conditions();
  if (filter.query) {
    const id = parseIntegerId(filter.query);
    conditions.add((p) => (id === undefined ? `lower(o.name) LIKE ${p}` : `(lower(o.name) LIKE ${p} OR o.id = ${id})`), containsPattern(filter.query));
  }
  if (filter.plan !== undefined) conditions.add((p) => `o.plan = ${p}`, filter.plan);
  if (filter.beforeId !== undefined) conditions.add((p) => `o.id < ${p}`, filter.beforeId);
  const limit = conditions.param(filter.limit);
  return q.query<ListedOrganization>(
    `SELECT o.id, o.name, o.plan, o.created_at, (SELECT count(*)::int FROM memberships m WHERE m.org_id = o.id) AS member_count
       FROM organizations o ${conditions.clause} ORDER BY o.id DESC LIMIT ${limit}`,
    conditions.params,
  );
}

/** Sets the organization's plan (its update trigger tells every instance); the organization as it was before, or undefined. */
export async function setOrganizationPlan(tx: Queryable, id: number, plan: string): Promise<{ before: Organization; after: Organization } | undefined> {
  const before = await lockOrganization(tx, id);
  if (!before) return undefined;
  const after = (await tx.query<Organization>('UPDATE organizations SET plan = $2 WHERE id = $1 RETURNING id, name, plan, created_at', [id, plan]))[0]!;
  return { before, after };
}

/**
 * The organizations whose only owner is this user, their rows locked (after the user's, the one
 * lock order of orgs/change.ts): until the transaction ends, no other owner can leave them either.
 */
export async function lastOwnedBy(tx: Queryable, userId: number): Promise<Array<Pick<Organization, 'id' | 'name'>>> {
  const owned = await tx.query<Pick<Organization, 'id' | 'name'>>(
    "SELECT o.id, o.name FROM organizations o JOIN memberships m ON m.org_id = o.id WHERE m.user_id = $1 AND m.role = 'owner' ORDER BY o.id FOR UPDATE OF o",
    [userId],
  );
  const last: Array<Pick<Organization, 'id' | 'name'>> = [];
  for (const org of owned) if ((await ownerCount(tx, org.id)) === 1) last.push(org);
  return last;
}

/** An organization's pooled counters (035): the counted uses of its current day and month. */
export interface PooledUsage {
  daily_usage: number;
  last_usage_date: string | null;
  monthly_usage: number;
  last_usage_month: string | null;
}

/** The organization's pooled counters as stored (the day and month they count included); undefined: no such organization. */
export async function pooledUsage(q: Queryable, id: number): Promise<PooledUsage | undefined> {
  return (await q.query<PooledUsage>(
    `SELECT daily_usage, to_char(last_usage_date, 'YYYY-MM-DD') AS last_usage_date, monthly_usage, to_char(last_usage_month, 'YYYY-MM-DD') AS last_usage_month
       FROM organizations WHERE id = $1`,
    [id],
  ))[0];
}
