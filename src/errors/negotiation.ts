// What a client asked for (CONTRACT §20): problem details through Accept, a language through
// Accept-Language. Both read on the error path and for the few texts that follow the language:
// never on a request that passes.

interface Preference {
  readonly value: string;
  readonly q: number;
}

/** The entries of an Accept or Accept-Language header, lower-cased, with their q-values (1 without one). */
function preferences(header: string | undefined): Preference[] {
  if (!header) return [];
  const out: Preference[] = [];
  for (const part of header.split(',')) {
    const [value, ...params] = part.split(';').map((p) => p.trim().toLowerCase());
    if (!value) continue;
    let q = 1;
    for (const param of params) {
      const m = /^q=([01](?:\.\d{0,3})?)$/.exec(param.replace(/\s/g, ''));
      if (param.startsWith('q')) q = m ? Math.min(1, Number(m[1])) : 0;
    }
    out.push({ value, q });
  }
  return out;
}

const PROBLEM = 'application/problem+json';

/**
 * Whether the client named problem details explicitly with a q-value above 0, not below the one
 * application/json gets from the same header (its own entry, else application/*, else *\/*). A
 * range alone never asks for problem details: a browser's *\/* keeps the spec's body.
 */
export function wantsProblem(accept: string | undefined): boolean {
  // Media types are case-insensitive (RFC 9110 §8.3.1): `APPLICATION/PROBLEM+JSON` asks too (preferences lower-cases).
  const entries = preferences(accept);
  const problem = entries.find((e) => e.value === PROBLEM);
  if (!problem || problem.q <= 0) return false;
  const json = entries.find((e) => e.value === 'application/json') ?? entries.find((e) => e.value === 'application/*') ?? entries.find((e) => e.value === '*/*');
  return problem.q >= (json?.q ?? 0);
}

/**
 * The language among `languages` the Accept-Language header prefers (q-values; `en-GB` matches
 * `en`; `*` takes the fallback), else the fallback.
 */
export function negotiateLanguage(acceptLanguage: string | undefined, languages: readonly string[], fallback: string): string {
  const ranked = preferences(acceptLanguage).filter((p) => p.q > 0).sort((a, b) => b.q - a.q);
  for (const { value } of ranked) {
    if (value === '*') return fallback;
    if (languages.includes(value)) return value;
    const primary = value.split('-', 1)[0]!;
    if (languages.includes(primary)) return primary;
  }
  return fallback;
}

/** A language tag the gateway accepts as a name for a messages file or a user's locale: `en`, `pt-br`. */
export const LANGUAGE_TAG = /^[a-z]{2,3}(?:-[a-z0-9]{2,8})?$/;

/** A BCP 47 tag as a client sends one (`en`, `en-gb`, `zh-hant-tw`), lower-cased. */
const LOCALE = /^[a-z]{2,3}(?:-[a-z0-9]{1,8})*$/;

/**
 * The language among `languages` a user's `locale` names (`en-GB` reads as `en`, as in
 * negotiateLanguage), or undefined: not a string, not a language tag, or one without texts.
 */
export function supportedLanguage(locale: unknown, languages: readonly string[]): string | undefined {
  if (typeof locale !== 'string') return undefined;
  const tag = locale.trim().toLowerCase().replaceAll('_', '-');
  if (tag.length > 35 || !LOCALE.test(tag)) return undefined;
  if (languages.includes(tag)) return tag;
  const primary = tag.split('-', 1)[0]!;
  return languages.includes(primary) ? primary : undefined;
}

/** The language among `languages` an Accept-Language header names (q-values), or undefined when it names none (`*`, none, others). */
export function namedLanguage(acceptLanguage: string | undefined, languages: readonly string[]): string | undefined {
  return negotiateLanguage(acceptLanguage, languages, '') || undefined;
}
