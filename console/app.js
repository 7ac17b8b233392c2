// The console's pages: plain DOM, every value set as text (never as markup), since emails, user
// agents, passkey names and audit data are chosen by whoever registered. The helpers are exported
// for the pages kept in files of their own (users.js, overview.js).
import { configuredPlans, createUserForm, deleteSection, notice, planFilter, planLabel, savePlan, userPlanSelect } from './users.js';
import { overviewView } from './overview.js';
import { orgView, orgsView } from './orgs.js';
import { operatorsView } from './operators.js';
import { billingSection, overrideChoice } from './billing.js';
import { allow, can, setRole } from './roles.js';
import { usageMeters, when } from './format.js';

let csrf = '';
const $ = (id) => document.getElementById(id);

/** An element with attributes and children; strings become text nodes. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (v !== false && v != null) el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) if (c != null) el.append(c instanceof Node ? c : String(c));
  return el;
}

export async function api(method, path, body) {
  const res = await fetch(`/console/${path}`, {
    method,
    credentials: 'same-origin',
    headers: { ...(method === 'GET' ? {} : { 'x-csrf-token': csrf }), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  if (res.status === 401) { signedOut(); throw new Error('signed out'); }
  const json = await res.json().catch(() => ({}));
  return { status: res.status, json };
}

export function table(headers, rows) {
  return h('table', {}, h('thead', {}, h('tr', {}, headers.map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, rows.length ? rows.map((r) => h('tr', {}, r.map((c) => h('td', {}, c ?? '—')))) : h('tr', {}, h('td', { colspan: headers.length }, 'None'))));
}

let generation = 0;

/** A view's renderer: it draws only while the view is still the one asked for (a late answer of a page left behind draws nothing). */
export function renderer() {
  const mine = generation;
  return (...nodes) => { if (mine === generation) $('view').replaceChildren(...nodes.filter((n) => n != null)); };
}

function show(...nodes) {
  $('view').replaceChildren(...nodes.filter((n) => n != null));
}

function signedOut() {
  csrf = '';
  $('nav').hidden = true;
  $('sign-in').hidden = false;
  show();
  $('key').focus();
  // Without a shared key (CONTRACT §29), operators are the only way in: the key's form goes.
  void fetch('/console/sign-in-methods').then((res) => res.json()).then((methods) => {
    $('key-sign-in').hidden = !methods.key;
    $('key').required = methods.key;
    if (!methods.key) $('operator-link').focus();
  }).catch(() => {});
}

async function signedIn() {
  // Who the console acts as, asked once before any page is drawn: its role decides which controls are on (roles.js).
  const me = await api('GET', 'api/v1/operator');
  setRole(me.status === 200 ? me.json.role : 'viewer');
  $('nav-operators').hidden = !can('manageOperators');
  // An operator adds a passkey here where the console offers them (admin.passkeys, its host name).
  $('add-passkey').hidden = !(me.json.operator && (await fetch('/console/operator/passkey')).ok);
  $('sign-in').hidden = true;
  $('nav').hidden = false;
  // The audit log exists where the gateway has one (CONTRACT §17).
  $('nav-audit').hidden = (await api('GET', 'api/v1/audit?limit=1')).status !== 200;
  route();
}

