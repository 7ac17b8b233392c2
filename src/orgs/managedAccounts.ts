// Managed accounts (CONTRACT §31, "Whose account" and "Roles"): the one place where an
// organization's SAML sign-in and its SCIM directory find, claim or create an account and give it
// its membership. Both go through here, so both follow the same rules.
//
// API (exported through orgs/index.ts):
//   ensureManagedAccount(deps, request)        → Promise<ManagedOutcome>   in its own transaction
//   ensureManagedAccountIn(tx, deps, request)  → Promise<ManagedOutcome>   in the caller's (SCIM,
//       which writes its own rows beside): the caller must not hold the organization's row lock
//       yet (the order is the account's row, then the organization's: orgs/change.ts); a refusal
//       is returned before anything is written, except `org_not_found` for an organization
//       deleted meanwhile, which throws Refused('orgNotFound') so that the caller rolls back
//   applyMappedRole(tx, deps, target)           → Promise<MembershipChange | undefined>  the
//       "Roles" rule alone, for a SCIM group change of an existing user (the same locks and audit)
//   mappedRole(groups, roleMapping)            → 'admin' | 'member' | undefined
//   managedBy(q, orgId, userId)                → 'saml' | 'scim' | undefined (deprovisioning)
//   samlIssuer(connectionId)                   → the user_identities issuer of a SAML link
//   emailInVerifiedDomain(q, orgId, email)     → boolean
// request: { orgId, email (as asserted; lower-cased here as §7 stores it), link?: {connectionId,
// nameId} (SAML only, never a transient NameID), allowCreate (JIT), groups?, roleMapping?, by }.
// by: { kind: 'saml', client? } (audit actor `system`, data.via "saml") or { kind: 'scim',
// tokenId } (actor `scim`, actor_id the token's id, data.via "scim").
//
// The account: the one linked to (connection, NameID); else the one holding the email, linked when
// its address is verified, and when it is not, claimed: its password, passkeys, TOTP, provider
// links, sessions (and access tokens) and personal API keys removed in the same transaction
// (`sso.account_claimed`), since whoever registered the address before the domain was proven never
// proved it is theirs; else created (email verified, no password) when `allowCreate`, and recorded
// as managed by the organization. Two calls for one new email at once make one account: the
// second insert waits for the first to commit, inserts nothing, and reads the account it made.
import type { Audit, AuditType } from '../audit.js';
import { lockAccount, type AccountWriters } from '../account/change.js';
import { normalizeEmail } from '../credentials/emailAddress.js';
import type { Database, Queryable } from '../storage/database/index.js';
import type { MembershipCache } from '../storage/feed/index.js';
import { identities, users } from '../storage/accounts/index.js';
import { managedBy, organizations as orgs, recordManaged, verifiedDomainsOf } from '../storage/orgs/index.js';
import { Refused } from './change.js';
import { claimAccount } from './claimAccount.js';
import { emailDomain } from '../domains/index.js';
import { authorOf, type ManagingActor } from './managingActor.js';

export { managedBy, authorOf, type ManagingActor };

/** A SAML identity: the connection's random id and the assertion's (persistent or email) NameID. */
export interface SamlLink {
  connectionId: string;
  nameId: string;
}

export interface ManagedAccountRequest {
  orgId: number;
  email: string;
  link?: SamlLink;
  /** JIT (`allowJit`, SCIM's create): whether an account may be created. */
  allowCreate: boolean;
  /** The assertion's `attributes.groups` values, or the SCIM user's groups' names. */
  groups?: readonly string[];
  /** The connection's `roleMapping`: group value → "admin" | "member" (anything else is ignored). */
  roleMapping?: Readonly<Record<string, string>>;
  by: ManagingActor;
}

export type ManagedRefusal =
  /** The email is not one, or not in a verified domain of the organization (SAML: account_not_allowed; SCIM: invalidValue). */
  | 'email_not_allowed'
  /** No account, and allowCreate is false. */
  | 'jit_disabled'
  /** The account is deactivated. */
  | 'account_inactive'
  | 'org_not_found';

