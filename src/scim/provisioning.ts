// What a directory's change does to an account and its membership (CONTRACT §31, "Whom SCIM may
// touch", "Deprovisioning"). Every function runs in the request's transaction after the locks in
// their one order: the account's row, then the organization's (orgs/change.ts's order, so a SCIM
// change and a member's own change of the organization wait for each other, never deadlock).
//
// Ending access (active false, DELETE): the membership goes, with the organization keys the member
// made (revoked: the api_tokens trigger tells every instance) and so their WebSockets acting for it
// (the memberships trigger: proxy/openSockets.ts closes them within a second). On this instance
// it holds at once: every change runs in directoryChange, which forgets the organization's
// memberships and the revoked keys once committed. An account the
// organization manages (its SCIM or SAML made it, its email in a verified domain) that belongs to
// no other organization is also deactivated: every session, key and socket of it is refused within
// a second on every instance (the users trigger, as an operator's deactivation). An owner is never
// removed by a directory: owners are managed through the API (§22), so the last owner stays.
import { lockAccount } from '../account/change.js';
import type { Audit } from '../audit.js';
import type { Database, Queryable } from '../storage/database/index.js';
import type { IdentityCache, MembershipCache } from '../storage/feed/index.js';
import { revokeMemberKeys } from '../keys/index.js';
import { groupsOfUser, lockOrganization, membershipCount, removeMember, renameManagedAccount, roleOf, type ScimUserRow } from '../storage/orgs/index.js';
import { setActive, type UserWithHash } from '../storage/accounts/index.js';
import type { ScimCaller } from './access.js';
import { invalidValue, scimError } from './errors.js';
import { applyMappedRole, emailInVerifiedDomain, managedBy, type ManagedAccountDeps } from './managed.js';
import { groupValues, type RoleMappingOf } from './roles.js';

/** The refusal of an email outside the organization's verified domains, as users.ts and a rename here both say it. */
export const DOMAIN_RULE = 'userName (or the primary email) must be an email of a verified domain of the organization';

export interface ProvisioningDeps extends ManagedAccountDeps {
  audit: Audit;
  roleMapping: RoleMappingOf;
  /** This instance's memberships and keys: what a directory changed is read afresh here at once (directoryChange). */
  memberships: Pick<MembershipCache, 'forget'>;
  identities: Pick<IdentityCache, 'forgetKey'>;
}

/** Keeps a revoked key's hash for this instance to forget once the change has committed. */
export type ForgetKey = (hash: string) => void;

/**
 * Runs a directory's change in one transaction. Once it has committed, this instance reads the
 * organization's memberships afresh, and the keys the change revoked, not when the rows' NOTIFY
 * arrives (a loaded machine delivers it late): a deprovisioned member's keys and acting for the
 * organization are refused at once (the pipeline's org stages ask the memberships), a new role
 * holds at once, and a member provisioned again does not find their revoked keys working.
 */
export async function directoryChange<T>(
  deps: Pick<ProvisioningDeps, 'memberships' | 'identities'> & { db: Database }, caller: ScimCaller, work: (tx: Queryable, forgetKey: ForgetKey) => Promise<T>,
): Promise<T> {
  const revoked: string[] = [];
  const done = await deps.db.transaction((tx) => {
    revoked.length = 0;
    return work(tx, (hash) => revoked.push(hash));
  });
  deps.memberships.forget(caller.orgId);
  for (const hash of revoked) deps.identities.forgetKey(hash);
  return done;
}

/** One SCIM change: its transaction, its time, who asks, and the locked account. */
export interface ScimWriters {
  tx: Queryable;
  now: Date;
  caller: ScimCaller;
  account: UserWithHash;
  deps: ProvisioningDeps;
  /** The change's directoryChange's: a key it revokes is forgotten here once it has committed. */
  forgetKey: ForgetKey;
}

/** The audit row of a change by the directory: actor `scim`, actor_id its token, data naming the organization (and via "scim"). */
export function recordScim(w: Pick<ScimWriters, 'tx' | 'caller' | 'deps'>, type: Parameters<Audit['record']>[0]['type'], userId: number, data: Record<string, unknown>) {
  return w.deps.audit.record({ type, actor: 'scim', actorId: w.caller.tokenId, userId, data: { org_id: w.caller.orgId, via: 'scim', ...data } }, w.tx);
}