// ---- users
async function usersView(params) {
  const show = renderer();
  const q = new URLSearchParams(params);
  const plans = await configuredPlans();
  const form = h('form', { id: 'user-search', role: 'search', onsubmit: (e) => {
    e.preventDefault();
    const next = new URLSearchParams();
    for (const name of ['query', 'plan', 'active']) if (form.elements[name].value) next.set(name, form.elements[name].value);
    location.hash = `#/users?${next}`;
  } },
  h('label', { for: 'query' }, 'Search'), h('input', { id: 'query', name: 'query', type: 'search', value: q.get('query') ?? '', placeholder: 'email or id' }),
  h('label', { for: 'plan' }, 'Plan'), planFilter(plans, q.get('plan')),
  h('label', { for: 'active' }, 'Active'),
  h('select', { id: 'active', name: 'active' }, [['', 'any'], ['true', 'active'], ['false', 'inactive']].map(([v, t]) => h('option', { value: v, selected: q.get('active') === v }, t))),
  h('button', { type: 'submit' }, 'Search'));
  const { status, json } = await api('GET', `api/v1/users?${q}`);
  if (status !== 200) return show(h('h2', {}, 'Users'), form, h('p', { role: 'alert' }, json.error ?? 'Error'));
  const rows = json.users.map((u) => [h('a', { href: `#/user/${u.id}` }, u.email), String(u.id), planLabel(u.plan, plans), u.active ? 'yes' : 'no', when(u.created_at)]);
  const next = json.next_cursor ? (() => { const n = new URLSearchParams(q); n.set('cursor', json.next_cursor); return h('a', { href: `#/users?${n}` }, 'Next page'); })() : null;
  const said = h('p', { role: 'status', id: 'users-status' }, notice.take());
  show(h('h2', {}, 'Users'), said, createUserForm(plans), form, table(['Email', 'Id', 'Plan', 'Active', 'Created'], rows), next);
}

// Uses per day as bars, drawn by uPlot (uplot.js, loaded before this module) on a canvas; the same
// numbers follow as a table, for screen readers and for copying.
function usageChart(history) {
  const days = [...history].reverse();
  const plot = h('div', { class: 'chart', role: 'img', 'aria-label': `Uses per day over ${days.length} days, at most ${Math.max(0, ...days.map((d) => d.uses))} in a day` });
  const options = {
    width: 620, height: 180,
    scales: { x: { time: true } },
    // The gateway's days are UTC days: shown as such wherever the operator is.
    tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
    series: [{ label: 'Day' }, { label: 'Uses', stroke: '#2c6fbb', fill: '#2c6fbb', paths: uPlot.paths.bars({ size: [0.7, 16] }), points: { show: false } }],
    // Whole uses: no 2.5 on the scale.
    axes: [{}, { size: 50, incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 1e6, 1e7, 1e8] }],
  };
  // Midnight UTC of each day, in seconds: the days the gateway counts in.
  new uPlot(options, [days.map((d) => Date.parse(`${d.date}T00:00:00Z`) / 1000), days.map((d) => d.uses)], plot);
  const numbers = h('details', {}, h('summary', {}, 'Uses per day'), table(['Day', 'Uses'], days.map((d) => [d.date, String(d.uses)])));
  return h('div', {}, plot, numbers);
}

/** Today's and this month's uses against the plan's limits (a meter each), then the last 30 days. */
function userUsage(usage) {
  return h('div', {}, usageMeters('user-usage', [
    { label: 'Today (UTC)', used: usage.today.uses, limit: usage.limits.daily },
    { label: 'This month (UTC)', used: usage.month.uses, limit: usage.limits.monthly },
  ]), h('h4', {}, 'Last 30 days'), usageChart(usage.history));
}

