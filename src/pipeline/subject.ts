// Whose plan and whose counter (CONTRACT §22): the one place that says, for a request, which plan
// the plan guard and every quota read, and on which counter its uses are counted. Not acting for an
// organization: the user's own plan and counters, as before organizations. Acting for one: the
// organization's plan; an organization on `free` (whoever set it) counts on the acting member's own
// counters (an organization key: its creator's, who is the request's user), so free organizations
// are no way to multiply free quotas; on any other plan, on its one pooled counter (counters.ts),
// for every member and key, on every quota (daily, monthly, per minute). The identity headers and the assertion say the user's own plan in
// x-user-plan and `plan`, and the organization's beside it (identityHeaders.ts).
import { UNPOOLED_PLAN } from '../orgActing.js';
import type { Counter } from '../storage/usage/index.js';
import type { OrgRole } from '../storage/orgs/index.js';

/** The organization a request acts for, as its guards found it. */
export interface ActingOrg {
  id: number;
  /** The role the request acts with. */
  role: OrgRole;
  /** The organization's plan. */
  plan: string;
}

export interface BillingSubject {
  /** The plan of the plan guard, of every quota and of their words and metrics. */
  plan: string;
  counter: Counter;
}

/** The subject of a request by `user` (the key's creator for an organization key), acting for `org` or not. */
export function billingSubject(user: { id: number; plan: string }, org: ActingOrg | undefined): BillingSubject {
  if (!org) return { plan: user.plan, counter: { ownerType: 'user', id: user.id } };
  return { plan: org.plan, counter: org.plan === UNPOOLED_PLAN ? { ownerType: 'user', id: user.id } : { ownerType: 'org', id: org.id } };
}
