// Organizations (CONTRACT §30, §22): the user's organizations and the one they act for (the keys,
// usage and billing pages then show that organization's, as its role allows), creation, and for
// one organization its members and roles and its invitations. Organization names and emails are
// shown as text.
import { field, fill, form, h, messages, table, uid, when } from './dom.js';
import { lang, t } from './i18n.js';
import { BASE, api } from './session.js';
import { acting, errorText, loadMe, nav, setActing } from './state.js';

const ROLES = ['member', 'admin', 'owner'];
const roleSelect = (id, value) => h('select', { id }, ROLES.map((r) => h('option', { value: r, selected: r === value }, t(`role.${r}`))));

function createForm() {
  const say = messages();
  return form({ id: 'create-org', 'aria-labelledby': 'h-create-org' }, [
    h('h2', { id: 'h-create-org' }, t('org.create')),
    field(t('org.name'), { name: 'name', id: 'org-name', required: true, maxlength: 100, autocomplete: 'organization' }),
    h('button', { type: 'submit', class: 'primary' }, t('org.createSubmit')), ...say.nodes,
  ], async (f) => {
    const res = await api('POST', '/api/v1/orgs', { name: f.elements.name.value });
    if (res.status !== 201) return say.fail(await errorText(res));
    await loadMe();
    nav('orgs', { id: res.json.id });
  });
}

async function membersSection(org, redraw) {
  const say = messages();
  const res = await api('GET', `/api/v1/orgs/${org.id}`);
  if (res.status !== 200) return h('p', { role: 'alert' }, await errorText(res));
  const members = res.json.members;
  if (!members) return null;
  const rows = members.map((m) => {
    const id = uid('role');
    const select = roleSelect(id, m.role);
    return [h('span', {}, m.email), h('div', { class: 'inline' }, h('label', { for: id, class: 'visually-hidden' }, t('org.roleOf', { email: m.email })), select,
      h('button', { type: 'button', onclick: async () => {
        const done = await api('PUT', `/api/v1/orgs/${org.id}/members/${m.user_id}`, { role: select.value });
        if (done.status === 200) redraw(t('org.roleSet', { email: m.email })); else say.fail(await errorText(done));
      } }, t('org.setRole'))), when(m.joined_at, lang()),
    h('button', { type: 'button', class: 'danger', 'aria-label': t('org.removeNamed', { email: m.email }), onclick: async () => {
      const done = await api('DELETE', `/api/v1/orgs/${org.id}/members/${m.user_id}`);
      if (done.status === 200) redraw(t('org.removed', { email: m.email })); else say.fail(await errorText(done));
    } }, t('org.remove'))];
  });
  return h('section', { 'aria-labelledby': 'h-members' }, h('h2', { id: 'h-members' }, t('org.members')),
    table(t('org.membersCaption', { name: org.name }), [t('field.email'), t('org.role'), t('org.joined'), t('keys.actions')], rows, '—'), ...say.nodes);
}

async function invitationsSection(org, redraw) {
  const say = messages();
  const res = await api('GET', `/api/v1/orgs/${org.id}/invitations`);
  if (res.status !== 200) return null;
  const rows = res.json.invitations.map((i) => [h('span', {}, i.email), t(`role.${i.role}`), when(i.expires_at, lang()),
    h('button', { type: 'button', 'aria-label': t('org.cancelNamed', { email: i.email }), onclick: async () => {
      const done = await api('DELETE', `/api/v1/orgs/${org.id}/invitations/${i.id}`);
      if (done.status === 200) redraw(t('org.cancelled', { email: i.email })); else say.fail(await errorText(done));
    } }, t('common.cancel'))]);
  const invite = form({ id: 'invite-form' }, [
    field(t('field.email'), { name: 'email', id: 'invite-email', type: 'email', required: true, autocomplete: 'off' }),
    field(t('org.role'), { tag: 'select', name: 'role', id: 'invite-role', options: ROLES.map((r) => h('option', { value: r }, t(`role.${r}`))) }),
    h('button', { type: 'submit', class: 'primary' }, t('org.invite')),
  ], async (f) => {
    const done = await api('POST', `/api/v1/orgs/${org.id}/invitations`, { email: f.elements.email.value, role: f.elements.role.value });
    if (done.status === 201) redraw(t('org.invited', { email: f.elements.email.value })); else say.fail(await errorText(done));
  });
  return h('section', { 'aria-labelledby': 'h-invitations' }, h('h2', { id: 'h-invitations' }, t('org.invitations')),
    table(t('org.invitationsCaption'), [t('field.email'), t('org.role'), t('org.expires'), t('keys.actions')], rows, t('org.noInvitations')), invite, ...say.nodes);
}

function actButton(org) {
  const mine = acting()?.id === org?.id || (!org && !acting());
  if (mine) return h('strong', {}, t('org.actingNow'));
  return h('button', { type: 'button', 'data-act': org ? org.id : 'self', 'aria-label': org ? t('org.actForNamed', { name: org.name }) : t('org.actForSelf'),
    onclick: () => { setActing(org?.id ?? null); nav('orgs', org ? { id: org.id } : {}); } }, org ? t('org.actFor') : t('org.actForSelf'));
}

export async function orgsPage(main, params) {
  const user = await loadMe();
  const orgs = user?.orgs ?? [];
  const chosen = orgs.find((o) => String(o.id) === params.get('id'));
  const status = h('p', { role: 'status', id: 'orgs-status', tabindex: '-1' }, params.get('joined') ? t('org.joinedNow') : '');
  const redraw = async (said) => {
    await orgsPage(main, params);
    const s = document.getElementById('orgs-status');
    s.textContent = said;
    s.focus();
  };
  const rows = [[t('org.yourself'), '—', user?.plan ?? '—', actButton(null)],
    ...orgs.map((o) => [h('a', { href: `${BASE}orgs?id=${o.id}` }, o.name), t(`role.${o.role}`), o.plan, actButton(o)])];
  const detail = chosen ? [h('h2', { id: 'h-org', class: 'org-name' }, chosen.name),
    h('p', {}, t('org.youAre', { role: t(`role.${chosen.role}`) }), ' ', t('org.pagesFollow')),
    ...(await Promise.all([membersSection(chosen, redraw), invitationsSection(chosen, redraw)]))] : [];
  fill(main, h('h1', { tabindex: '-1' }, t('nav.orgs')), status,
    table(t('org.listCaption'), [t('org.name'), t('org.role'), t('overview.plan'), t('org.acting')], rows, '—'), ...detail.filter(Boolean), createForm());
  return t('nav.orgs');
}
