// API keys (CONTRACT §30): the list (name, start, scopes, expiry, last use), creation with a name,
// scopes among those the routes declare and an expiry, the key shown once with a copy button,
// roll with a grace and revoke after a confirmation. Acting for an organization, its keys instead
// (GET/POST/DELETE /api/v1/orgs/{id}/api-keys, as its role allows). Names are shown as text.
import { field, fill, form, h, messages, table, uid, when } from './dom.js';
import { lang, t } from './i18n.js';
import { api } from './session.js';
import { acting, config, errorText } from './state.js';

const EXPIRIES = [['', 'keys.never'], ['30', 'keys.days30'], ['90', 'keys.days90'], ['365', 'keys.days365']];
const GRACES = [['0s', 'keys.graceNone'], ['1h', 'keys.grace1h'], ['24h', 'keys.grace24h'], ['7d', 'keys.grace7d']];

/** The secret, once: a read-only field to select, a copy button, and the warning that it is not shown again. */
function shownOnce(created) {
  const say = messages();
  const id = uid('new-key');
  return h('section', { class: 'banner ok', id: 'new-key', 'aria-labelledby': `${id}-title`, tabindex: '-1' },
    h('h2', { id: `${id}-title` }, t('keys.createdTitle', { name: created.name })),
    h('p', {}, t('keys.once')),
    h('label', { for: id }, t('keys.secret')),
    h('input', { id, class: 'secret', readonly: true, value: created.key, spellcheck: 'false', autocomplete: 'off' }),
    h('button', { type: 'button', id: 'copy-key', onclick: async () => {
      try { await navigator.clipboard.writeText(created.key); say.ok(t('keys.copied')); } catch { document.getElementById(id).select(); say.fail(t('keys.copyFailed')); }
    } }, t('keys.copy')), ...say.nodes);
}

function createForm(org, onCreated) {
  const say = messages();
  const scopes = config().scopes;
  const scopeBoxes = scopes.length ? h('fieldset', {}, h('legend', {}, t('keys.scopes')), h('p', { class: 'hint' }, t('keys.scopesHint')),
    scopes.map((s) => {
      const id = uid('scope');
      return h('div', { class: 'check' }, h('input', { type: 'checkbox', id, name: 'scope', value: s }), h('label', { for: id }, s));
    })) : null;
  return form({ id: 'create-key', 'aria-labelledby': 'create-key-title' }, [
    h('h2', { id: 'create-key-title' }, t('keys.create')),
    field(t('keys.name'), { name: 'name', id: 'key-name', required: true, maxlength: 64, autocomplete: 'off' }, t('keys.nameHint')),
    scopeBoxes,
    field(t('keys.expiry'), { tag: 'select', name: 'expiry', id: 'key-expiry', options: EXPIRIES.map(([v, k]) => h('option', { value: v }, t(k))) }),
    org ? field(t('keys.role'), { tag: 'select', name: 'role', id: 'key-role', options: ['member', 'admin', 'owner'].map((r) => h('option', { value: r }, t(`role.${r}`))) },
      t('keys.roleHint')) : null,
    h('button', { type: 'submit', class: 'primary', id: 'create-key-submit' }, t('keys.createSubmit')), ...say.nodes,
  ], async (f) => {
    const chosen = [...f.querySelectorAll('input[name=scope]:checked')].map((c) => c.value);
    const days = Number(f.elements.expiry.value);
    const body = { name: f.elements.name.value, scopes: chosen.length ? chosen : null, expires_at: days ? new Date(Date.now() + days * 86_400_000).toISOString() : null };
    if (org) body.role = f.elements.role.value;
    const res = await api('POST', org ? `/api/v1/orgs/${org.id}/api-keys` : '/api/v1/user/api-keys', body);
    if (res.status !== 201) return say.fail(await errorText(res));
    f.reset();
    await onCreated(res.json);
  });
}

/** Revoke or roll, each behind a second, explicit step (a keyboard user's focus moves to it and back). */
function keyActions(key, org, redraw) {
  const say = messages();
  const box = h('div', { class: 'actions' });
  const revoke = async () => {
    const res = await api('DELETE', org ? `/api/v1/orgs/${org.id}/api-keys/${key.id}` : `/api/v1/user/api-keys/${key.id}`);
    if (res.status === 200) return redraw({ said: t('keys.revoked', { name: key.name }) });
    say.fail(await errorText(res));
  };
  const roll = async (grace) => {
    const res = await api('POST', `/api/v1/user/api-keys/${key.id}/roll`, { grace });
    if (res.status === 201) return redraw({ created: res.json });
    say.fail(await errorText(res));
  };
  const start = () => fill(box, 
    h('button', { type: 'button', class: 'danger', 'data-action': 'revoke', onclick: () => confirmRevoke() }, t('keys.revoke')),
    org ? null : h('button', { type: 'button', 'data-action': 'roll', onclick: () => chooseGrace() }, t('keys.roll')), ...say.nodes);
  const confirmRevoke = () => {
    const yes = h('button', { type: 'button', class: 'danger', 'data-action': 'confirm-revoke', onclick: () => void revoke() }, t('keys.revokeConfirm'));
    fill(box, h('p', {}, t('keys.revokeQuestion', { name: key.name })), yes,
      h('button', { type: 'button', onclick: () => { start(); box.querySelector('[data-action=revoke]').focus(); } }, t('common.cancel')), ...say.nodes);
    yes.focus();
  };
  const chooseGrace = () => {
    const id = uid('grace');
    const select = h('select', { id }, GRACES.map(([v, k]) => h('option', { value: v }, t(k))));
    fill(box, h('label', { for: id }, t('keys.grace')), select,
      h('button', { type: 'button', 'data-action': 'confirm-roll', onclick: () => void roll(select.value) }, t('keys.rollConfirm')),
      h('button', { type: 'button', onclick: () => { start(); box.querySelector('[data-action=roll]').focus(); } }, t('common.cancel')), ...say.nodes);
    select.focus();
  };
  start();
  return box;
}

export async function keysPage(main, params, state = {}) {
  const org = acting();
  const res = await api('GET', org ? `/api/v1/orgs/${org.id}/api-keys` : '/api/v1/user/api-keys');
  const redraw = async (next) => {
    await keysPage(main, params, next);
    const target = next.created ? document.getElementById('new-key') : document.getElementById('keys-status');
    target?.focus();
  };
  const title = org ? t('keys.orgTitle', { name: org.name }) : t('nav.keys');
  const status = h('p', { role: 'status', id: 'keys-status', tabindex: '-1' }, state.said ?? '');
  const keys = res.status === 200 ? res.json.api_keys : [];
  const scopesText = (s) => (s?.length ? s.join(', ') : t('keys.allScopes'));
  const rows = keys.map((k) => [h('span', { class: 'key-name' }, k.name), h('code', {}, `${k.start}…`), scopesText(k.scopes),
    k.expires_at ? when(k.expires_at, lang()) : t('keys.never'), k.last_used_at ? when(k.last_used_at, lang()) : t('keys.neverUsed'), keyActions(k, org, redraw)]);
  fill(main, 
    h('h1', { tabindex: '-1' }, title),
    state.created ? shownOnce(state.created) : null,
    status,
    res.status === 200 ? null : h('p', { role: 'alert' }, await errorText(res)),
    table(t('keys.listCaption'), [t('keys.name'), t('keys.start'), t('keys.scopes'), t('keys.expires'), t('keys.lastUsed'), t('keys.actions')], rows, t('keys.none')),
    createForm(org, (created) => redraw({ created })),
  );
  return title;
}