export interface MembershipChange {
  /** created: a new member; changed: the role changed; kept: neither. */
  change: 'created' | 'changed' | 'kept';
  role: orgs.OrgRole;
  previousRole?: orgs.OrgRole;
}

export interface ManagedAccount {
  userId: number;
  email: string;
  /** The account was created now (and is recorded as managed by the organization). */
  created: boolean;
  /** An account with an unproven address was claimed now (its ways in removed). */
  claimed: boolean;
  /** The SAML link was made now. */
  linked: boolean;
  membership: MembershipChange;
}

export type ManagedOutcome = { ok: ManagedAccount } | { refused: ManagedRefusal };

export interface ManagedAccountDeps {
  db: Database;
  audit: Pick<Audit, 'record'>;
  clock: () => Date;
  /** This instance's memberships: a membership or role a sign-in set holds here at once (ensureManagedAccount). */
  memberships?: Pick<MembershipCache, 'forget'>;
}

/** The user_identities issuer of a SAML connection's links (provider 'saml'). */
export const samlIssuer = (connectionId: string) => `saml:${connectionId}`;

const RANK: Record<'admin' | 'member', number> = { member: 1, admin: 2 };

/** The highest role the mapping gives among the values; undefined when none maps (never `owner`). */
export function mappedRole(groups: readonly string[] = [], roleMapping: Readonly<Record<string, string>> = {}): 'admin' | 'member' | undefined {
  let best: 'admin' | 'member' | undefined;
  for (const group of groups) {
    const role = Object.hasOwn(roleMapping, group) ? roleMapping[group] : undefined;
    if ((role === 'admin' || role === 'member') && (!best || RANK[role] > RANK[best])) best = role;
  }
  return best;
}

/** Whether the (normalized) email's domain is a verified domain of the organization. */
export async function emailInVerifiedDomain(q: Queryable, orgId: number, email: string): Promise<boolean> {
  const domain = emailDomain(email);
  return domain !== undefined && (await verifiedDomainsOf(q, orgId)).includes(domain);
}

/** ensureManagedAccount in its own transaction. */
export async function ensureManagedAccount(deps: ManagedAccountDeps, request: ManagedAccountRequest): Promise<ManagedOutcome> {
  try {
    const outcome = await deps.db.transaction((tx) => ensureManagedAccountIn(tx, deps, request));
    // Committed: the role the IdP's groups map to holds on this instance from the next request on,
    // not when the memberships' NOTIFY arrives (orgs/change.ts does the same for every API change).
    deps.memberships?.forget(request.orgId);
    return outcome;
  } catch (err) {
    if (err instanceof Refused && err.code === 'orgNotFound') return { refused: 'org_not_found' };
    throw err;
  }
}

/** Finds, claims or creates the account and gives it its membership, in `tx` (see the top of the file). */
export async function ensureManagedAccountIn(tx: Queryable, deps: ManagedAccountDeps, request: ManagedAccountRequest): Promise<ManagedOutcome> {
  const email = normalizeEmail(request.email);
  if (!(await orgs.findOrganization(tx, request.orgId))) return { refused: 'org_not_found' };
  if (!email || !(await emailInVerifiedDomain(tx, request.orgId, email))) return { refused: 'email_not_allowed' };
  const found = await accountFor(tx, deps, request, email);
  if ('refused' in found) return found;
  const { w, created, byEmail } = found;
  if (!w.user.is_active) return { refused: 'account_inactive' };
  // Only an account found by its address is claimed: a linked one is already the IdP's user's.
  const claimed = byEmail && w.user.email_verified_at === null && (await claimAccount(w, deps.audit, request));
  const linked = request.link ? await identities.insertLink(tx, w.user.id, samlLinkOf(request.link, email), w.now) : false;
  if (linked) await w.record('oidc.linked', { provider: 'saml', issuer: samlIssuer(request.link!.connectionId), org_id: request.orgId, via: authorOf(request.by).via });
  const membership = await applyMappedRole(tx, deps, { orgId: request.orgId, userId: w.user.id, groups: request.groups, roleMapping: request.roleMapping, by: request.by, createWhenMissing: true });
  // After applyMappedRole found the organization under its lock: one deleted meanwhile is
  // org_not_found there, never this row's foreign key failing (a 500).
  if (created) await recordManaged(tx, request.orgId, w.user.id, authorOf(request.by).via, w.now);
  return { ok: { userId: w.user.id, email: w.user.email, created, claimed, linked, membership: membership! } };
}

