// The console's organizations pages (CONTRACT §22, operators): the list with search and pages, and
// one organization with its members, plan and usage. app.js routes #/orgs and #/org/{id} here and
// hands over its helpers (`kit`), so both files draw alike. Every value is set as text: an
// organization's name is its creator's words.
import { allow } from './roles.js';
import { configuredPlans } from './users.js';
import { usageMeters, when } from './format.js';
import { billingSection, overrideChoice } from './billing.js';

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
  const rows = json.orgs.map((o) => [h('a', { href: `#/org/${o.id}` }, o.name), String(o.id), o.plan, String(o.member_count), when(o.created_at)]);
  const next = json.next_cursor ? (() => { const n = new URLSearchParams(q); n.set('cursor', json.next_cursor); return h('a', { href: `#/orgs?${n}` }, 'Next page'); })() : null;
  show(h('h2', {}, 'Organizations'), form, table(['Name', 'Id', 'Plan', 'Members', 'Created'], rows), next);
}

/** The plan changes of the organization, newest first: an operator's (admin.org_plan_changed) and billing's (billing.plan_changed). */
async function planChanges(api, orgId) {
  const [operators, billing] = await Promise.all(['admin.org_plan_changed', 'billing.plan_changed'].map((type) => api('GET', `api/v1/audit?type=${type}&limit=200`)));
  if (operators.status !== 200) return null;
  const events = [...operators.json.events ?? [], ...billing.json.events ?? []].filter((e) => e.data?.org_id === orgId);
  return events.sort((a, b) => Date.parse(b.at) - Date.parse(a.at)).map((e) => [when(e.at), e.actor, e.data.plan, e.data.previous ?? e.data.previous_plan ?? null]);
}

/** The pooled counter against the plan's limits; on free, members count on their own counters. */
function orgUsage(o, plan) {
  if (o.daily_usage == null && o.monthly_usage == null) return [{ label: 'Pooled uses', used: null, limit: null }];
  return [{ label: 'Today (UTC)', used: o.daily_usage, limit: plan?.daily ?? null }, { label: 'This month (UTC)', used: o.monthly_usage, limit: plan?.monthly ?? null }];
}

/** #/org/{id}: plan (with its change), usage of its pooled counter, members, and its audit events. */
export async function orgView(id, kit) {
  const { h, api, table, renderer, $ } = kit;
  const show = renderer();
  const [org, keys, plans, offered] = await Promise.all([api('GET', `api/v1/orgs/${id}`), api('GET', `api/v1/orgs/${id}/api-keys`), configuredPlans(), api('GET', 'api/v1/plans')]);
  if (org.status !== 200) return show(h('p', { role: 'alert' }, org.json.error ?? 'Error'));
  const o = org.json;
  const changes = await planChanges(api, o.id);
  const plan = (offered.json.plans ?? []).find((p) => p.name === o.plan);
  const status = h('p', { role: 'status', id: 'org-status' });
  const planSelect = h('select', { id: 'org-plan' }, [...new Set([...plans, o.plan])].map((p) => h('option', { value: p, selected: o.plan === p }, p)));
  const choice = overrideChoice(o.billing, 'org');
  const savePlan = async () => {
    const plan = planSelect.value;
    const res = await api('PUT', `api/v1/orgs/${id}/plan`, { plan, ...(choice.override() ? { override: true } : {}) });
    if (res.status !== 200) { status.textContent = res.json.error ?? 'Error'; return; }
    // Drawn again with the new plan; the keyboard stays on the button.
    await orgView(id, kit);
    if ($('org-status')) $('org-status').textContent = `Plan set to ${plan}`;
    $('save-org-plan')?.focus();
  };
  show(
    h('h2', {}, o.name),
    status,
    h('section', { 'aria-labelledby': 'h-org' }, h('h3', { id: 'h-org' }, 'Organization'),
      h('p', {}, `Id ${o.id} · created `, when(o.created_at), ` · ${o.members.length} member${o.members.length === 1 ? '' : 's'}`),
      h('label', { for: 'org-plan' }, 'Plan'), allow('changeOrgPlan', planSelect),
      allow('changeOrgPlan', h('button', { type: 'button', id: 'save-org-plan', onclick: savePlan }, 'Save plan')), choice.node),
    billingSection(o.billing, 'org'),
    h('section', { 'aria-labelledby': 'h-org-usage' }, h('h3', { id: 'h-org-usage' }, 'Usage'),
      usageMeters('org-usage', orgUsage(o, plan))),
    h('section', { 'aria-labelledby': 'h-members' }, h('h3', { id: 'h-members' }, 'Members'),
      table(['Email', 'Role', 'Joined'], o.members.map((m) => [h('a', { href: `#/user/${m.user_id}` }, m.email), m.role, when(m.joined_at)]))),
    // The organization's own keys, here and never among their creator's personal keys (CONTRACT §29).
    keys.status === 200 ? h('section', { 'aria-labelledby': 'h-org-keys' }, h('h3', { id: 'h-org-keys' }, 'Organization API keys'),
      table(['Id', 'Name', 'Start', 'Role', 'Scopes', 'Created by', 'Created', 'Expires', 'Last used'], keys.json.api_keys.map((k) => [
        String(k.id), k.name, k.start, k.role, k.scopes ? k.scopes.join(' ') : 'all', h('a', { href: `#/user/${k.created_by}` }, String(k.created_by)),
        when(k.created_at), when(k.expires_at) ?? 'never', when(k.last_used_at)]))) : null,
    changes ? h('section', { 'aria-labelledby': 'h-org-plan-changes' }, h('h3', { id: 'h-org-plan-changes' }, 'Recent plan changes'),
      table(['When', 'Actor', 'Plan', 'Before'], changes)) : null,
  );
}
