// The customer portal's shell (CONTRACT §30): loads the portal's configuration, shows the
// product's name, logo and accent, the language switch and (signed in) the sections, and draws
// the page the address names. Every page is a URL one segment under the portal's path
// (`/portal/keys`), so a bookmark or a reload lands on it; the CSP forbids <base>, and one segment
// keeps the relative asset links right from every page.
import { $, h } from './dom.js';
import { lang, t } from './i18n.js';
import { BASE, onSignedOut, resume, signedIn, signOut } from './session.js';
import { acting, chooseLang, loadMe, me, nav, returnLink, setConfig, config } from './state.js';
import { PAGES } from './pages.js';

const SIGNED_OUT = new Set(['sign-in', 'sign-up', 'verify-email', 'forgot-password', 'reset-password', 'magic', 'signed-in', 'join']);
// Pages that work signed out and do more signed in: a session, if the cookie holds one, is resumed first.
const EITHER = new Set(['join', 'verify-email']);
let generation = 0;

/** The page name of the current address: `/portal/keys` → `keys`, `/portal/` → `overview`. */
function pageName() {
  const rest = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) : '';
  return rest === '' ? 'overview' : rest.replace(/\/$/, '');
}

function productHeader() {
  const product = config().product;
  const logo = product.logo ? h('img', { src: product.logo, alt: '', class: 'logo', width: 32, height: 32 }) : null;
  const switcher = h('button', { type: 'button', id: 'lang', lang: lang() === 'fr' ? 'en' : 'fr', onclick: () => void switchLanguage() }, t('lang.switch'));
  const back = returnLink();
  return h('header', { class: 'top' },
    h('a', { href: BASE, class: 'product' }, logo, h('span', { id: 'product-name' }, product.name)),
    h('div', { class: 'tools' }, back ? h('a', { href: back, id: 'back-to-app' }, t('nav.back')) : null, switcher,
      signedIn() ? h('button', { type: 'button', id: 'sign-out', onclick: () => void leave() }, t('nav.signOut')) : null));
}

function sections(current) {
  const items = [['overview', ''], ['keys', 'keys'], ['usage', 'usage'], ...(config().features.billing ? [['billing', 'billing']] : []),
    ['security', 'security'], ...(config().features.organizations ? [['orgs', 'orgs']] : []), ['account', 'account']];
  return h('nav', { 'aria-label': t('nav.label'), class: 'sections' }, h('ul', {}, items.map(([name, path]) =>
    h('li', {}, h('a', { href: `${BASE}${path}`, 'aria-current': name === current ? 'page' : false }, t(`nav.${name}`))))));
}

function actingNote() {
  const org = acting();
  if (!org) return null;
  return h('p', { class: 'acting', id: 'acting' }, t('org.actingAs', { name: org.name }), ' ', h('a', { href: `${BASE}orgs` }, t('org.change')));
}

async function switchLanguage() {
  await chooseLang(lang() === 'fr' ? 'en' : 'fr');
  await render({ keepFocus: 'lang' });
}

async function leave() {
  await signOut();
  nav('sign-in');
}

/** Draws the page the address names; a signed-in page without a session goes to sign-in (then back). */
export async function render({ keepFocus } = {}) {
  const mine = ++generation;
  const name = pageName();
  const page = PAGES[name];
  if (!SIGNED_OUT.has(name) && page && !signedIn() && !(await resume())) return nav('sign-in', { next: name === 'overview' ? '' : name });
  if (EITHER.has(name) && !signedIn()) await resume();
  if (signedIn() && !me()) await loadMe();
  if (mine !== generation) return;
  document.documentElement.lang = lang();
  const main = h('main', { id: 'main', tabindex: '-1' });
  const chrome = signedIn() && !SIGNED_OUT.has(name) ? [sections(name), actingNote()] : [];
  const skip = h('a', { href: '#main', class: 'skip' }, t('nav.skip'));
  document.body.replaceChildren(skip, productHeader(), ...chrome.filter(Boolean), main, footer());
  const title = await (page ?? PAGES['not-found'])(main, new URLSearchParams(location.search));
  if (mine !== generation) return;
  document.title = `${title} · ${config().product.name}`;
  if (keepFocus && $(keepFocus)) $(keepFocus).focus();
  else main.querySelector('h1')?.focus();
}

function footer() {
  const { product, docs } = config();
  const links = [[product.terms, t('foot.terms')], [product.privacy, t('foot.privacy')], [docs, t('foot.docs')]]
    .filter(([href]) => href).map(([href, text]) => h('a', { href, rel: 'noopener' }, text));
  const support = product.support ? h('a', { href: `mailto:${product.support}` }, t('foot.support')) : null;
  return h('footer', {}, ...links, support);
}

// Links within the portal are followed without a reload: the access token stays in memory.
document.addEventListener('click', (e) => {
  const a = e.target instanceof Element ? e.target.closest('a[href]') : null;
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || a.target) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || !url.pathname.startsWith(BASE) || a.getAttribute('href').startsWith('#')) return;
  e.preventDefault();
  history.pushState(null, '', url.pathname + url.search);
  void render();
});
addEventListener('popstate', () => void render());
addEventListener('gw-portal-nav', () => void render());
onSignedOut(() => { if (!SIGNED_OUT.has(pageName())) nav('sign-in'); else void render(); });

await setConfig();
await render();
