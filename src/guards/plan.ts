// Plan guard (spec §5): after authentication, the user's plan must be in the route's list.
import { UPGRADE_URL, type Denial } from '../errors.js';
import type { User } from '../storage/users.js';

export function checkPlan(user: User | undefined, allowed: readonly string[]): Denial | null {
  if (!user) return { code: 'notAuthenticated' };
  if (allowed.includes(user.plan)) return null;
  return { code: 'planInsufficient', extra: { required: [...allowed], current_plan: user.plan, upgrade_url: UPGRADE_URL } };
}
