// package.json against the code. A package src imports but `dependencies` lacks works here only
// because a dev or transitive package happens to install it, and fails in the image, which
// keeps production dependencies alone (`npm prune --omit=dev`). A dependency src never imports
// still ships, and is updated and audited, in every install. An `exports` or `bin` target the
// build does not produce breaks the upstreams importing `auth-gateway/verify` and the
// operators' `gateway` command. The target tests read dist/: `npm test` builds first.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../', import.meta.url));

interface PackageJson {
  name: string;
  bin: Record<string, string>;
  exports: Record<string, string>;
  files: string[];
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
}
const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as PackageJson;

/** The npm packages the files under `dir` import: static, type-only, dynamic and require(). */
function importedPackages(dir: string): Set<string> {
  const packages = new Set<string>();
  const files = readdirSync(path.join(ROOT, dir), { recursive: true, encoding: 'utf8' }).filter((f) => /\.(ts|mjs|js)$/.test(f));
  for (const file of files) {
    const source = readFileSync(path.join(ROOT, dir, file), 'utf8');
    // Imported, or resolved to a file it serves (require.resolve('uplot/dist/…'): the console's chart).
    const resolved = [...source.matchAll(/\.resolve\('([^'./][^']*)'\)/g)].map(([, specifier]) => ({ fileName: specifier! }));
    for (const { fileName: specifier } of [...ts.preProcessFile(source, true, true).importedFiles, ...resolved]) {
      if (specifier.startsWith('.') || specifier.startsWith('/') || isBuiltin(specifier)) continue;
      // '@scope/name/sub' and 'name/sub' belong to '@scope/name' and 'name'.
      packages.add(specifier.split('/').slice(0, specifier.startsWith('@') ? 2 : 1).join('/'));
    }
  }
  return packages;
}

describe('package.json dependencies', () => {
  const runtime = importedPackages('src');

  it('lists every package src imports under dependencies', () => {
    expect([...runtime].filter((name) => !(name in pkg.dependencies))).toEqual([]);
  });

  it('lists under dependencies only packages src imports (bench and test ones are devDependencies)', () => {
    expect(Object.keys(pkg.dependencies).filter((name) => !runtime.has(name))).toEqual([]);
  });

  it('declares every package the tests and the benchmark import', () => {
    const declared = { ...pkg.dependencies, ...pkg.devDependencies };
    const used = new Set([...importedPackages('test'), ...importedPackages('bench')]);
    expect([...used].filter((name) => !(name in declared))).toEqual([]);
  });
});

describe('package.json targets after the build', () => {
  it('points files, exports and bin at paths that exist', () => {
    const targets = [...pkg.files, ...Object.values(pkg.exports), ...Object.values(pkg.bin)];
    expect(targets.filter((target) => !existsSync(path.join(ROOT, target)))).toEqual([]);
  });

  it('makes every bin target a node script the shell can run', () => {
    for (const target of Object.values(pkg.bin)) {
      expect(readFileSync(path.join(ROOT, target), 'utf8').split('\n')[0], target).toBe('#!/usr/bin/env -S node --max-semi-space-size=32');
    }
  });

  it('loads every export by its package name, as an upstream imports it', () => {
    for (const subpath of Object.keys(pkg.exports)) {
      const specifier = pkg.name + subpath.slice(1);
      const script = `const m = await import(${JSON.stringify(specifier)}); process.stdout.write(String(Object.keys(m).length));`;
      const exported = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8' });
      expect(Number(exported), specifier).toBeGreaterThan(0);
    }
  });
});
