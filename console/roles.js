// What the signed-in operator's role allows in the console (CONTRACT §24). The console asks once,
// after sign-in, who it acts as (GET /admin/v1/operator) and disables every control the role does
// not allow, saying which role it needs. The table mirrors the least roles the admin routes declare
// (src/admin/access.ts and the routes' `config.role`); the server still decides, this only spares
// the operator a refusal.

/** Each console action and the least role that may do it. An action not listed is the admin's. */
export const LEAST_ROLE = {
  changePlan: 'admin',
  createUser: 'admin',
  deleteUser: 'admin',
  changeOrgPlan: 'admin',
  manageOperators: 'admin',
  setActive: 'support',
  revokeSession: 'support',
  revokeKey: 'support',
  resetMfa: 'support',
};

const ORDER = ['viewer', 'support', 'admin'];
// Until the answer arrives (or if it never does), the least role: nothing is offered that may be refused.
let role = 'viewer';

/** The caller's role, as GET api/v1/operator answered it. */
export function setRole(next) {
  role = ORDER.includes(next) ? next : 'viewer';
}

export const currentRole = () => role;

/** Whether the role allows the action. */
export const can = (action) => ORDER.indexOf(role) >= ORDER.indexOf(LEAST_ROLE[action] ?? 'admin');

/** Why a control is off: the role it needs. */
export const needs = (action) => `Needs the ${LEAST_ROLE[action] ?? 'admin'} role (you are ${role})`;

/** The control, disabled with the reason when the role does not allow the action; as it is otherwise. */
export function allow(action, el) {
  if (can(action)) return el;
  el.disabled = true;
  el.title = needs(action);
  el.setAttribute('aria-description', needs(action));
  return el;
}
