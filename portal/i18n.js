// French and English (CONTRACT §30): the configured language first (errors.language), then the
// user's own (their account's locale), then what they choose on the switch, which this browser
// keeps. Texts are looked up by key; {name} placeholders are filled with text, never markup.
import { TEXTS } from './texts.js';

const KEY = 'gw-portal-lang';
let current = 'fr';

const supported = (l) => (l === 'fr' || l === 'en' ? l : null);
export const lang = () => current;
export const chosenLang = () => supported(localStorage.getItem(KEY));

export function setInitialLang(configured) {
  current = chosenLang() ?? supported(String(configured ?? '').slice(0, 2)) ?? 'fr';
}

export function setLang(next, { remember = true } = {}) {
  const l = supported(String(next).slice(0, 2));
  if (!l) return;
  current = l;
  if (remember) localStorage.setItem(KEY, l);
}

/** The text of `key` in the current language, its {placeholders} filled. */
export function t(key, vars = {}) {
  const text = TEXTS[current][key] ?? TEXTS.en[key] ?? key;
  return text.replace(/\{(\w+)\}/g, (_, name) => (name in vars ? String(vars[name]) : `{${name}}`));
}
