// The bench and the scripts seed their databases with the gateway's own built modules
// (`const { newApiKey } = await import(path.join(ROOT, 'dist/keys/index.js'))`). No type checker
// reads those lines, so a module that moved (API keys went to src/keys/ in issue 73) broke
// `npm run bench` with "newApiKey is not a function" and nothing else said so. Every such import
// must name a built module that exports each name it takes.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const BUILT_IMPORT = /const \{([^}]+)\} = await import\(path\.join\(\w+, '(dist\/[\w/.-]+\.js)'\)\)/g;

/** Every `{ names } = await import(... 'dist/….js')` of the .mjs files in `dir`. */
function builtImports(dir: string): Array<{ file: string; module: string; names: string[] }> {
  return readdirSync(path.join(root, dir))
    .filter((name) => name.endsWith('.mjs'))
    .flatMap((name) => [...readFileSync(path.join(root, dir, name), 'utf8').matchAll(BUILT_IMPORT)].map((match) => ({
      file: `${dir}/${name}`,
      module: match[2]!,
      names: match[1]!.split(',').map((part) => part.trim().split(':')[0]!.trim()).filter(Boolean),
    })));
}

describe('the built modules the bench and the scripts import', () => {
  const imports = [...builtImports('bench'), ...builtImports('scripts')];

  it('are found in bench/ (the pattern still matches how they are written)', () => {
    expect(imports.map((i) => i.module)).toContain('dist/storage/accounts/users.js');
  });

  it('exist and export every name taken from them', async () => {
    const missing: string[] = [];
    for (const { file, module, names } of imports) {
      let exported: Record<string, unknown>;
      try {
        exported = await import(pathToFileURL(path.join(root, module)).href) as Record<string, unknown>;
      } catch (err) {
        missing.push(`${file}: ${module} (${(err as Error).message.split('\n')[0]})`);
        continue;
      }
      for (const name of names) if (exported[name] === undefined) missing.push(`${file}: ${name} from ${module}`);
    }
    expect(missing).toEqual([]);
  });
});
