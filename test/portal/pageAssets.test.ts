// The portal's pages as files (CONTRACT §30): the vendored scripts are what scripts/portal-vendor.mjs
// makes of the installed packages (an update of uplot or qrcode without running it fails here);
// script and style together stay under 150 KB gzipped; no page script writes markup from a string
// (names are chosen by customers: they reach the page as text only); every text has both languages.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain ES module script, without types
import { vendored } from '../../scripts/portal-vendor.mjs';
// @ts-expect-error: the page's own module, plain JavaScript
import { TEXTS as PAGE_TEXTS } from '../../portal/texts.js';

const TEXTS = PAGE_TEXTS as Record<'fr' | 'en', Record<string, string>>;

const DIR = path.join(import.meta.dirname, '../../portal');
const VENDORED = new Set(['uplot.js', 'uplot.css', 'qrcode.js']);
const files = readdirSync(DIR);
const own = files.filter((f) => f.endsWith('.js') && !VENDORED.has(f));

describe('the portal\'s files', () => {
  it('holds the vendored scripts as the packages installed make them', async () => {
    const made = (await vendored()) as Record<string, string>;
    for (const [name, text] of Object.entries(made)) expect(readFileSync(path.join(DIR, name), 'utf8'), name).toBe(text);
  });

  it('weighs at most 150 KB gzipped, script and style together', () => {
    const gzipped = files.filter((f) => /\.(js|css)$/.test(f)).reduce((sum, f) => sum + gzipSync(readFileSync(path.join(DIR, f)), { level: 9 }).length, 0);
    expect(gzipped).toBeGreaterThan(20_000); // the pages are there
    expect(gzipped).toBeLessThanOrEqual(150 * 1024);
  });

  it('never writes markup from a string in its own scripts', () => {
    for (const f of own) {
      const source = readFileSync(path.join(DIR, f), 'utf8');
      expect(source, f).not.toMatch(/\.(innerHTML|outerHTML)\s*=|insertAdjacentHTML|document\.write|createContextualFragment|DOMParser/);
      expect(source, f).not.toMatch(/\beval\(|new Function\(/);
    }
    const html = readFileSync(path.join(DIR, 'index.html'), 'utf8');
    // The CSP allows no inline script or style: the page has none.
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>|<style|\sstyle=|\son[a-z]+=/i);
  });

  it('has every text in French and in English, and every key a page uses', () => {
    expect(Object.keys(TEXTS.en).sort()).toEqual(Object.keys(TEXTS.fr).sort());
    const used = new Set(own.flatMap((f) => [...readFileSync(path.join(DIR, f), 'utf8').matchAll(/\bt\('([a-zA-Z]+\.[a-zA-Z.]+)'/g)].map((m) => m[1]!)));
    expect([...used].filter((k) => !(k in TEXTS.fr))).toEqual([]);
    for (const [k, fr] of Object.entries(TEXTS.fr)) {
      const names = (s: string) => [...s.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();
      expect(names(TEXTS.en[k]!), k).toEqual(names(fr));
    }
  });
});
