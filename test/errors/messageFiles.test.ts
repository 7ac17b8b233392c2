// The operator's texts (src/errors/messageFiles.ts, CONTRACT §20, `errors.messages`) read from a
// folder of its own: every problem of every file named (what `gateway check` prints and what stops
// a start), a file with any problem left out whole, and the style an instance answers with.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorStyleOf, MessageFilesError, readMessageFiles, TEXT_CODES } from '../../src/errors/messageFiles.js';
import { DEFAULT_STYLE } from '../../src/errors/messages.js';

let root: string;
beforeAll(async () => { root = await mkdtemp(path.join(tmpdir(), 'messages-')); });
afterAll(async () => { await rm(root, { recursive: true, force: true }); });

/** A folder holding `files` (name → content; an object is written as JSON). */
async function folder(name: string, files: Record<string, unknown>): Promise<string> {
  const dir = path.join(root, name);
  await mkdir(dir);
  for (const [file, content] of Object.entries(files)) await writeFile(path.join(dir, file), typeof content === 'string' ? content : JSON.stringify(content));
  return dir;
}

describe('an operator\'s messages folder', () => {
  it('knows each code\'s placeholders from its French text', () => {
    expect(TEXT_CODES.get('password_too_short')).toEqual(['min', 'characters']);
    expect(TEXT_CODES.get('user_created')).toEqual([]);
    expect(TEXT_CODES.has('no_such_code')).toBe(false);
  });

  it('reads each <lang>.json (other files ignored) into the texts of its language', async () => {
    const dir = await folder('good', {
      // A text may say the nouns its own way ({characters}, {noun}): every other placeholder it keeps.
      'en.json': { token_missing: 'No credential', password_too_short: 'At least {min}, please', daily_limit_reached: 'Daily limit reached ({plan}: {limit}/day)' },
      'pt-br.json': { user_created: 'Usuário criado' },
      'README.md': 'not read',
    });
    const { overrides, problems } = await readMessageFiles(dir);
    expect(problems).toEqual([]);
    expect([...overrides.keys()]).toEqual(['en', 'pt-br']);
    expect(overrides.get('en')).toEqual({ token_missing: 'No credential', password_too_short: 'At least {min}, please', daily_limit_reached: 'Daily limit reached ({plan}: {limit}/day)' });
  });

  it('names every problem of every file, in the files\' order, and keeps none of a file that has one', async () => {
    const dir = await folder('bad', {
      'EN.json': { token_missing: 'x' },
      'de.json': '{"token_missing": ',
      'es.json': ['token_missing'],
      'fi.json': 'null',
      'it.json': '"text"',
      'fr.json': {
        no_such_code: 'x', token_missing: 42, user_created: '   ', logged_out: 'x'.repeat(501), password_reset: 'x'.repeat(500),
        email_verified: 'bell\u0007', account_deleted: 'next\u0085line', session_revoked: 'del\u007f',
        password_too_short: 'Trop court ({characters})', daily_limit_reached: 'Limite {limit} {noun} ({plan}) {when}', api_key_revoked: 'Révoquée {id}',
      },
      'nl.json': { token_missing: 'Geen token' },
    });
    const { overrides, problems } = await readMessageFiles(dir);
    const file = (name: string) => path.join(dir, name);
    expect(problems).toEqual([
      `${file('EN.json')}: expected a file named after a lower-case language tag, such as en.json or pt-br.json`,
      expect.stringMatching(new RegExp(`^${file('de.json').replace(/[.]/g, '\\.')}: not JSON: `)),
      `${file('es.json')}: expected an object of {code: text}`,
      `${file('fi.json')}: expected an object of {code: text}`,
      `${file('fr.json')}: unknown code "no_such_code" (gateway errors --json lists them)`,
      `${file('fr.json')}: token_missing: expected a text of 1 to 500 characters`,
      `${file('fr.json')}: user_created: expected a text of 1 to 500 characters`,
      `${file('fr.json')}: logged_out: expected a text of 1 to 500 characters`,
      `${file('fr.json')}: email_verified: a control character in the text`,
      `${file('fr.json')}: account_deleted: a control character in the text`,
      `${file('fr.json')}: session_revoked: a control character in the text`,
      `${file('fr.json')}: password_too_short: the placeholder {min} is missing`,
      `${file('fr.json')}: daily_limit_reached: unknown placeholder {when} (this text has {plan}, {limit}, {noun})`,
      `${file('fr.json')}: api_key_revoked: unknown placeholder {id} (this text has none)`,
      `${file('it.json')}: expected an object of {code: text}`,
    ]);
    // nl.json has no problem: it is the only one kept.
    expect([...overrides.keys()]).toEqual(['nl']);
  });

  it('a folder it cannot read is a problem of its own', async () => {
    const missing = path.join(root, 'absent');
    expect(await readMessageFiles(missing)).toEqual({ overrides: new Map(), problems: [`${missing}: cannot read the folder: ENOENT`] });
  });
});

describe('the style an instance answers with', () => {
  it('the spec\'s own without codes, French and no folder', async () => {
    expect(await errorStyleOf({ codes: false, language: 'fr' })).toBe(DEFAULT_STYLE);
    expect(await errorStyleOf({ codes: true, language: 'fr' })).toEqual({ codes: true, language: 'fr', languages: ['fr', 'en'], overrides: new Map() });
    expect(await errorStyleOf({ codes: false, language: 'en' })).toEqual({ codes: false, language: 'en', languages: ['fr', 'en'], overrides: new Map() });
  });

  it('the folder\'s languages after the built-in ones, each once; a folder with a problem stops the start', async () => {
    const good = await folder('style', { 'de.json': { user_created: 'Angelegt' }, 'en.json': { user_created: 'Welcome' } });
    const style = await errorStyleOf({ codes: false, language: 'negotiate', messages: good });
    expect(style.languages).toEqual(['fr', 'en', 'de']);
    expect(style.overrides.get('de')).toEqual({ user_created: 'Angelegt' });
    const bad = await folder('style-bad', { 'de.json': { nope: 'x' }, 'en.json': { user_created: '' } });
    const refused = errorStyleOf({ codes: false, language: 'fr', messages: bad });
    await expect(refused).rejects.toBeInstanceOf(MessageFilesError);
    await expect(refused).rejects.toThrow(
      `errors.messages: ${path.join(bad, 'de.json')}: unknown code "nope" (gateway errors --json lists them); ${path.join(bad, 'en.json')}: user_created: expected a text of 1 to 500 characters`);
  });
});
