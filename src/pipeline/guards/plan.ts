// Plan guard (spec §5): after authentication, the user's plan must be in the route's list.
import { SPEC_UPGRADE_URL, type Denial } from '../../errors/index.js';
import type { User } from '../../storage/users.js';

// The spec's "no current user: 401 Non authentifié" cannot happen here: a route with plans needs
// auth: required (config/schema.ts), so the authentication guard has refused an anonymous request.
export function checkPlan(user: User, allowed: readonly string[]): Denial | null {
  if (allowed.includes(user.plan)) return null;
  return { code: 'planInsufficient', extra: { required: [...allowed], current_plan: user.plan, upgrade_url: SPEC_UPGRADE_URL } };
}
