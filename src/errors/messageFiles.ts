// The operator's texts (CONTRACT §20, `errors.messages`): a folder of `<lang>.json` files, each
// {code: text} for error codes and success message ids, overriding fr or en or adding a language.
// Read once at start; `gateway check` reports every problem of every file (files.ts), so a typo
// in a code or a lost `{limit}` is found before an answer shows it.
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { CATALOG } from './catalog.js';
import { BUILT_IN_LANGUAGES, DEFAULT_STYLE, placeholders, type ErrorStyle, type Language } from './messages.js';
import { LANGUAGE_TAG } from './negotiation.js';
import { SUCCESS } from './success.js';

/** Every code a file may name, with the placeholders its text may use (the French text's). */
export const TEXT_CODES: ReadonlyMap<string, readonly string[]> = new Map(
  [...Object.values(CATALOG), ...Object.values(SUCCESS)].map((entry) => [entry.code, placeholders(entry.fr)]),
);
/** Nouns a text may leave out ("at least {min} characters" says it its own way); every other placeholder it must keep. */
const OPTIONAL = new Set(['characters', 'noun']);

const MAX_TEXT = 500;

/** What is wrong with one file's texts; empty when it is usable. */
function textProblems(file: string, parsed: unknown): string[] {
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return [`${file}: expected an object of {code: text}`];
  const problems: string[] = [];
  for (const [code, text] of Object.entries(parsed)) {
    const wanted = TEXT_CODES.get(code);
    if (!wanted) problems.push(`${file}: unknown code ${JSON.stringify(code)} (gateway errors --json lists them)`);
    else if (typeof text !== 'string' || !text.trim() || text.length > MAX_TEXT) problems.push(`${file}: ${code}: expected a text of 1 to ${MAX_TEXT} characters`);
    // eslint-disable-next-line no-control-regex -- the control characters are what is refused
    else if (/[\u0000-\u001f\u007f-\u009f]/.test(text)) problems.push(`${file}: ${code}: a control character in the text`);
    else {
      const has = placeholders(text);
      for (const name of wanted) if (!has.includes(name) && !OPTIONAL.has(name)) problems.push(`${file}: ${code}: the placeholder {${name}} is missing`);
      for (const name of has) if (!wanted.includes(name)) problems.push(`${file}: ${code}: unknown placeholder {${name}} (this text has ${wanted.map((w) => `{${w}}`).join(', ') || 'none'})`);
    }
  }
  return problems;
}

export interface MessageFiles {
  overrides: Map<Language, Record<string, string>>;
  problems: string[];
}

/** Reads the folder's `<lang>.json` files: their texts, and every problem they have. */
export async function readMessageFiles(dir: string): Promise<MessageFiles> {
  const overrides = new Map<Language, Record<string, string>>();
  let names: string[];
  try {
    names = (await readdir(dir)).filter((name) => name.endsWith('.json')).sort();
  } catch (err) {
    return { overrides, problems: [`${dir}: cannot read the folder: ${(err as NodeJS.ErrnoException).code ?? String(err)}`] };
  }
  const problems: string[] = [];
  for (const name of names) {
    const file = path.join(dir, name);
    const language = name.slice(0, -'.json'.length);
    if (!LANGUAGE_TAG.test(language)) {
      problems.push(`${file}: expected a file named after a lower-case language tag, such as en.json or pt-br.json`);
      continue;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(await readFile(file, 'utf8'));
    } catch (err) {
      problems.push(`${file}: not JSON: ${(err as Error).message}`);
      continue;
    }
    const found = textProblems(file, parsed);
    problems.push(...found);
    if (!found.length) overrides.set(language, parsed as Record<string, string>);
  }
  return { overrides, problems };
}

/** Thrown at start when `errors.messages` holds a file `gateway check` would refuse. */
export class MessageFilesError extends Error {}

/** How an instance's answers read: `errors` of the configuration and the operator's files. */
export async function errorStyleOf(errors: Pick<ErrorStyle, 'codes' | 'language'> & { messages?: string }): Promise<ErrorStyle> {
  if (!errors.codes && errors.language === 'fr' && !errors.messages) return DEFAULT_STYLE;
  const { overrides, problems } = errors.messages ? await readMessageFiles(errors.messages) : { overrides: new Map(), problems: [] };
  if (problems.length) throw new MessageFilesError(`errors.messages: ${problems.join('; ')}`);
  const languages = [...new Set<Language>([...BUILT_IN_LANGUAGES, ...overrides.keys()])];
  return { codes: errors.codes, language: errors.language, languages, overrides };
}
