// One recipe for a change of an organization (docs/architecture.md, 26): one function opens the
// transaction and takes the locks in their one order — the acting user's row (account/change.ts,
// as every account change), then the organization's — and hands the change its writers: the
// transaction, the time, the locked rows, the caller's role and the audit writer bound to the
// organization. Two changes of one organization wait for each other on its row, so what they
// count there (owners left, pending invitations) stays true until they commit: two owners demoting
// each other on two instances leave one owner, not none. A refusal thrown by the change (refuse())
// rolls back whatever it wrote. Once it has committed, this instance forgets what it cached of
// the organization at once; the other instances hear the rows' NOTIFY.
import { lockAccount } from '../account/change.js';
import type { Audit, AuditType } from '../audit.js';
import type { ErrorCode } from '../errors/index.js';
import type { Database, Queryable } from '../storage/database/index.js';
import { lockOrganization, roleOf, type Organization, type OrgRole } from '../storage/orgs/index.js';
import type { Client, users } from '../storage/accounts/index.js';
import type { MembershipCache } from '../storage/feed/index.js';

export type OrgAuditType = Extract<AuditType, `org.${string}`>;

export interface OrgChangeDeps {
  db: Database;
  audit: Audit;
  clock: () => Date;
  /** This instance's memberships: an organization changed here is read afresh at once (the feed tells the other instances). */
  memberships: Pick<MembershipCache, 'forget'>;
}

/** Who changes: the signed-in user, from where (the audit row's). */
export interface Actor {
  userId: number;
  client: Client;
}

/** What a change of the user's own (creating an organization, accepting an invitation) is handed. */
export interface UserWriters {
  tx: Queryable;
  now: Date;
  /** The acting user's row, locked. */
  user: users.UserWithHash;
}

/** What a change of one organization is handed, after the locks. */
export interface OrgWriters extends UserWriters {
  org: Organization;
  /** The acting user's role, read under the organization's lock; undefined: not a member. */
  role: OrgRole | undefined;
  /** The audit row of the change, in its transaction, naming the organization. */
  record(type: OrgAuditType, data?: Record<string, unknown>): Promise<void>;
}

/** A refusal: the change's answer instead of its result, its writes rolled back. */
export class Refused extends Error {
  /** `reason`: for the log only (why a document was refused), never in the answer. */
  constructor(readonly code: ErrorCode, readonly extra?: Record<string, unknown>, readonly reason?: string) {
    super(code);
  }
}

export function refuse(code: ErrorCode, extra?: Record<string, unknown>, reason?: string): never {
  throw new Refused(code, extra, reason);
}

export type Outcome<T> = { ok: T } | { refused: Refused };

/** What `work` gives, or the refusal it threw. */
async function outcomeOf<T>(work: () => Promise<T>): Promise<Outcome<T>> {
  try {
    return { ok: await work() };
  } catch (err) {
    if (err instanceof Refused) return { refused: err };
    throw err;
  }
}

const inTransaction = <T>(db: Database, fn: (tx: Queryable) => Promise<T>): Promise<Outcome<T>> => outcomeOf(() => db.transaction(fn));

/** A read of organization `orgId` by a member with one of `roles`: no lock, the refusals of a change. */
export function orgRead<T>(
  db: Queryable, userId: number, orgId: number | undefined, roles: readonly OrgRole[], read: (role: OrgRole) => Promise<T>,
): Promise<Outcome<T>> {
  return outcomeOf(async () => read(requireRole(orgId === undefined ? undefined : await roleOf(db, orgId, userId), roles)));
}

/** Locks the acting user's row (the first lock of every order); a user deleted meanwhile is refused as the guards refuse one. */
async function lockActor(tx: Queryable, deps: OrgChangeDeps, actor: Actor): Promise<users.UserWithHash> {
  return (await lockAccount(tx, deps, { userId: actor.userId, mode: 'update' }))?.user ?? refuse('userNotFound');
}

/** A change of the user's own that no organization's row orders yet (creating one). */
export function userChange<T>(deps: OrgChangeDeps, actor: Actor, change: (w: UserWriters) => Promise<T>): Promise<Outcome<T>> {
  return inTransaction(deps.db, async (tx) => change({ tx, now: deps.clock(), user: await lockActor(tx, deps, actor) }));
}

/**
 * A change of organization `orgId`: the user's row, then the organization's. No such organization
 * is refused as a non-member is (404), so ids tell nothing; whether a non-member may go on (an
 * invitation's acceptance) is the change's to say (requireRole).
 */
export async function orgChange<T>(deps: OrgChangeDeps, actor: Actor, orgId: number, change: (w: OrgWriters) => Promise<T>): Promise<Outcome<T>> {
  const outcome = await inTransaction(deps.db, async (tx) => {
    const user = await lockActor(tx, deps, actor);
    const org = (await lockOrganization(tx, orgId)) ?? refuse('orgNotFound');
    const record = (type: OrgAuditType, data: Record<string, unknown> = {}) =>
      deps.audit.record({ type, actor: 'user', userId: actor.userId, ...actor.client, data: { org_id: org.id, ...data } }, tx);
    return change({ tx, now: deps.clock(), user, org, role: await roleOf(tx, org.id, user.id), record });
  });
  // Committed (or rolled back): the next request here reads who belongs afresh, not when the
  // NOTIFY arrives, which a loaded machine delivers late. A removed member's keys and acting are
  // refused at once (the pipeline's org stages ask the memberships), a new member's let in.
  deps.memberships.forget(orgId);
  return outcome;
}

/**
 * The caller's role when it is one of `roles`: a non-member is refused 404 (membership is not
 * disclosed), a member without one of them 403 with the roles it takes and the caller's.
 */
export function requireRole(role: OrgRole | undefined, roles: readonly OrgRole[]): OrgRole {
  if (role === undefined) refuse('orgNotFound');
  if (!roles.includes(role)) refuse('roleInsufficient', { required_roles: roles, current_role: role });
  return role;
}
