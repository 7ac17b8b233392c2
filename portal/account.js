// The account (CONTRACT §30): the email (shown: there is no email change in 1.0), the language
// (the account's locale, which its mails follow), and deletion: typed confirmation of the email,
// the password, and, for an account with a second factor, a fresh second factor, since the API
// asks for a sign-in at aal2 at most 5 minutes old (403 "Authentification récente requise").
import { field, fill, form, h, messages } from './dom.js';
import { lang, t } from './i18n.js';
import { api, portalApi, signIn, signOut } from './session.js';
import { chooseLang, errorText, loadMe, nav } from './state.js';

/** A fresh sign-in with the password and, when asked, the code: the session is then recent, at aal2. */
async function freshSignIn(email, password, code) {
  const login = await portalApi('login', { email, password });
  if (login.status === 200) { signIn(login.json); return login; }
  if (login.status === 403 && login.json.mfa_token) {
    if (!code) return { status: 0 };
    const verified = await portalApi('mfa/verify', { mfa_token: login.json.mfa_token, code });
    if (verified.status === 200) signIn(verified.json);
    return verified;
  }
  return login;
}

function deleteForm(user) {
  const say = messages();
  const codeField = field(t('account.code'), { name: 'code', id: 'delete-code', autocomplete: 'one-time-code', spellcheck: 'false' }, t('account.codeHint'));
  return form({ id: 'delete-form', 'aria-labelledby': 'h-delete' }, [
    h('h2', { id: 'h-delete' }, t('account.delete')),
    h('p', {}, t('account.deleteAbout')),
    field(t('account.typeEmail', { email: user.email }), { name: 'confirm', id: 'delete-confirm', autocomplete: 'off', required: true, spellcheck: 'false' }),
    field(t('field.currentPassword'), { name: 'password', id: 'delete-password', type: 'password', autocomplete: 'current-password', required: true }),
    codeField,
    h('button', { type: 'submit', class: 'danger', id: 'delete-submit' }, t('account.deleteSubmit')), ...say.nodes,
  ], async (f) => {
    if (f.elements.confirm.value.trim().toLowerCase() !== user.email.toLowerCase()) return say.fail(t('account.typeMismatch'));
    const password = f.elements.password.value;
    const code = f.elements.code.value.replace(/\s/g, '');
    const fresh = await freshSignIn(user.email, password, code);
    if (fresh.status === 0) { say.fail(t('account.needCode')); f.elements.code.focus(); return; }
    if (fresh.status !== 200) return say.fail(await errorText(fresh));
    const res = await api('DELETE', '/api/v1/user/me', { password });
    if (res.status !== 200) return say.fail(await errorText(res));
    await signOut();
    nav('sign-in', { deleted: '1' });
  });
}

const LANGUAGES = [['fr', 'Français'], ['en', 'English']];

export async function accountPage(main) {
  const user = await loadMe();
  const say = messages();
  const language = form({ id: 'language-form', 'aria-labelledby': 'h-language' }, [
    h('h2', { id: 'h-language' }, t('account.language')),
    field(t('account.language'), { tag: 'select', name: 'lang', id: 'account-lang', options: LANGUAGES.map(([v, n]) => h('option', { value: v, lang: v, selected: v === lang() }, n)) },
      t('account.languageHint')),
    h('button', { type: 'submit' }, t('common.save')), ...say.nodes,
  ], async (f) => {
    await chooseLang(f.elements.lang.value);
    dispatchEvent(new Event('gw-portal-nav'));
  });
  fill(main, h('h1', { tabindex: '-1' }, t('nav.account')),
    h('section', { 'aria-labelledby': 'h-email' }, h('h2', { id: 'h-email' }, t('field.email')),
      h('p', { id: 'account-email' }, user?.email ?? '—'), h('p', { class: 'hint' }, t('account.noEmailChange'))),
    language, user ? deleteForm(user) : null);
  return t('nav.account');
}
