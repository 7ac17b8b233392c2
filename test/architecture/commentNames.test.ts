// A comment that names a file is a link (STYLE 31): when the file is renamed or moved, the
// comment points at nothing, and the next reader looks for it in vain (issue 73 found 23 such
// names in src/). Every file a comment of src/ or test/ names must exist: a path (`src/…`, a
// room's `auth/index.ts`, `helpers/gateway.ts` from test/, or one relative to the commenting
// file), or a bare file name, which must be some file's of src/ or test/ (or the root's, or
// beside the commenting file). docs/ has its own
// check (test/docs/references.test.ts).
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    // fixtures/ holds other projects' files as they are.
    if (entry.isDirectory()) return entry.name === 'fixtures' ? [] : sourceFiles(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

// A whole-line comment (`//`, a block's `/*` or ` *`), or one that follows code after ` // `.
const COMMENT = /^\s*(?:\/\/|\/\*|\*)(.*)$|\s\/\/\s(.*)$/;
// A path to a .ts file, not part of a longer word, path or glob (`src/auth/*Routes.ts`).
const PATH_NAME = /(?<![\w./*-])((?:[\w-]+\/)+[\w.-]+\.ts)\b/g;
const BARE_NAME = /(?<![\w./*-])([\w-]+(?:\.[\w-]+)*\.ts)\b/g;

/** `file:line: name` for every file a comment of `sources` (path → text) names that does not exist. */
function staleNames(sources: Map<string, string>): string[] {
  const basenames = new Set([...sources.keys()].map((file) => path.basename(file)));
  const exists = (file: string, name: string) => [ROOT, path.join(ROOT, 'src'), path.join(ROOT, 'test'), path.dirname(file)].some((base) => existsSync(path.join(base, name)));
  return [...sources].flatMap(([file, text]) => text.split('\n').flatMap((line, i) => {
    const comment = COMMENT.exec(line);
    if (!comment) return [];
    const said = comment[1] ?? comment[2] ?? '';
    return [
      ...[...said.matchAll(PATH_NAME)].map((m) => m[1]!).filter((name) => !exists(file, name)),
      ...[...said.matchAll(BARE_NAME)].map((m) => m[1]!).filter((name) => !basenames.has(name) && !exists(file, name)),
    ].map((name) => `${path.relative(ROOT, file)}:${i + 1}: ${name}`);
  }));
}

const sources = new Map([...sourceFiles(path.join(ROOT, 'src')), ...sourceFiles(path.join(ROOT, 'test'))].map((file) => [file, readFileSync(file, 'utf8')]));

it('every file a comment of src/ or test/ names exists', () => {
  expect(sources.size).toBeGreaterThan(300);
  expect(staleNames(sources)).toEqual([]);
});

it('a name is found in each form a comment gives it, and only a missing one is reported', () => {
  const probe = path.join(ROOT, 'src/proxy/probe.ts');
  const text = [
    '// src/gone.ts, auth/gone.ts, gone.ts; src/proxy/relay.ts, proxy/relay.ts, relay.ts, guards/quota.ts (no: pipeline/guards/quota.ts)',
    `const x = 1; ${'//'} after code: listener/gone.ts`,
    '/**',
    ' * in a block: test/helpers/gone.ts, helpers/gateway.ts; a glob, src/auth/*Routes.ts; not a comment below',
    ' */',
    "const y = 'a/gone.ts';",
  ].join('\n');
  expect(staleNames(new Map([...sources, [probe, text]])).filter((found) => found.startsWith('src/proxy/probe.ts'))).toEqual([
    'src/proxy/probe.ts:1: src/gone.ts', 'src/proxy/probe.ts:1: auth/gone.ts', 'src/proxy/probe.ts:1: guards/quota.ts', 'src/proxy/probe.ts:1: gone.ts',
    'src/proxy/probe.ts:2: listener/gone.ts', 'src/proxy/probe.ts:4: test/helpers/gone.ts',
  ]);
});
