// The users' pages' parts that follow the configuration (CONTRACT §24): the plans offered are the
// gateway's (GET /admin/v1/plans), never a fixed list; a user on a plan the configuration no longer
// names is shown as such and is not saved over without a choice; creating a user (an invitation by
// mail) and deleting one (the email typed again to confirm). Every value is set as text.
import { api, h } from './app.js';
import { allow, can } from './roles.js';

/** A line for the next users page to say (a deletion, from the page of a user now gone). */
export const notice = {
  text: '',
  set(text) { this.text = text; },
  take() { const text = this.text; this.text = ''; return text; },
};

/** The plans the admin API accepts, asked each time a page needs them: a reload of gateway.yaml may change them. */
export async function configuredPlans() {
  const { status, json } = await api('GET', 'api/v1/plans');
  return status === 200 ? json.plans.map((p) => p.name) : [];
}

/** A plan as the pages show it: one the configuration no longer names says so. */
export const planLabel = (plan, plans) => (plans.includes(plan) ? plan : `${plan} (not in the configuration)`);

/** The users filter's plan choice: any, or one of the configured plans. */
export function planFilter(plans, chosen) {
  return h('select', { id: 'plan', name: 'plan' }, ['', ...plans].map((p) => h('option', { value: p, selected: chosen === p }, p || 'any')));
}

/**
 * The user's plan: the configured plans, and the user's own when the configuration no longer names
 * it, shown selected but disabled (it can be kept, not chosen again).
 */
export function userPlanSelect(current, plans) {
  const retired = plans.includes(current) ? [] : [h('option', { value: current, selected: true, disabled: true }, planLabel(current, plans))];
  return h('select', { id: 'user-plan' }, ...retired, plans.map((p) => h('option', { value: p, selected: current === p }, p)));
}

/**
 * "Save plan": a change only when another plan was chosen. Pressing it on the current plan (a
 * retired one included) sends nothing: no plan is ever written that the operator did not pick.
 */
export function savePlan(select, current, act, status, override = () => false) {
  if (select.value === current) {
    status.textContent = `Plan unchanged: choose another plan than ${current} first`;
    return;
  }
  // `override` only when the operator ticked it, having read what it does (billing.js).
  act('PUT', '/plan', { plan: select.value, ...(override() ? { override: true } : {}) }, `Plan set to ${select.value}`);
}

/** Creates a user, who receives an invitation by mail (POST /admin/v1/users); then opens the new user's page. */
export function createUserForm(plans) {
  const status = h('p', { role: 'status', id: 'create-status' });
  const form = h('form', { id: 'create-user', 'aria-labelledby': 'h-create', onsubmit: async (e) => {
    e.preventDefault();
    const email = form.elements.email.value.trim();
    const { status: code, json } = await api('POST', 'api/v1/users', { email, plan: form.elements.plan.value });
    if (code !== 201) { status.textContent = json.error ?? 'Error'; return; }
    location.hash = `#/user/${json.id}?invited=1`;
  } },
  h('h3', { id: 'h-create' }, 'Create a user'),
  h('label', { for: 'new-email' }, 'Email'), h('input', { id: 'new-email', name: 'email', type: 'email', required: true, autocomplete: 'off' }),
  h('label', { for: 'new-plan' }, 'Plan'), h('select', { id: 'new-plan', name: 'plan' }, plans.map((p) => h('option', { value: p, selected: p === 'free' }, p))),
  allow('createUser', h('button', { type: 'submit', id: 'create-user-button' }, 'Create and send invitation')),
  h('p', { class: 'hint' }, 'The user receives a link, valid 7 days, to choose a password.'),
  status);
  return form;
}

/**
 * Deleting the account: the button works only once the user's email is typed again exactly, so a
 * slip on another user's page deletes nobody. Same erasure as the account's own deletion.
 */
export function deleteSection(user, onDeleted) {
  const status = h('p', { role: 'status', id: 'delete-status' });
  const button = h('button', { type: 'button', id: 'delete-user', class: 'danger', disabled: true, onclick: async () => {
    if (input.value !== user.email) return;
    const res = await api('DELETE', `api/v1/users/${user.id}`);
    // An organization's last owner is kept (409): the answer names the organizations to hand over first.
    const orgs = Array.isArray(res.json.orgs) ? `: ${res.json.orgs.map((o) => `${o.name} (#${o.id})`).join(', ')}` : '';
    if (res.status !== 200) { status.textContent = `${res.json.error ?? 'Error'}${orgs}`; return; }
    onDeleted();
  } }, 'Delete user');
  const input = allow('deleteUser', h('input', { id: 'delete-confirm', type: 'text', autocomplete: 'off', spellcheck: 'false', 'aria-describedby': 'delete-hint',
    oninput: () => { button.disabled = input.value !== user.email || !can('deleteUser'); } }));
  allow('deleteUser', button);
  return h('section', { 'aria-labelledby': 'h-delete' }, h('h3', { id: 'h-delete' }, 'Delete user'),
    h('p', { id: 'delete-hint' }, 'Deletes the account, its sessions, API keys, passkeys, webhook and usage. It cannot be undone. Type the user\'s email to confirm.'),
    h('label', { for: 'delete-confirm' }, 'Email'), input, button, status);
}
