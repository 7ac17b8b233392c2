// Acting for an organization (CONTRACT §22): the Gateway-Org stage (3) and the roles stage (6).
// Gateway-Org is read on routes only, and there only on those that declare `org:` (or `roles`):
// a route written before organizations keeps its meaning, and refuses the header (400). Who is a
// member, with which role, and the organization's plan come from memory (storage/feed/membershipCache.ts).
import type { IncomingHttpHeaders } from 'node:http';
import type { Denial } from '../../errors/index.js';
import type { MembershipCache } from '../../storage/feed/index.js';
import type { OrgRole } from '../../storage/orgs/index.js';
import type { StoreCalls } from '../../telemetry/storeCalls.js';
import type { ActingOrg } from '../subject.js';
import { gatewayOrgId } from '../../orgActing.js';
import type { Identity } from './authenticate.js';

export interface OrgDeps {
  memberships: Pick<MembershipCache, 'membership'>;
}

/** What the stage reads of the run (stages.ts's GuardRun). */
interface OrgRun {
  readonly policy: { org?: 'required' | 'optional'; roles?: readonly string[] };
  readonly headers: IncomingHttpHeaders;
  readonly deps: { orgs?: OrgDeps };
  auth: { kind: string };
  calls: StoreCalls;
  org?: ActingOrg;
  /** The organization an organization key acts for, set by keyOrgStage. */
  keyOrg?: ActingOrg;
}

/**
 * The organization `Gateway-Org` names, if the caller may act for it: set on the run, or the
 * refusal. `unauthenticated` answers the header without a credential (an `auth: optional` route).
 */
export async function orgStage(run: OrgRun, unauthenticated: Denial): Promise<Denial | undefined> {
  // An organization key acts for its organization: where acting is not applicable, neither is it.
  if (run.policy.org === undefined && !run.policy.roles) return { code: 'orgNotApplicable' };
  if (run.auth.kind !== 'authenticated') return unauthenticated;
  const raw = run.headers['gateway-org'];
  if (raw === undefined) {
    run.org = run.keyOrg;
    return undefined;
  }
  const id = gatewayOrgId(raw);
  if (id === 'invalid') return { code: 'badRequest' };
  const identity = run.auth as unknown as Identity;
  // An organization key names its own organization or none; a personal key speaks for its owner alone.
  if (run.keyOrg) {
    if (id !== run.keyOrg.id) return { code: 'orgAccessDenied' };
    run.org = run.keyOrg;
    return undefined;
  }
  if (identity.method !== 'bearer') return { code: 'orgAccessDenied' };
  const membership = id ? await run.deps.orgs!.memberships.membership(id, identity.user.id, run.calls) : undefined;
  if (!membership) return { code: 'orgAccessDenied' };
  run.org = { id, role: membership.role, plan: membership.plan };
  return undefined;
}

/** Strongest first. */
const ROLE_ORDER: readonly OrgRole[] = ['owner', 'admin', 'member'];

/**
 * An organization key's standing (CONTRACT §22): refused (401) while its creator is not a member,
 * else it acts for its organization with min(key role, creator's current role). `invalid` is the
 * refusal of a key that is not valid (the authenticate stage's).
 */
export async function keyOrgStage(run: OrgRun, invalid: Denial): Promise<Denial | undefined> {
  const { user, orgKey } = run.auth as unknown as Identity;
  if (!orgKey || !run.deps.orgs) return invalid;
  const membership = await run.deps.orgs.memberships.membership(orgKey.orgId, user.id, run.calls);
  if (!membership) return invalid;
  const role = ROLE_ORDER[Math.max(ROLE_ORDER.indexOf(orgKey.role), ROLE_ORDER.indexOf(membership.role))]!;
  run.keyOrg = { id: orgKey.orgId, role, plan: membership.plan };
  return undefined;
}