async function userView(id, query = '') {
  const show = renderer();
  const mine = generation;
  const plans = await configuredPlans();
  const [user, usage, sessions, keys, passkeys, identities, deliveries, audit] = await Promise.all(
    ['', '/usage', '/sessions', '/api-keys', '/passkeys', '/identities', '/webhook-deliveries'].map((p) => api('GET', `api/v1/users/${id}${p}`))
      .concat(api('GET', `api/v1/audit?user_id=${id}&limit=50`)));
  if (user.status !== 200) return show(h('p', { role: 'alert' }, user.json.error ?? 'Error'));
  const u = user.json;
  const status = h('p', { role: 'status', id: 'user-status' }, new URLSearchParams(query).has('invited') ? `Invitation sent to ${u.email}` : '');
  const act = async (method, path, body, done) => {
    // The page is drawn again after a change: a keyboard user keeps their place (the same button).
    const focused = document.activeElement?.id;
    // A path of the user's (`/plan`), or one of the admin API's own (`api/v1/api-keys/7`).
    const res = await api(method, path.startsWith('api/') ? path : `api/v1/users/${id}${path}`, body);
    status.textContent = res.status === 200 ? done : (res.json.error ?? 'Error');
    if (res.status === 200 && mine === generation) {
      await userView(id).then(() => {
        if ($('user-status')) $('user-status').textContent = done;
        if (focused && $(focused)) $(focused).focus();
      });
    }
  };
  const planSelect = userPlanSelect(u.plan, plans);
  const choice = overrideChoice(u.billing, 'user');
  const sections = [
    h('h2', {}, u.email),
    status,
    h('section', { 'aria-labelledby': 'h-account' }, h('h3', { id: 'h-account' }, 'Account'),
      h('p', {}, `Id ${u.id} · created `, when(u.created_at), ` · email ${u.email_verified_at ? 'verified' : 'not verified'}`),
      h('label', { for: 'user-plan' }, 'Plan'), allow('changePlan', planSelect),
      allow('changePlan', h('button', { type: 'button', id: 'save-plan', onclick: () => savePlan(planSelect, u.plan, act, status, choice.override) }, 'Save plan')),
      choice.node,
      allow('setActive', h('button', {
        type: 'button', id: 'toggle-active', onclick: () => act('PUT', '/active', { active: !u.active }, u.active ? 'Deactivated' : 'Activated'),
      }, u.active ? 'Deactivate' : 'Activate'))),
    billingSection(u.billing, 'user'),
    h('section', { 'aria-labelledby': 'h-usage' }, h('h3', { id: 'h-usage' }, 'Usage'), usage.status === 200 ? userUsage(usage.json) : null),
    h('section', { 'aria-labelledby': 'h-sessions' }, h('h3', { id: 'h-sessions' }, 'Sessions'),
      table(['Id', 'Client', 'IP', 'Created', 'Last used', 'Action'], (sessions.json.sessions ?? []).map((s) => [String(s.id), s.user_agent, s.ip, when(s.created_at), when(s.last_used_at),
        allow('revokeSession', h('button', {
          type: 'button', 'aria-label': `Revoke session ${s.id}`, onclick: () => act('DELETE', `/sessions/${s.id}`, undefined, `Session ${s.id} revoked`),
        }, 'Revoke'))])),
      allow('revokeSession', h('button', { type: 'button', id: 'revoke-all', onclick: () => act('DELETE', '/sessions', undefined, 'All sessions revoked') }, 'Revoke all sessions'))),
    h('section', { 'aria-labelledby': 'h-keys' }, h('h3', { id: 'h-keys' }, 'API keys'),
      table(['Id', 'Name', 'Start', 'Scopes', 'Created', 'Expires', 'Last used', 'Action'], (keys.json.api_keys ?? []).map((k) => [
        String(k.id), k.name, k.start, k.scopes ? k.scopes.join(' ') : 'all', when(k.created_at), when(k.expires_at) ?? 'never', when(k.last_used_at),
        // The same revocation as DELETE /admin/v1/api-keys/{id}: refused on every instance within a second.
        k.active ? allow('revokeKey', h('button', {
          type: 'button', 'aria-label': `Revoke API key ${k.id}`, onclick: () => act('DELETE', `api/v1/api-keys/${k.id}`, undefined, `API key ${k.id} revoked`),
        }, 'Revoke'))
          : 'revoked']))),
    h('section', { 'aria-labelledby': 'h-mfa' }, h('h3', { id: 'h-mfa' }, 'Second factor'),
      allow('resetMfa', h('button', { type: 'button', id: 'reset-mfa', onclick: () => act('DELETE', '/mfa', undefined, 'Second factor removed') }, 'Remove TOTP and recovery codes'))),
    (passkeys.json.passkeys ?? []).length ? h('section', { 'aria-labelledby': 'h-passkeys' }, h('h3', { id: 'h-passkeys' }, 'Passkeys'),
      table(['Name', 'Created', 'Last used'], passkeys.json.passkeys.map((p) => [p.name, when(p.created_at), when(p.last_used_at)]))) : null,
    (identities.json.identities ?? []).length ? h('section', { 'aria-labelledby': 'h-providers' }, h('h3', { id: 'h-providers' }, 'Linked providers'),
      table(['Provider', 'Email', 'Linked'], identities.json.identities.map((i) => [i.provider, i.email, when(i.created_at)]))) : null,
    h('section', { 'aria-labelledby': 'h-deliveries' }, h('h3', { id: 'h-deliveries' }, 'Webhook deliveries'),
      table(['Id', 'Type', 'Status', 'Attempts', 'Last error', 'Created'],
        (deliveries.json.deliveries ?? []).map((d) => [d.id, d.type, d.status, String(d.attempts), d.last_error, when(d.created_at)]))),
    audit.status === 200 ? h('section', { 'aria-labelledby': 'h-audit' }, h('h3', { id: 'h-audit' }, 'Audit events'), auditTable(audit.json.events)) : null,
    deleteSection(u, () => { notice.set(`User ${u.email} deleted`); location.hash = '#/users'; }),
  ];
  show(...sections);
}

