// An organization's API keys (CONTRACT §22): section 21's rules, owned by the organization. A key's
// `role` (member by default) is never above its creator's; it acts for the organization with
// min(key role, creator's current role). apiKeys.plans is checked against the organization's plan
// and apiKeys.maxPerOwner counts per organization. Each action runs in the transaction of a change
// of the organization (orgs/change.ts), under its row lock, which the caller hands over as `owner`:
// the count read here holds until the commit.
import type { Audit } from '../audit.js';
import type { Config } from '../config/schema.js';
import { sha256Hex } from '../credentials/digest.js';
import type { Denial } from '../errors/index.js';
import type { Queryable } from '../storage/database/index.js';
import { createOrgKeyWithin, revokeMemberOrgKeys, revokeOrgKey as revokeOrgKeyRow, type OrgKey, type RevokedKey } from '../storage/keys/index.js';
import { ORG_ROLES, type OrgRole } from '../storage/orgs/index.js';
import type { Client } from '../storage/accounts/index.js';
import { newApiKey } from './format.js';
import { keyPlanDenial, keyRequest, type KeyOutcome } from './rules.js';

/** The organization whose row the caller holds locked, and the member who acts (a new key's creator), with their role. */
export interface OrgKeyOwner {
  tx: Queryable;
  orgId: number;
  plan: string;
  memberId: number;
  memberRole: OrgRole;
}

export interface OrgApiKeyDeps {
  apiKeys: Config['apiKeys'];
  audit: Pick<Audit, 'record'>;
}

/** What a request for an organization key weighs besides its body. */
export interface OrgKeyContext {
  now: Date;
  /** The scopes the routes declare now (a reload may add some). */
  knownScopes: ReadonlySet<string>;
  /** plans.upgradeUrl, for the plan's refusal. */
  upgradeUrl: string;
  /** Where the creator asks from, for the audit row. */
  client: Client;
}

/** Strongest first: a role's rank is its index. */
const rank = (role: OrgRole) => ORG_ROLES.indexOf(role);
/** The roles at least as strong as `role`: who may give it. */
const atLeast = (role: OrgRole) => ORG_ROLES.filter((r) => rank(r) <= rank(role));

/** The key's role from the body (member by default); refused above the creator's own. */
function keyRole(body: unknown, creator: OrgRole): OrgRole | Denial {
  const asked = body !== null && typeof body === 'object' ? (body as Record<string, unknown>).role : undefined;
  if (asked === undefined || asked === null) return 'member';
  const role = ORG_ROLES.find((r) => r === asked);
  if (role === undefined) return { code: 'badRequest' };
  if (rank(role) < rank(creator)) return { code: 'roleInsufficient', extra: { required_roles: atLeast(role), current_role: creator } };
  return role;
}

/** A new key of the organization, refused in this order: its plan, the body, the key's role, the count; the raw key is in the answer only. */
export async function createOrgApiKey(deps: OrgApiKeyDeps, owner: OrgKeyOwner, body: unknown, context: OrgKeyContext): Promise<KeyOutcome<OrgKey & { key: string }>> {
  const plans = deps.apiKeys.plans;
  const planDenied = keyPlanDenial(plans, owner.plan, context.upgradeUrl);
  if (planDenied) return { denied: planDenied };
  const wanted = keyRequest(body, context.now, context.knownScopes);
  if ('error' in wanted) return { denied: { code: wanted.error } };
  const role = keyRole(body, owner.memberRole);
  if (typeof role !== 'string') return { denied: role };
  const { key, start } = newApiKey(deps.apiKeys.prefix, true);
  const created = await createOrgKeyWithin(owner.tx, owner.orgId, owner.memberId, { hash: sha256Hex(key), start, ...wanted.ok, role }, deps.apiKeys.maxPerOwner, context.now);
  if (!created) return { denied: { code: 'apiKeyLimitReached' } };
  const data = { id: created.id, org_id: owner.orgId, name: created.name, role, scopes: created.scopes };
  await deps.audit.record({ type: 'api_key.created', actor: 'user', userId: owner.memberId, ...context.client, data }, owner.tx);
  return { ok: { ...created, key } };
}

/**
 * Revokes one of the organization's keys: its hash, for the caller to forget once the transaction
 * has committed (IdentityCache.forgetKey; other instances hear the row's NOTIFY); apiKeyNotFound
 * when `id` is not the organization's or is revoked already.
 */
export async function revokeOrgApiKey(deps: Pick<OrgApiKeyDeps, 'audit'>, owner: Omit<OrgKeyOwner, 'plan' | 'memberRole'>, id: number | undefined, client: Client): Promise<KeyOutcome<string>> {
  const hash = id === undefined ? undefined : await revokeOrgKeyRow(owner.tx, owner.orgId, id);
  if (hash === undefined) return { denied: { code: 'apiKeyNotFound' } };
  await deps.audit.record({ type: 'api_key.revoked', actor: 'user', userId: owner.memberId, ...client, data: { id, org_id: owner.orgId } }, owner.tx);
  return { ok: hash };
}

/**
 * A member leaves or is removed (CONTRACT §22): each key they made goes with the membership, the
 * system's doing, one audit row per key (its api_key.revoked hook, §24); the keys revoked, whose
 * hashes the caller forgets once the transaction has committed (IdentityCache.forgetKey; other
 * instances drop them on the rows' NOTIFY).
 */
export async function revokeMemberKeys(
  deps: Pick<OrgApiKeyDeps, 'audit'>, owner: Pick<OrgKeyOwner, 'tx' | 'orgId'>, memberId: number,
): Promise<RevokedKey[]> {
  const keys = await revokeMemberOrgKeys(owner.tx, owner.orgId, memberId);
  for (const { id } of keys) {
    await deps.audit.record({ type: 'api_key.revoked', actor: 'system', userId: memberId, data: { id, org_id: owner.orgId, reason: 'member_removed' } }, owner.tx);
  }
  return keys;
}
