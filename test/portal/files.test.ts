// What of the portal's folder is served, and how (src/portal/files.ts): each extension's type, the
// text gzipped once, hashed names cached for good, dot files and folders never served, an absent
// folder serving nothing. The pages as a browser gets them: origin.test.ts.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { isHashedName, portalFile, readPortalFiles } from '../../src/portal/files.js';

describe('a file of the portal\'s folder', () => {
  it.each([
    ['index.html', 'text/html; charset=utf-8', true], ['app.js', 'text/javascript; charset=utf-8', true], ['app.mjs', 'text/javascript; charset=utf-8', true],
    ['app.css', 'text/css; charset=utf-8', true], ['logo.svg', 'image/svg+xml', true], ['logo.png', 'image/png', false], ['favicon.ico', 'image/x-icon', true],
    ['font.woff2', 'font/woff2', false], ['data.json', 'application/json', true], ['app.js.map', 'application/json', true],
    ['site.webmanifest', 'application/manifest+json', true], ['robots.txt', 'text/plain; charset=utf-8', true], ['INDEX.HTML', 'text/html; charset=utf-8', true],
  ])('%s is served as %s, gzipped: %s', (name, type, gzipped) => {
    const body = Buffer.from(`the body of ${name}`);
    const file = portalFile(body, name)!;
    expect(file).toMatchObject({ body, type, immutable: false });
    expect(file.gzip === undefined ? undefined : gunzipSync(file.gzip).toString()).toBe(gzipped ? body.toString() : undefined);
  });

  it('of any other extension, or none, is not served', () => {
    for (const name of ['run.sh', 'README', 'app.ts', 'index.html.bak']) expect(portalFile(Buffer.from('x'), name), name).toBeUndefined();
  });

  it('is cached for good when its name carries its content\'s hash: 8 or more hex digits, a digit among them, before the extension', () => {
    const hashed = ['app.3f9a1c07.js', 'app-3f9a1c07b2.css', 'app.abcdef12.js', 'chunk.12345678.mjs', 'APP.3F9A1C07.JS'];
    const not = ['app.js', 'app.3f9a1c0.js', 'app.abcdefab.js', '3f9a1c07.js', 'app.3f9a1c07.js.bak.txt', 'app.3f9a1c07zz.js', 'app_3f9a1c07.js'];
    expect(hashed.filter((n) => !isHashedName(n))).toEqual([]);
    expect(not.filter(isHashedName)).toEqual([]);
    expect(portalFile(Buffer.from('x'), 'app.3f9a1c07.js')!.immutable).toBe(true);
  });
});

describe('the portal\'s folder', () => {
  it('serves every file it holds by its path under it, but dot files and dot folders, other extensions and folders', () => {
    const folder = mkdtempSync(path.join(tmpdir(), 'portal-files-'));
    try {
      mkdirSync(path.join(folder, 'assets', 'fonts'), { recursive: true });
      mkdirSync(path.join(folder, '.cache'));
      mkdirSync(path.join(folder, 'odd.js'));
      for (const name of ['index.html', 'assets/app.3f9a1c07.js', 'assets/fonts/a.woff2', '.env', '.cache/page.html', 'assets/.app.js.swp', 'notes.md']) {
        writeFileSync(path.join(folder, name), name);
      }
      const files = readPortalFiles(folder);
      expect([...files.keys()].sort()).toEqual(['assets/app.3f9a1c07.js', 'assets/fonts/a.woff2', 'index.html']);
      expect(files.get('assets/app.3f9a1c07.js')).toMatchObject({ body: Buffer.from('assets/app.3f9a1c07.js'), immutable: true });
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  });

  it('serves nothing when absent, and fails at start when it is no folder', () => {
    const root = mkdtempSync(path.join(tmpdir(), 'portal-files-'));
    try {
      expect(readPortalFiles(path.join(root, 'none')).size).toBe(0);
      writeFileSync(path.join(root, 'file'), 'x');
      expect(() => readPortalFiles(path.join(root, 'file'))).toThrow(/ENOTDIR/);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