const samlLinkOf = (link: SamlLink, email: string): identities.NewLink =>
  ({ provider: 'saml', issuer: samlIssuer(link.connectionId), subject: link.nameId, email, vouched: true });

type Found = { w: AccountWriters; created: boolean; byEmail: boolean } | { refused: ManagedRefusal };

/** The account locked (linked, holding the email, or made now), with its writers. */
async function accountFor(tx: Queryable, deps: ManagedAccountDeps, request: ManagedAccountRequest, email: string): Promise<Found> {
  const lock = (userId: number) => lockAccount(tx, deps, { userId, mode: 'update', by: authorOf(request.by).author });
  const link = request.link && (await identities.findLink(tx, samlIssuer(request.link.connectionId), request.link.nameId));
  const linked = link && (await lock(link.user_id));
  if (linked) return { w: linked, created: false, byEmail: false };
  // Twice at most: an account made by a concurrent call between our read and our insert is read on the second pass.
  for (let pass = 0; pass < 2; pass++) {
    const holder = await users.findByEmail(tx, email);
    const held = holder && (await lock(holder.id));
    if (held && held.user.email === email) return { w: held, created: false, byEmail: true };
    if (holder) continue; // its email changed or it went between the read and the lock: read again
    if (!request.allowCreate) return { refused: 'jit_disabled' };
    const now = deps.clock();
    const id = await users.insertUser(tx, email, null, now);
    if (id === null) continue;
    const made = (await lock(id))!;
    await made.record('user.registered', { via: authorOf(request.by).via, org_id: request.orgId });
    return { w: made, created: true, byEmail: false };
  }
  // The address changed hands twice under us: as if the account were refused, never a wrong one.
  return { refused: 'jit_disabled' };
}

/** What applyMappedRole changes: one user's membership of one organization. */
export interface RoleTarget {
  orgId: number;
  userId: number;
  groups?: readonly string[];
  roleMapping?: Readonly<Record<string, string>>;
  by: ManagingActor;
  /** Add the membership when missing (`member` when no value maps); false: only an existing member's role changes. */
  createWhenMissing: boolean;
}

/**
 * CONTRACT §31 "Roles", in `tx` after the user's row (when the caller holds it): the organization's
 * row locked, then a missing membership created with the mapped role (`member` when none maps), an
 * existing member's role changed only when a value maps, and never an owner's nor to `owner`.
 * Undefined when the user is no member and createWhenMissing is false. Throws Refused('orgNotFound')
 * when the organization is gone.
 */
export async function applyMappedRole(tx: Queryable, deps: ManagedAccountDeps, target: RoleTarget): Promise<MembershipChange | undefined> {
  const org = await orgs.lockOrganization(tx, target.orgId);
  if (!org) throw new Refused('orgNotFound');
  const { author, via } = authorOf(target.by);
  const record = (type: Extract<AuditType, `org.${string}`>, data: Record<string, unknown>) =>
    deps.audit.record({ type, ...author, userId: target.userId, data: { org_id: org.id, member_id: target.userId, via, ...data } }, tx);
  const mapped = mappedRole(target.groups, target.roleMapping);
  const current = await orgs.roleOf(tx, org.id, target.userId);
  if (current === undefined) {
    if (!target.createWhenMissing) return undefined;
    const role = mapped ?? 'member';
    await orgs.addMember(tx, org.id, target.userId, role, deps.clock());
    await record('org.member_added', { role });
    return { change: 'created', role };
  }
  if (current === 'owner' || mapped === undefined || mapped === current) return { change: 'kept', role: current };
  await orgs.setRole(tx, org.id, target.userId, mapped);
  await record('org.role_changed', { from: current, to: mapped });
  return { change: 'changed', role: mapped, previousRole: current };
}
