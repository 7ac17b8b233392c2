// What acting for an organization (CONTRACT §22) means before any guard runs, shared by the
// pipeline's Gateway-Org and roles stages and by the own endpoints that read Gateway-Org (billing):
// how the header names an organization, whether a role is one of those allowed, and the plan that
// pools nothing. A leaf: it imports only the errors' types.
import type { Denial } from './errors/index.js';

const MAX_ID = 2_147_483_647;
const DECIMAL = /^[0-9]{1,20}$/;

/** The plan on which an organization's members count on their own counters (no free pools to multiply). */
export const UNPOOLED_PLAN = 'free';

/**
 * What a Gateway-Org header names: an id (0 when no organization can have it), or 'invalid' when
 * it is sent twice (Node joins the values with ", "), empty or not a decimal.
 */
export function gatewayOrgId(raw: string | string[]): number | 'invalid' {
  if (typeof raw !== 'string' || !DECIMAL.test(raw)) return 'invalid';
  const id = Number(raw);
  // A decimal is never negative, and 0 is already the id no organization has.
  return id <= MAX_ID ? id : 0;
}

/** The roles stage: the role the request acts with must be one of the route's. */
export function checkRoles(org: { role: string }, roles: readonly string[]): Denial | undefined {
  return roles.includes(org.role) ? undefined : { code: 'roleInsufficient', extra: { required_roles: [...roles], current_role: org.role } };
}
