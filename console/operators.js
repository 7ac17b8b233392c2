// The console's Operators page (CONTRACT §24, admin only): who may use the console and the admin
// API, with their role, whether they enrolled and have a second factor; an admin changes a role,
// resets another operator's second factor (a lost authenticator: the page then shows the new
// enrolment link to hand over; never one's own, which the API refuses too) or removes an operator
// (the email typed again to confirm). app.js routes #/operators here and hands
// over its helpers (`kit`). The nav link is hidden for other roles; the admin API refuses them anyway.
import { when } from './format.js';

/** #/operators: the list, a role change per operator, and the removal. */
export async function operatorsView(kit) {
  const { h, api, table, renderer, $ } = kit;
  const show = renderer();
  const [{ status, json }, me] = await Promise.all([api('GET', 'api/v1/operators'), api('GET', 'api/v1/operator')]);
  if (status !== 200) return show(h('h2', {}, 'Operators'), h('p', { role: 'alert' }, json.error ?? 'Error'));
  const myId = me.json?.operator?.id;
  const said = h('p', { role: 'status', id: 'operators-status' });
  // Drawn again after a change, saying what was done (and the link to hand over, if the change made
  // one); the keyboard returns to the control it was on.
  const done = async (res, text, link) => {
    if (res.status !== 200) { said.textContent = res.json.error ?? 'Error'; return; }
    const focused = document.activeElement?.id;
    await operatorsView(kit);
    if ($('operators-status')) $('operators-status').replaceChildren(text, ...(link ? [' ', h('code', { id: 'enrolment-link' }, link)] : []));
    if (focused && $(focused)) $(focused).focus();
  };
  const rows = json.operators.map((o) => {
    const select = h('select', { id: `role-${o.id}`, 'aria-label': `Role of ${o.email}` },
      ['viewer', 'support', 'admin'].map((r) => h('option', { value: r, selected: o.role === r }, r)));
    const save = h('button', { type: 'button', id: `save-role-${o.id}`, 'aria-label': `Save role of ${o.email}`, onclick: async () => {
      if (select.value === o.role) { said.textContent = `Role unchanged: choose another role than ${o.role} first`; return; }
      await done(await api('PUT', `api/v1/operators/${o.id}/role`, { role: select.value }), `${o.email} is now ${select.value}`);
    } }, 'Save role');
    return [o.email, h('span', {}, select, ' ', save), o.enrolled ? 'yes' : 'no', o.mfa ? 'yes' : 'no', resetButton(o, myId, kit, done), when(o.created_at)];
  });
  show(h('h2', {}, 'Operators'), said,
    table(['Email', 'Role', 'Enrolled', 'Second factor', 'Reset', 'Added'], rows),
    h('p', { class: 'hint' }, 'New operators are added with `gateway operators add`, which prints their enrolment link.'),
    removeSection(json.operators, kit, done));
}

/**
 * Resetting an operator's second factor: they can no longer sign in until they enrol again, with
 * the one-time link the answer carries (shown once, to give to that person only). One's own is off:
 * a stolen session must not trade the owner's authenticator for its own.
 */
function resetButton(o, myId, { h, api }, done) {
  const own = o.id === myId;
  const why = own ? 'You cannot reset your own second factor: another admin, or `gateway operators reset-mfa`, does it' : undefined;
  const label = `Reset MFA of ${o.email}`;
  return h('button', { type: 'button', id: `reset-mfa-${o.id}`, 'aria-label': label, disabled: own, title: why, 'aria-description': why,
    onclick: async () => {
      const res = await api('DELETE', `api/v1/operators/${o.id}/mfa`);
      const link = res.json?.enrolment_url;
      const next = link ? 'Give them this enrolment link (single use, 24 hours):' : 'No enrolment link: set admin.publicUrl, then run gateway operators reset-mfa.';
      const text = `Second factor of ${o.email} reset. ${next}`;
      await done(res, text, link);
    } }, 'Reset MFA');
}

/** Removing an operator: the button works only once an operator's email is typed exactly. */
function removeSection(operators, { h, api }, done) {
  const target = () => operators.find((o) => o.email === input.value.trim());
  const button = h('button', { type: 'button', id: 'remove-operator', class: 'danger', disabled: true, onclick: async () => {
    const o = target();
    if (o) await done(await api('DELETE', `api/v1/operators/${o.id}`), `Operator ${o.email} removed`);
  } }, 'Remove operator');
  const input = h('input', { id: 'remove-confirm', type: 'text', autocomplete: 'off', spellcheck: 'false', 'aria-describedby': 'remove-hint',
    oninput: () => { button.disabled = !target(); } });
  return h('section', { 'aria-labelledby': 'h-remove' }, h('h3', { id: 'h-remove' }, 'Remove an operator'),
    h('p', { id: 'remove-hint' }, 'Their console sessions and personal tokens stop working at once. Type the operator\'s email to confirm.'),
    h('label', { for: 'remove-confirm' }, 'Email'), input, button);
}
