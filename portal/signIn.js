// Signing in (CONTRACT §30): password, then the second factor when the account has one (a TOTP
// code or a recovery code); a passkey; a sign-in link by email; a button per provider; "sign in
// with your organization" from the email's domain (§31's SAML). Every
// sign-in goes through the portal's own endpoints, which put the refresh token in the HttpOnly
// cookie and answer the access token this page keeps in memory.
import { field, fill, form, h, messages } from './dom.js';
import { lang, t } from './i18n.js';
import { BASE, api, portalApi, signIn } from './session.js';
import { config, errorText, loadMe, nav, safeNext } from './state.js';

/** After any sign-in: the user, then the page the visitor was sent away from (one of the portal's own). */
export async function finish(json, next) {
  signIn(json);
  await loadMe();
  nav(safeNext(next));
}

/** The second-factor step: the login's 403 carried an mfa_token; a TOTP or recovery code completes it. */
export function secondFactor(main, mfaToken, next) {
  const say = messages();
  const step = form({ id: 'mfa-form', 'aria-labelledby': 'mfa-title' }, [
    h('h2', { id: 'mfa-title', tabindex: '-1' }, t('mfa.title')),
    h('p', { class: 'hint' }, t('mfa.about')),
    field(t('mfa.code'), { name: 'code', id: 'mfa-code', autocomplete: 'one-time-code', inputmode: 'text', required: true, spellcheck: 'false' }, t('mfa.codeHint')),
    h('button', { type: 'submit', class: 'primary' }, t('mfa.submit')), ...say.nodes,
  ], async (f) => {
    const res = await portalApi('mfa/verify', { mfa_token: mfaToken, code: f.elements.code.value.replace(/\s/g, '') });
    if (res.status === 200) return finish(res.json, next);
    say.fail(await errorText(res));
  });
  fill(main, step);
  step.querySelector('h2').focus();
}

/** An answer of a sign-in endpoint: signed in, a second factor asked, or an error shown. */
export async function answered(res, main, say, next) {
  if (res.status === 200 && res.json.access_token) return finish(res.json, next);
  if (res.status === 403 && res.json.mfa_token) return secondFactor(main, res.json.mfa_token, next);
  say.fail(await errorText(res));
}

const b64url = (bytes) => btoa(String.fromCharCode(...bytes)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');

/** PKCE for a provider or SSO sign-in: the verifier stays in this tab (the signed-in page redeems with it), the challenge goes out. */
async function pkceChallenge() {
  const verifier = b64url(crypto.getRandomValues(new Uint8Array(32)));
  sessionStorage.setItem('gw-portal-pkce', verifier);
  return b64url(new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier))));
}

/** A provider's sign-in: a top-level navigation to the gateway's start, which leads to the provider. */
async function startProvider(id) {
  const challenge = await pkceChallenge();
  location.assign(`/api/v1/auth/oidc/${encodeURIComponent(id)}/start?return_to=${encodeURIComponent(config().signedIn)}&code_challenge=${challenge}`);
}

/**
 * "Sign in with your organization" (CONTRACT §31): the start finds the connection by the email's
 * verified domain. It is asked first without following its redirect, so that an email no
 * organization signs in ("Aucune connexion d'organisation") is said here, in the user's language,
 * instead of leaving the portal for a bare JSON answer; then the browser goes there for real.
 * The first start's stored request is never used and expires (10 minutes).
 */
async function startSso(email, say) {
  const challenge = await pkceChallenge();
  const url = `/api/v1/auth/sso?email=${encodeURIComponent(email)}&return_to=${encodeURIComponent(config().signedIn)}&code_challenge=${challenge}`;
  const probe = await fetch(url, { redirect: 'manual', credentials: 'omit', headers: { 'accept-language': lang(), accept: 'application/problem+json, application/json' } })
    .catch(() => null);
  if (probe?.type === 'opaqueredirect') {
    say.ok(t('sso.leaving'));
    location.assign(url);
    return;
  }
  say.fail(probe ? await errorText({ status: probe.status, json: await probe.json().catch(() => ({})) }) : t('error.unknown', { status: '' }));
}

function ssoForm() {
  const say = messages();
  return form({ id: 'sso-form', 'aria-labelledby': 'sso-title' }, [
    h('h2', { id: 'sso-title' }, t('sso.title')),
    h('p', { class: 'hint' }, t('sso.about')),
    field(t('field.email'), { name: 'email', id: 'sso-email', type: 'email', autocomplete: 'email', required: true }),
    h('button', { type: 'submit', id: 'sso-submit' }, t('sso.submit')), ...say.nodes,
  ], (f) => startSso(f.elements.email.value.trim(), say));
}

