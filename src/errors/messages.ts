// The words of the answers (CONTRACT §20): each text of the catalog (errors and success messages)
// in the language an answer is in, its parameters filled. The built-in languages are fr (the spec's,
// the default) and en; an operator's `errors.messages` folder overrides them or adds others, one
// `<lang>.json` of {code: text} per language (read and checked by messageFiles.ts).
import { CATALOG } from './catalog.js';
import { SUCCESS } from './success.js';

export type Language = string;
export const BUILT_IN_LANGUAGES = ['fr', 'en'] as const;

/** A noun in each language, singular and plural: the quota messages' `course`/`courses`. */
export type Nouns = Readonly<Record<Language, { readonly one: string; readonly many: string }>>;

/** A parameter of a text: a value, a noun agreeing with a count (`course`, `courses`), or a list ("free, premium ou pro"). */
export type Param = string | number | { readonly count: number; readonly nouns: Nouns } | { readonly list: readonly string[] };
export type Params = Readonly<Record<string, Param>>;

/** How the answers of an instance read: from `errors` of gateway.yaml and the files of `errors.messages`. */
export interface ErrorStyle {
  /** Every error body adds `code`. */
  readonly codes: boolean;
  readonly language: 'fr' | 'en' | 'negotiate';
  /** Every language with texts: fr, en, and those of the operator's files. */
  readonly languages: readonly Language[];
  /** The operator's texts, by language, then code (an error's `code`, a success message's id). */
  readonly overrides: ReadonlyMap<Language, Readonly<Record<string, string>>>;
}

export const DEFAULT_STYLE: ErrorStyle = { codes: false, language: 'fr', languages: BUILT_IN_LANGUAGES, overrides: new Map() };

/** Whether any answer's body depends on Accept-Language. */
export const negotiates = (style: ErrorStyle): boolean => style.language === 'negotiate';

export type ErrorName = keyof typeof CATALOG;
export type SuccessName = keyof typeof SUCCESS;

const LIST_WORD: Readonly<Record<Language, string>> = { fr: 'ou', en: 'or' };

function paramText(param: Param, language: Language): string {
  if (typeof param !== 'object') return String(param);
  if ('list' in param) {
    const { list } = param;
    return list.length > 1 ? `${list.slice(0, -1).join(', ')} ${LIST_WORD[language] ?? LIST_WORD.en} ${list.at(-1)}` : list[0] ?? '';
  }
  const noun = param.nouns[language] ?? param.nouns.en ?? Object.values(param.nouns)[0]!;
  return param.count === 1 ? noun.one : noun.many;
}

/** `{name}` placeholders of a text. */
export function placeholders(text: string): string[] {
  return [...text.matchAll(/\{([a-z_]+)\}/g)].map((m) => m[1]!);
}

export function fill(text: string, language: Language, params: Params = {}): string {
  return text.replace(/\{([a-z_]+)\}/g, (whole, name: string) => (Object.hasOwn(params, name) ? paramText(params[name]!, language) : whole));
}

interface Texts { readonly code: string; readonly fr: string; readonly en: string }

/** A text in `language`: the operator's, else the built-in one, else English. */
function textOf(style: ErrorStyle, entry: Texts, language: Language): string {
  const own = style.overrides.get(language)?.[entry.code];
  if (own !== undefined) return own;
  return language === 'fr' ? entry.fr : entry.en;
}

export function errorMessage(style: ErrorStyle, name: ErrorName, language: Language, params?: Params): string {
  return fill(textOf(style, CATALOG[name], language), language, params);
}

/** The code's fixed text: its title, or its message where the message has no parameter. */
export function errorTitle(style: ErrorStyle, name: ErrorName, language: Language): string {
  const entry: (typeof CATALOG)[ErrorName] & { title?: { fr: string; en: string } } = CATALOG[name];
  if (!entry.title) return textOf(style, entry, language);
  return language === 'fr' ? entry.title.fr : entry.title.en;
}

export function successMessage(style: ErrorStyle, name: SuccessName, language: Language): string {
  return textOf(style, SUCCESS[name], language);
}
