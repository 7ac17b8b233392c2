// The docs point at code and tests by path (docs/security.md names the test that proves each rule,
// docs/architecture.md the module that does each thing): every path they name must exist, so a
// renamed or removed file cannot leave a page pointing at nothing.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';
import { docsPages } from '../helpers/docs.js';

const ROOT = new URL('../../', import.meta.url);

it('every src/ and test/ file the docs name exists', () => {
  const missing = docsPages().flatMap((page) => {
    const text = readFileSync(new URL(page, ROOT), 'utf8');
    return [...new Set([...text.matchAll(/`((?:src|test)\/[\w/.-]+\.(?:ts|mjs|js))`/g)].map((m) => m[1]!))]
      .filter((file) => !existsSync(new URL(file, ROOT)))
      .map((file) => `${page}: ${file}`);
  });
  expect(missing).toEqual([]);
});

it('every relative link and image of the docs leads to a file that exists', () => {
  const missing = docsPages().flatMap((page) => {
    const text = readFileSync(new URL(page, ROOT), 'utf8');
    return [...text.matchAll(/\]\(([^)\s#]+)(?:#[^)\s]*)?\)/g)].map((m) => m[1]!)
      .filter((target) => !/^[a-z][\w+.-]*:/i.test(target))
      .filter((target) => !existsSync(new URL(path.posix.join(path.posix.dirname(page), target), ROOT)))
      .map((target) => `${page}: ${target}`);
  });
  expect(missing).toEqual([]);
});

it('every file docs/architecture.md names (by its path under src/) exists', () => {
  const text = readFileSync(new URL('docs/architecture.md', ROOT), 'utf8');
  const named = [...new Set([...text.matchAll(/`((?:[\w-]+\/)*[\w-]+\.ts)`/g)].map((m) => m[1]!))];
  const missing = named.filter((file) => !existsSync(new URL(file, ROOT)) && !existsSync(new URL(`src/${file}`, ROOT)));
  expect(named.length).toBeGreaterThan(40);
  expect(missing).toEqual([]);
});