/** Audit events as a table; the log's own view also says whose account each one concerns. */
function auditTable(events, withUser = false) {
  const rows = (events ?? []).map((e) => [when(e.at ?? e.created_at), e.type, e.actor ?? null,
    ...(withUser ? [e.user_id == null ? null : h('a', { href: `#/user/${e.user_id}` }, String(e.user_id))] : []), e.ip ?? null, JSON.stringify(e.data ?? {})]);
  return table(['When', 'Type', 'Actor', ...(withUser ? ['User'] : []), 'IP', 'Data'], rows);
}

// ---- audit log
async function auditView(params) {
  const show = renderer();
  const q = new URLSearchParams(params);
  if (!q.has('limit')) q.set('limit', '100');
  const form = h('form', { id: 'audit-filter', role: 'search', onsubmit: (e) => {
    e.preventDefault();
    const next = new URLSearchParams();
    for (const name of ['type', 'user_id']) if (form.elements[name].value.trim()) next.set(name, form.elements[name].value.trim());
    location.hash = `#/audit?${next}`;
  } },
  h('label', { for: 'audit-type' }, 'Type'), h('input', { id: 'audit-type', name: 'type', type: 'text', value: q.get('type') ?? '', placeholder: 'admin.plan_changed' }),
  h('label', { for: 'audit-user' }, 'User id'), h('input', { id: 'audit-user', name: 'user_id', type: 'text', inputmode: 'numeric', value: q.get('user_id') ?? '' }),
  h('button', { type: 'submit' }, 'Filter'));
  const { status, json } = await api('GET', `api/v1/audit?${q}`);
  if (status !== 200) return show(h('h2', {}, 'Audit log'), form, h('p', { role: 'alert' }, json.error ?? 'Error'));
  const next = json.next_cursor ? (() => { const n = new URLSearchParams(q); n.set('cursor', json.next_cursor); return h('a', { href: `#/audit?${n}` }, 'Next page'); })() : null;
  show(h('h2', {}, 'Audit log'), form, auditTable(json.events, true), next);
}

async function routesView() {
  const show = renderer();
  const { json } = await api('GET', 'api/routes');
  show(h('h2', {}, 'Routes'), table(['Path', 'Methods', 'WebSocket', 'Auth', 'Plans', 'Daily', 'Per minute', 'Upstream'],
    json.routes.map((r) => [
      r.path, r.methods?.join(', ') ?? '*', r.websocket ? 'yes' : '—', r.mfa === 'required' ? `${r.auth}, second factor` : r.auth, r.plans?.join(', ') ?? '—',
      r.daily_limit ? 'yes' : '—', r.rate_limit ? 'yes' : '—', r.upstream ? `${r.upstream.name} (${r.upstream.url})` : 'decision only',
    ])));
}

