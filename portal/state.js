// What the pages share: the portal's configuration ({path}api/config), the signed-in user (GET
// /api/v1/user/me), the organization the user acts for, navigation, and errors as the user reads
// them (in their language, with the code).
import { applyAccent } from './look.js';
import { chosenLang, lang, setInitialLang, setLang, t } from './i18n.js';
import { BASE, api } from './session.js';

let cfg;
let user = null;
let catalog = null;

/**
 * The configuration as the pages read it ({path}api/config, src/portal/config.ts: every key
 * present, null where unset), with defaults so that a page never reads undefined.
 */
function normalise(raw) {
  const features = raw.features ?? {};
  const language = raw.language ?? {};
  return {
    product: { name: 'API', accent: '#3b5bdb', ...(raw.product ?? {}) },
    language: typeof language === 'string' ? language : language.default ?? 'fr',
    docs: raw.docs ?? null,
    returnTo: raw.returnTo ?? [],
    scopes: raw.scopes ?? [],
    signedIn: raw.signedIn ?? `${location.origin}${BASE}signed-in`,
    passwordMinLength: raw.passwordMinLength ?? 8,
    features: {
      billing: Boolean(features.billing), passkeys: Boolean(features.passkeys), magicLink: Boolean(features.magicLink),
      organizations: Boolean(features.organizations), signUp: features.registration ?? true, mail: features.mail ?? true,
      providers: features.providers ?? [], sso: Boolean(features.sso),
    },
  };
}

export async function setConfig() {
  const res = await fetch(`${BASE}api/config`, { headers: { accept: 'application/json', 'x-gateway-portal': '1' }, credentials: 'same-origin' });
  cfg = normalise(res.ok ? await res.json().catch(() => ({})) : {});
  setInitialLang(cfg.language);
  applyAccent(cfg.product.accent);
}

export const config = () => cfg;
export const me = () => user;

export async function loadMe() {
  const res = await api('GET', '/api/v1/user/me');
  user = res.status === 200 ? res.json : null;
  // The user's own language (set at sign-up or here) wins over the configured one, unless this browser chose.
  if (user?.locale && !chosenLang()) setLang(user.locale, { remember: false });
  return user;
}
/** The language chosen on the switch: kept in this browser, and as the account's (its mails follow it). */
export async function chooseLang(next) {
  setLang(next);
  if (user) {
    const res = await api('PATCH', '/api/v1/user/me', { locale: next });
    if (res.status === 200) user.locale = next;
  }
}
export const forgetMe = () => { user = null; };

/** Goes to a page of the portal (`keys`, with query parameters), without a reload. */
export function nav(page, params = {}) {
  const query = new URLSearchParams(Object.entries(params).filter(([, v]) => v != null && v !== ''));
  history.pushState(null, '', `${BASE}${page === 'overview' ? '' : page}${query.size ? `?${query}` : ''}`);
  dispatchEvent(new Event('gw-portal-nav'));
}

/** A page named by `next` after a sign-in: only one of the portal's own pages, never a URL (no open redirect). */
export function safeNext(next) {
  return /^[a-z-]{0,20}$/.test(next ?? '') ? (next || 'overview') : 'overview';
}

const ORG_KEY = 'gw-portal-org';
/** The organization the user acts for ({id, name, role}), among those /me lists, else null (acting for oneself). */
export function acting() {
  const id = Number(sessionStorage.getItem(ORG_KEY));
  return (id && user?.orgs?.find((o) => o.id === id)) || null;
}
export function setActing(id) {
  if (id) sessionStorage.setItem(ORG_KEY, String(id)); else sessionStorage.removeItem(ORG_KEY);
}

const RETURN_KEY = 'gw-portal-return';
/** The "back to the app" link: a `return_to` exactly equal to one of portal.returnTo, kept for the visit. */
export function returnLink() {
  const asked = new URLSearchParams(location.search).get('return_to');
  if (asked && cfg.returnTo.includes(asked)) sessionStorage.setItem(RETURN_KEY, asked);
  const kept = sessionStorage.getItem(RETURN_KEY);
  return kept && cfg.returnTo.includes(kept) ? kept : null;
}

async function loadCatalog() {
  if (catalog) return catalog;
  const res = await fetch('/api/v1/errors', { headers: { accept: 'application/json' } }).catch(() => null);
  const list = res?.ok ? await res.json().catch(() => []) : [];
  catalog = new Map((Array.isArray(list) ? list : list.errors ?? []).map((e) => [e.code, e.messages ?? {}]));
  return catalog;
}

/**
 * An API answer's error as the user reads it: the gateway's text in the user's language (asked
 * with Accept-Language; the catalog's text when the gateway answered in another and the text has
 * no values to fill in), then its code, which support can search for.
 */
export async function errorText(res) {
  const body = res.json ?? {};
  const code = body.code ?? (typeof body.type === 'string' ? body.type.replace('urn:gateway:error:', '') : null);
  let text = body.error ?? body.detail ?? t('error.unknown', { status: res.status });
  if (code) {
    const texts = (await loadCatalog()).get(code);
    const mine = texts?.[lang()];
    if (mine && !mine.includes('{') && texts[lang() === 'fr' ? 'en' : 'fr'] === text) text = mine;
  }
  return code ? `${text} (${t('error.code')} ${code})` : `${text} (${t('error.status')} ${res.status})`;
}