/** The account's row (account/change.ts, as every change of an account), then the organization's: the one lock order. Refused 404 when either is gone. */
export async function lockFor(tx: Queryable, deps: Pick<ProvisioningDeps, 'clock'>, caller: ScimCaller, userId: number): Promise<UserWithHash> {
  const account = (await lockAccount(tx, deps, { userId, mode: 'update' }))?.user ?? scimError(404, 'User not found');
  if (!(await lockOrganization(tx, caller.orgId))) scimError(404, 'Organization not found');
  return account;
}

const OWNER_DETAIL = 'The member is an owner of the organization: owners are managed through the API, never by the directory';

/** Ends the member's access to the organization (see the top); true when the account itself was deactivated. */
export async function endAccess(w: ScimWriters, row: ScimUserRow, deleted = false): Promise<boolean> {
  const { tx, caller, account } = w;
  const role = await roleOf(tx, caller.orgId, account.id);
  if (role === 'owner') scimError(409, OWNER_DETAIL);
  if (role) {
    await removeMember(tx, caller.orgId, account.id);
    // CONTRACT §22: each key the member made goes with the membership, the system's doing.
    const keys = await revokeMemberKeys(w.deps, { tx, orgId: caller.orgId }, account.id);
    for (const { hash } of keys) w.forgetKey(hash);
    await recordScim(w, 'org.member_removed', account.id, { member_id: account.id, keys_revoked: keys.length });
  }
  const deactivate = account.is_active === 1
    && (await managedBy(tx, caller.orgId, account.id)) !== undefined
    && (await emailInVerifiedDomain(tx, caller.orgId, account.email))
    && (await membershipCount(tx, account.id)) === 0;
  if (deactivate) await setActive(tx, account.id, false);
  await recordScim(w, 'scim.user_deactivated', account.id, { scim_id: row.id, ...(deleted ? { deleted: true } : {}), ...(deactivate ? { account_active: false } : {}) });
  return deactivate;
}

/** The roleMapping's values of the user's groups. */
async function valuesOf(w: Pick<ScimWriters, 'tx'>, row: ScimUserRow): Promise<string[]> {
  return groupValues(await groupsOfUser(w.tx, row.id));
}

/** Gives the access back (active true): the account reactivated when its deprovisioning deactivated it, the membership with its mapped role. */
export async function restoreAccess(w: ScimWriters, row: ScimUserRow): Promise<void> {
  const reactivate = row.deactivated_account && w.account.is_active !== 1;
  if (reactivate) await setActive(w.tx, w.account.id, true);
  row.deactivated_account = false;
  await applyMappedRole(w.tx, w.deps, {
    orgId: w.caller.orgId, userId: w.account.id, groups: await valuesOf(w, row), roleMapping: await w.deps.roleMapping(w.tx, w.caller.orgId),
    by: { kind: 'scim', tokenId: w.caller.tokenId }, createWhenMissing: true,
  });
  await recordScim(w, 'scim.user_reactivated', w.account.id, { scim_id: row.id, ...(reactivate ? { account_active: true } : {}) });
}

/** The member's role again from their groups (a group's members or name changed); nothing for a user whose access is ended. */
export async function remapRole(w: Omit<ScimWriters, 'account' | 'forgetKey'>, row: ScimUserRow): Promise<void> {
  if (!row.active) return;
  await applyMappedRole(w.tx, w.deps, {
    orgId: w.caller.orgId, userId: row.user_id, groups: await valuesOf(w, row), roleMapping: await w.deps.roleMapping(w.tx, w.caller.orgId),
    by: { kind: 'scim', tokenId: w.caller.tokenId }, createWhenMissing: false,
  });
}

/**
 * A new email for the account (its userName, or primary email, changed): only an account the
 * organization's SCIM or SAML made, only to an address of its verified domains, only one no other
 * account holds. An account someone made and linked keeps its owner's email.
 */
export async function moveEmail(w: ScimWriters, email: string): Promise<void> {
  if (email === w.account.email) return;
  if (!(await managedBy(w.tx, w.caller.orgId, w.account.id))) {
    scimError(400, 'This account was not created by the organization: its email is its owner\'s to change', 'mutability');
  }
  if (!(await emailInVerifiedDomain(w.tx, w.caller.orgId, email))) invalidValue(DOMAIN_RULE);
  if (!(await renameManagedAccount(w.tx, w.account.id, email, w.now))) scimError(409, 'Another account holds this email', 'uniqueness');
}
