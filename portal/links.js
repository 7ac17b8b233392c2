// The pages a mail or a provider leads to (CONTRACT §30): email verification, password reset, a
// sign-in link, an organization's invitation, and the provider's return. Each takes its token from
// the address and takes it off the address bar first (the address is kept in history and could be
// shared; Referrer-Policy: no-referrer already keeps it from other sites).
import { field, fill, form, h, messages } from './dom.js';
import { t } from './i18n.js';
import { BASE, api, portalApi, signedIn } from './session.js';
import { answered, secondFactor } from './signIn.js';
import { config, errorText, loadMe, nav } from './state.js';

function takeToken(params, key = 'token') {
  const token = params.get(key) ?? '';
  if (token) history.replaceState(null, '', location.pathname);
  return token;
}

function heading(text) {
  return h('h1', { tabindex: '-1' }, text);
}

export async function verifyEmailPage(main, params) {
  const token = takeToken(params);
  const say = messages();
  fill(main, heading(t('verify.title')), ...say.nodes, h('p', {}, h('a', { href: BASE }, t('verify.continue'))));
  if (!token) { say.fail(t('link.missing')); return t('verify.title'); }
  const res = await api('POST', '/api/v1/auth/email/verify', { token });
  if (res.status === 200) { say.ok(t('verify.done')); if (signedIn()) await loadMe(); } else say.fail(await errorText(res));
  return t('verify.title');
}

export async function forgotPage(main) {
  const say = messages();
  fill(main, heading(t('forgot.title')), h('p', {}, t('forgot.about')), form({ id: 'forgot-form' }, [
    field(t('field.email'), { name: 'email', id: 'email', type: 'email', autocomplete: 'email', required: true }),
    h('button', { type: 'submit', class: 'primary' }, t('forgot.submit')), ...say.nodes,
  ], async (f) => {
    const res = await api('POST', '/api/v1/auth/password/forgot', { email: f.elements.email.value });
    if (res.status === 202) say.ok(t('forgot.sent')); else say.fail(await errorText(res));
  }), h('p', {}, h('a', { href: `${BASE}sign-in` }, t('signIn.title'))));
  return t('forgot.title');
}

export async function resetPage(main, params) {
  const token = takeToken(params) || sessionStorage.getItem('gw-portal-reset') || '';
  // Kept for this tab only, so a reload after the address was cleaned still has it.
  if (token) sessionStorage.setItem('gw-portal-reset', token);
  const say = messages();
  fill(main, heading(t('reset.title')), form({ id: 'reset-form' }, [
    field(t('field.newPassword'), { name: 'password', id: 'password', type: 'password', autocomplete: 'new-password', required: true }, t('field.passwordHint', { n: config().passwordMinLength })),
    h('button', { type: 'submit', class: 'primary' }, t('reset.submit')), ...say.nodes,
  ], async (f) => {
    const res = await api('POST', '/api/v1/auth/password/reset', { token, new_password: f.elements.password.value });
    if (res.status !== 200) return say.fail(await errorText(res));
    sessionStorage.removeItem('gw-portal-reset');
    say.ok(t('reset.done'));
    f.replaceWith(h('p', {}, h('a', { href: `${BASE}sign-in` }, t('signIn.title'))));
  }));
  if (!token) say.fail(t('link.missing'));
  return t('reset.title');
}

export async function magicPage(main, params) {
  const token = takeToken(params);
  const say = messages();
  fill(main, heading(t('magic.landing')), ...say.nodes);
  if (!token) { say.fail(t('link.missing')); return t('magic.landing'); }
  say.ok(t('link.checking'));
  await answered(await portalApi('magic-link/verify', { token }), main, say, 'overview');
  return t('magic.landing');
}

/** The provider's return: `#login_code=…` (or `#error=…`), redeemed with this tab's PKCE verifier. */
export async function providerReturnPage(main) {
  const back = new URLSearchParams(location.hash.slice(1));
  history.replaceState(null, '', location.pathname);
  const say = messages();
  fill(main, heading(t('provider.title')), ...say.nodes, h('p', {}, h('a', { href: `${BASE}sign-in` }, t('signIn.title'))));
  const verifier = sessionStorage.getItem('gw-portal-pkce');
  sessionStorage.removeItem('gw-portal-pkce');
  if (back.get('error')) { say.fail(t('provider.error', { code: back.get('error') })); return t('provider.title'); }
  if (!back.get('login_code') || !verifier) { say.fail(t('link.missing')); return t('provider.title'); }
  const res = await portalApi('oidc/exchange', { login_code: back.get('login_code'), code_verifier: verifier });
  if (res.status === 403 && res.json.mfa_token) secondFactor(main, res.json.mfa_token, 'overview');
  else await answered(res, main, say, 'overview');
  return t('provider.title');
}

/** An invitation: accepted by the invited address once signed in (the token waits in this tab meanwhile). */
export async function joinPage(main, params) {
  const token = takeToken(params) || sessionStorage.getItem('gw-portal-join') || '';
  const say = messages();
  if (token) sessionStorage.setItem('gw-portal-join', token);
  if (!token) {
    fill(main, heading(t('join.title')), ...say.nodes);
    say.fail(t('link.missing'));
    return t('join.title');
  }
  if (!signedIn()) {
    fill(main, heading(t('join.title')), h('p', {}, t('join.signInFirst')),
      h('p', {}, h('a', { href: `${BASE}sign-in?next=join`, id: 'join-sign-in' }, t('signIn.title')), ' · ', h('a', { href: `${BASE}sign-up` }, t('signUp.title'))));
    return t('join.title');
  }
  fill(main, heading(t('join.title')), form({ id: 'join-form' }, [
    h('p', {}, t('join.about')), h('button', { type: 'submit', class: 'primary', id: 'join-accept' }, t('join.accept')), ...say.nodes,
  ], async () => {
    const res = await api('POST', '/api/v1/orgs/invitations/accept', { token });
    if (res.status !== 200) return say.fail(await errorText(res));
    sessionStorage.removeItem('gw-portal-join');
    await loadMe();
    nav('orgs', { joined: res.json.org_id });
  }));
  return t('join.title');
}
