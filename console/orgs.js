// The console's organizations pages (CONTRACT §22, operators): the list with search and pages, and
// one organization with its members, plan and usage. app.js routes #/orgs and #/org/{id} here and
// hands over its helpers (`kit`), so both files draw alike. Every value is set as text: an
// organization's name is its creator's words.
import { allow } from './roles.js';
import { configuredPlans } from './users.js';

/** #/orgs?query=&plan=&cursor=: newest first, searched by name or id, filtered by plan. */
export async function orgsView(params, { h, api, table, renderer }) {
  const show = renderer();
  const q = new URLSearchParams(params);
  // The configuration's plans, as on the users' pages (never a fixed list, CONTRACT §24).
  const plans = await configuredPlans();
  const form = h('form', { id: 'org-search', role: 'search', onsubmit: (e) => {
    e.preventDefault();
    const next = new URLSearchParams();
    for (const name of ['query', 'plan']) if (form.elements[name].value) next.set(name, form.elements[name].value);
    location.hash = `#/orgs?${next}`;
  } },
  h('label', { for: 'org-query' }, 'Search'), h('input', { id: 'org-query', name: 'query', type: 'search', value: q.get('query') ?? '', placeholder: 'name or id' }),
  h('label', { for: 'org-plan-filter' }, 'Plan'),
  h('select', { id: 'org-plan-filter', name: 'plan' }, ['', ...plans].map((p) => h('option', { value: p, selected: q.get('plan') === p }, p || 'any'))),
  h('button', { type: 'submit' }, 'Search'));
  const { status, json } = await api('GET', `api/v1/orgs?${q}`);
  if (status !== 200) return show(h('h2', {}, 'Organizations'), form, h('p', { role: 'alert' }, json.error ?? 'Error'));
  const rows = json.orgs.map((o) => [h('a', { href: `#/org/${o.id}` }, o.name), String(o.id), o.plan, String(o.member_count), o.created_at]);
  const next = json.next_cursor ? (() => { const n = new URLSearchParams(q); n.set('cursor', json.next_cursor); return h('a', { href: `#/orgs?${n}` }, 'Next page'); })() : null;
  show(h('h2', {}, 'Organizations'), form, table(['Name', 'Id', 'Plan', 'Members', 'Created'], rows), next);
}

const usageText = (n) => (n === null || n === undefined ? 'not counted here (free: each member counts on their own)' : String(n));

/** #/org/{id}: plan (with its change), usage of its pooled counter, members, and its audit events. */
export async function orgView(id, kit) {
  const { h, api, table, renderer, $ } = kit;
  const show = renderer();
  const [org, audit, plans] = await Promise.all([api('GET', `api/v1/orgs/${id}`), api('GET', 'api/v1/audit?type=admin.org_plan_changed&limit=200'), configuredPlans()]);
  if (org.status !== 200) return show(h('p', { role: 'alert' }, org.json.error ?? 'Error'));
  const o = org.json;
  const status = h('p', { role: 'status', id: 'org-status' });
  const planSelect = h('select', { id: 'org-plan' }, [...new Set([...plans, o.plan])].map((p) => h('option', { value: p, selected: o.plan === p }, p)));
  const savePlan = async () => {
    const plan = planSelect.value;
    const res = await api('PUT', `api/v1/orgs/${id}/plan`, { plan });
    if (res.status !== 200) { status.textContent = res.json.error ?? 'Error'; return; }
    // Drawn again with the new plan; the keyboard stays on the button.
    await orgView(id, kit);
    if ($('org-status')) $('org-status').textContent = `Plan set to ${plan}`;
    $('save-org-plan')?.focus();
  };
  const changes = (audit.json.events ?? []).filter((e) => e.data?.org_id === o.id);
  show(
    h('h2', {}, o.name),
    status,
    h('section', { 'aria-labelledby': 'h-org' }, h('h3', { id: 'h-org' }, 'Organization'),
      h('p', {}, `Id ${o.id} · created ${o.created_at} · ${o.members.length} member${o.members.length === 1 ? '' : 's'}`),
      h('label', { for: 'org-plan' }, 'Plan'), allow('changeOrgPlan', planSelect),
      allow('changeOrgPlan', h('button', { type: 'button', id: 'save-org-plan', onclick: savePlan }, 'Save plan'))),
    h('section', { 'aria-labelledby': 'h-org-usage' }, h('h3', { id: 'h-org-usage' }, 'Usage'),
      table(['Window', 'Uses'], [['Today', usageText(o.daily_usage)], ['This month', usageText(o.monthly_usage)]])),
    h('section', { 'aria-labelledby': 'h-members' }, h('h3', { id: 'h-members' }, 'Members'),
      table(['Email', 'Role', 'Joined'], o.members.map((m) => [h('a', { href: `#/user/${m.user_id}` }, m.email), m.role, m.joined_at]))),
    audit.status === 200 ? h('section', { 'aria-labelledby': 'h-org-plan-changes' }, h('h3', { id: 'h-org-plan-changes' }, 'Recent plan changes'),
      table(['When', 'Actor', 'Plan', 'Before'], changes.map((e) => [e.at, e.actor, e.data.plan, e.data.previous ?? null]))) : null,
  );
}
