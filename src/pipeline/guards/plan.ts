// Plan guard (spec §5): after authentication, the user's plan must be in the route's list.
import { SPEC_UPGRADE_URL, type Denial } from '../../errors/index.js';

// The spec's "no current user: 401 Non authentifié" cannot happen here: a route with plans needs
// auth: required (config/schema.ts), so the authentication guard has refused an anonymous request.
// `plan`: the request's (pipeline/subject.ts: the organization's when acting for one, CONTRACT §22).
export function checkPlan(plan: string, allowed: readonly string[]): Denial | null {
  if (allowed.includes(plan)) return null;
  return { code: 'planInsufficient', extra: { required: [...allowed], current_plan: plan, upgrade_url: SPEC_UPGRADE_URL } };
}
