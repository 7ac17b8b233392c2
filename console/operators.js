// The console's Operators page (CONTRACT §24, admin only): who may use the console and the admin
// API, with their role, whether they enrolled and have a second factor; an admin changes a role or
// removes an operator (the email typed again to confirm). app.js routes #/operators here and hands
// over its helpers (`kit`). The nav link is hidden for other roles; the admin API refuses them anyway.

/** #/operators: the list, a role change per operator, and the removal. */
export async function operatorsView(kit) {
  const { h, api, table, renderer, $ } = kit;
  const show = renderer();
  const { status, json } = await api('GET', 'api/v1/operators');
  if (status !== 200) return show(h('h2', {}, 'Operators'), h('p', { role: 'alert' }, json.error ?? 'Error'));
  const said = h('p', { role: 'status', id: 'operators-status' });
  // Drawn again after a change, saying what was done; the keyboard returns to the control it was on.
  const done = async (res, text) => {
    if (res.status !== 200) { said.textContent = res.json.error ?? 'Error'; return; }
    const focused = document.activeElement?.id;
    await operatorsView(kit);
    if ($('operators-status')) $('operators-status').textContent = text;
    if (focused && $(focused)) $(focused).focus();
  };
  const rows = json.operators.map((o) => {
    const select = h('select', { id: `role-${o.id}`, 'aria-label': `Role of ${o.email}` },
      ['viewer', 'support', 'admin'].map((r) => h('option', { value: r, selected: o.role === r }, r)));
    const save = h('button', { type: 'button', id: `save-role-${o.id}`, 'aria-label': `Save role of ${o.email}`, onclick: async () => {
      if (select.value === o.role) { said.textContent = `Role unchanged: choose another role than ${o.role} first`; return; }
      await done(await api('PUT', `api/v1/operators/${o.id}/role`, { role: select.value }), `${o.email} is now ${select.value}`);
    } }, 'Save role');
    return [o.email, h('span', {}, select, ' ', save), o.enrolled ? 'yes' : 'no', o.mfa ? 'yes' : 'no', o.created_at];
  });
  show(h('h2', {}, 'Operators'), said,
    table(['Email', 'Role', 'Enrolled', 'Second factor', 'Added'], rows),
    h('p', { class: 'hint' }, 'New operators are added with `gateway operators add`, which prints their enrolment link.'),
    removeSection(json.operators, kit, done));
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