async function passkeySignIn(main, say, next) {
  const options = await api('POST', '/api/v1/auth/passkeys/login/options');
  if (options.status !== 200) return say.fail(await errorText(options));
  const credential = await navigator.credentials.get({ publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options.json) }).catch(() => null);
  if (!credential) return say.fail(t('passkey.none'));
  return answered(await portalApi('passkeys/login/verify', credential.toJSON()), main, say, next);
}

function magicLinkForm() {
  const say = messages();
  return form({ id: 'magic-form', 'aria-labelledby': 'magic-title' }, [
    h('h2', { id: 'magic-title' }, t('magic.title')),
    field(t('field.email'), { name: 'email', id: 'magic-email', type: 'email', autocomplete: 'email', required: true }),
    h('button', { type: 'submit' }, t('magic.send')), ...say.nodes,
  ], async (f) => {
    const res = await api('POST', '/api/v1/auth/magic-link', { email: f.elements.email.value });
    if (res.status === 202) say.ok(t('magic.sent')); else say.fail(await errorText(res));
  });
}

export async function signInPage(main, params) {
  const next = params.get('next') ?? '';
  const { features } = config();
  const say = messages();
  const password = form({ id: 'sign-in-form', 'aria-labelledby': 'sign-in-title' }, [
    field(t('field.email'), { name: 'email', id: 'email', type: 'email', autocomplete: 'username', required: true }),
    field(t('field.password'), { name: 'password', id: 'password', type: 'password', autocomplete: 'current-password', required: true }),
    h('button', { type: 'submit', class: 'primary', id: 'sign-in-submit' }, t('signIn.submit')), ...say.nodes,
  ], async (f) => {
    const res = await portalApi('login', { email: f.elements.email.value, password: f.elements.password.value });
    await answered(res, main, say, next);
    // The organization enforces its own sign-in for this address (sso_required): its form is next, filled in.
    if (res.json.code === 'sso_required' && sso) {
      sso.elements.email.value = f.elements.email.value;
      sso.querySelector('button[type=submit]').focus();
    }
  });
  const sso = features.sso ? ssoForm() : null;
  const other = messages();
  const passkey = features.passkeys
    ? h('button', { type: 'button', id: 'passkey-sign-in', onclick: () => void passkeySignIn(main, other, next) }, t('signIn.passkey')) : null;
  const providers = features.providers.map((p) => {
    const id = typeof p === 'string' ? p : p.id;
    const name = typeof p === 'string' ? p : (p.name ?? p.id);
    return h('button', { type: 'button', class: 'provider', onclick: () => void startProvider(id) }, t('signIn.with', { name }));
  });
  fill(main, 
    h('h1', { tabindex: '-1', id: 'sign-in-title' }, t('signIn.title')),
    params.get('deleted') ? h('p', { role: 'status', id: 'deleted' }, t('account.deleted')) : null,
    password,
    h('p', {}, h('a', { href: `${BASE}forgot-password` }, t('signIn.forgot'))),
    passkey || providers.length ? h('section', { 'aria-label': t('signIn.other'), class: 'other' }, passkey, ...providers, ...other.nodes) : null,
    sso,
    features.magicLink ? magicLinkForm() : null,
    features.signUp ? h('p', {}, t('signIn.new'), ' ', h('a', { href: `${BASE}sign-up` }, t('signUp.title'))) : null,
  );
  return t('signIn.title');
}

export async function signUpPage(main) {
  const say = messages();
  const terms = config().product.terms;
  const f = form({ id: 'sign-up-form', 'aria-labelledby': 'sign-up-title' }, [
    field(t('field.email'), { name: 'email', id: 'email', type: 'email', autocomplete: 'email', required: true }),
    field(t('field.newPassword'), { name: 'password', id: 'password', type: 'password', autocomplete: 'new-password', required: true }, t('field.passwordHint', { n: config().passwordMinLength })),
    terms ? h('p', { class: 'hint' }, t('signUp.terms'), ' ', h('a', { href: terms, rel: 'noopener' }, t('foot.terms'))) : null,
    h('button', { type: 'submit', class: 'primary', id: 'sign-up-submit' }, t('signUp.submit')), ...say.nodes,
  ], async (el) => {
    const body = { email: el.elements.email.value, password: el.elements.password.value, locale: lang() };
    const res = await api('POST', '/api/v1/auth/register', body);
    if (res.status !== 201) return say.fail(await errorText(res));
    say.ok(t('signUp.done'));
    // Signed in at once: the overview says the email is still to verify (the mail's link does it).
    const login = await portalApi('login', { email: body.email, password: body.password });
    if (login.status === 200) await finish(login.json, 'overview');
  });
  fill(main, h('h1', { tabindex: '-1', id: 'sign-up-title' }, t('signUp.title')), f,
    h('p', {}, t('signUp.have'), ' ', h('a', { href: `${BASE}sign-in` }, t('signIn.title'))));
  return t('signUp.title');
}