async function healthView() {
  const show = renderer();
  const { json } = await api('GET', 'api/health');
  show(h('h2', {}, 'Health'), h('p', { id: 'ready' }, json.ready ? 'Ready' : 'Not ready'),
    table(['Check', 'State'], Object.entries(json.checks ?? {}).map(([k, v]) => [k, v])),
    h('p', { id: 'instances' }, `Instances: ${json.instances ?? 'unknown (Postgres does not answer)'}`),
    ...(json.stripe ? [h('p', { id: 'stripe' }, json.stripe.test_double ? `Stripe: test double at ${json.stripe.api_base}` : `Stripe: ${json.stripe.api_base}`)] : []),
    table(['Route', 'Requests', 'Denials'], (json.routes ?? []).map((r) => [r.route, String(r.requests), String(r.denials)])));
}

function route() {
  if (!csrf) return;
  generation++;
  const [path, query = ''] = location.hash.slice(1).split('?');
  const user = /^\/user\/(\d+)$/.exec(path);
  const org = /^\/org\/(\d+)$/.exec(path);
  const kit = { h, api, table, renderer, $ };
  if (path === '/operators') return void operatorsView(kit).catch(() => {});
  if (org || path === '/orgs') return void (org ? orgView(org[1], kit) : orgsView(query, kit)).catch(() => {});
  const view = user ? userView(user[1], query)
    : path === '/overview' ? overviewView() : path === '/routes' ? routesView() : path === '/health' ? healthView() : path === '/audit' ? auditView(query) : usersView(query);
  view.catch(() => {});
}

$('sign-in').addEventListener('submit', async (e) => {
  e.preventDefault();
  const res = await fetch('/console/session', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ key: $('key').value }) });
  const json = await res.json().catch(() => ({}));
  if (res.status !== 200) { $('sign-in-error').textContent = json.error ?? 'Error'; return; }
  $('key').value = '';
  $('sign-in-error').textContent = '';
  csrf = json.csrf;
  await signedIn();
});
const passkeyStatus = (text) => { $('passkey-status').textContent = text; };
$('add-passkey').addEventListener('click', async () => {
  const options = await api('POST', 'operator/passkey/register/options', {});
  if (options.status !== 200) return void passkeyStatus(options.json.error ?? `Error ${options.status}`);
  const credential = await navigator.credentials.create({ publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(options.json) }).catch(() => null);
  if (!credential) return void passkeyStatus('No passkey was created');
  const added = await api('POST', 'operator/passkey/register/verify', { ...credential.toJSON(), name: 'Console passkey' });
  passkeyStatus(added.status === 201 ? 'Passkey added: you can sign in with it instead of a code' : added.json.error ?? `Error ${added.status}`);
});
$('sign-out').addEventListener('click', async () => {
  await fetch('/console/session', { method: 'DELETE', headers: { 'x-csrf-token': csrf } });
  signedOut();
});
/**
 * Signs in with a one-time link's ticket (`#ticket=…`: `npm run demo` prints one), else resumes the
 * session the cookie stands for, else shows the sign-in form (saying why a link was refused).
 */
async function start() {
  const ticket = /^#ticket=([\w-]+)$/.exec(location.hash)?.[1];
  let refused = '';
  if (ticket) {
    // Off the address bar, and out of the history, before anything else: the link is spent either way.
    history.replaceState(null, '', `${location.pathname}#/users`);
    const res = await fetch('/console/session', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ticket }) });
    const json = await res.json().catch(() => ({}));
    if (res.status === 200) { csrf = json.csrf; return signedIn(); }
    refused = json.error ?? 'Error';
  }
  const session = await fetch('/console/session');
  if (session.status === 200) { csrf = (await session.json()).csrf; await signedIn(); return; }
  signedOut();
  $('sign-in-error').textContent = refused;
}

// A sign-in link pasted into a console tab already open arrives as a hash change.
addEventListener('hashchange', () => { if (location.hash.startsWith('#ticket=')) void start(); else route(); });

await start();
