// Unit tests of the one check that refuses a path an upstream folding Unicode reads as another
// route's (CONTRACT §19 for NFKC, §26 "Case folds" for case mappings: src/live/requestContext.ts over
// src/routing/paths.ts). The threat: `/api/v1/prof%C4%B1le` (Turkish dotless ı) matched by a public
// catch-all, while Java's equalsIgnoreCase, or an upstream lower-casing in a Turkish locale, serves
// it as the guarded `/api/v1/profile`. The characters are not listed by hand: they are found by
// scanning the BMP, so the test covers the whole class, whatever the ICU version. End to end:
// test/proxy/caseFolds.security.test.ts.
import { describe, expect, it } from 'vitest';
import { configSchema } from '../../src/config/schema.js';
import type { LiveSnapshot } from '../../src/live/live.js';
import { requestContext, type RequestContext } from '../../src/live/requestContext.js';
import { RouteTable } from '../../src/routing/routeTable.js';

const LOCALES = [undefined, 'tr', 'az', 'lt'] as const;

/** Every way an upstream may change the case of `text`: lower, upper, and both in turn, in each locale. */
function caseMappings(text: string): string[] {
  return LOCALES.flatMap((locale) => {
    const lower = (s: string) => s.toLocaleLowerCase(locale);
    const upper = (s: string) => s.toLocaleUpperCase(locale);
    return [lower(text), upper(text), lower(upper(text)), upper(lower(text))];
  });
}

const ASCII_LETTERS = /^[A-Za-z]+$/;

/** The BMP's non-ASCII characters that `read` turns into ASCII letters, each with those letters (lower case). */
function scanBmp(read: (char: string) => string[]): Map<string, string> {
  const found = new Map<string, string>();
  for (let code = 0x80; code <= 0xffff; code++) {
    if (code >= 0xd800 && code <= 0xdfff) continue;
    const char = String.fromCharCode(code);
    const letters = read(char).find((s) => ASCII_LETTERS.test(s));
    if (letters) found.set(char, letters.toLowerCase());
  }
  return found;
}

const CASE_CLASS = scanBmp(caseMappings);
// NFKC's letters (fullwidth ｒ, the ﬁ ligature, ℌ, Ⓚ…), alone or then case-mapped: the same check refuses them.
const NFKC_CLASS = scanBmp((char) => [char.normalize('NFKC'), ...caseMappings(char.normalize('NFKC'))].filter(() => !CASE_CLASS.has(char)));

/**
 * ASCII letters that a combining mark after them turns into another ASCII letter under a
 * locale's rules (Turkish `I` + U+0307 lower-cases to `i`; Lithuanian `i` + U+0307 upper-cases
 * to `I`). Each mark is tried after every letter at once, in one string, as the rules read context.
 */
function scanMarkContexts(): Array<[string, string]> {
  const letters = [...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'];
  const found: Array<[string, string]> = [];
  for (let code = 0x300; code <= 0xffff; code++) {
    const mark = String.fromCharCode(code);
    if (!/\p{M}/u.test(mark)) continue;
    const text = letters.map((letter) => `${letter}${mark}`).join('/');
    const read = caseMappings(text).map((mapped) => mapped.split('/'));
    letters.forEach((letter, i) => {
      const letterRead = read.map((parts) => parts[i]!).find((s) => ASCII_LETTERS.test(s));
      if (letterRead) found.push([`${letter}${mark}`, letterRead.toLowerCase()]);
    });
  }
  return found;
}
const MARK_CONTEXTS = scanMarkContexts();

const OWN: Record<string, readonly string[]> = { '/api/v1/auth/login': ['POST'] };
const ownMethods = (path: string) => OWN[path] ?? [];

function liveWith(routes: Array<Record<string, unknown>>): LiveSnapshot {
  const config = configSchema.parse({ upstreams: { app: { url: 'http://app.test' } }, routes: routes.map((r) => ({ upstream: 'app', ...r })) });
  return { routes: new RouteTable(config) } as unknown as LiveSnapshot;
}

const context = (live: LiveSnapshot, url: string): RequestContext => requestContext(live, 'GET', url, ownMethods);
const routeOf = (c: RequestContext) => (c.match.kind === 'route' ? c.match.route.path : c.match.kind);
const encoded = (text: string) => text.replace(/\P{ASCII}+/gu, (run) => encodeURIComponent(run));

describe('paths an upstream reads as another route under case folding (CONTRACT §26)', () => {
  const images = new Set([...CASE_CLASS.values(), ...NFKC_CLASS.values(), ...MARK_CONTEXTS.map(([, image]) => image)]);
  const live = liveWith([
    { path: '/api/v1', auth: 'none' },
    { path: '/api/v1/profile' },
    { path: '/api/v1/billing' },
    { path: '/api/v1/keys' },
    { path: '/api/v1/jobs' },
    ...[...images].map((image) => ({ path: `/api/v1/guarded/${image}` })),
  ]);

  it('finds the known members of the class by scanning, not by listing them', () => {
    for (const char of ['ı', 'İ', 'ſ', '\u212a', 'ß', 'ﬀ']) expect(CASE_CLASS.has(char), char).toBe(true);
    expect(NFKC_CLASS.get('ｒ')).toBe('r');
    expect(MARK_CONTEXTS.map(([pair]) => pair)).toContain('I\u0307');
  });

  it.each([...CASE_CLASS, ...NFKC_CLASS, ...MARK_CONTEXTS])('refuses %j, read as %s, raw or percent-encoded', (spelling, image) => {
    for (const path of [`/api/v1/guarded/${spelling}`, encoded(`/api/v1/guarded/${spelling}`), encoded(`/api/v1/guarded/${spelling}`).toLowerCase()]) {
      const refused = context(live, path);
      expect(refused.path, `${path} (${image})`).toBeUndefined();
      expect(refused.match.kind).toBe('none');
    }
  });

  it.each([
    '/api/v1/prof%c4%b1le', // Turkish dotless ı, as issue 45 sent it
    '/api/v1/b%C4%B1ll%C4%B1ng',
    '/api/v1/b%C4%B0ll%C4%B1ng', // İ and ı in one path: Java folds each character on its own
    '/api/v1/prof%C4%B1le/x?y=1',
    '/API/V1/%E2%84%AAEYS', // Kelvin sign, upper case all around
    '/api/v1/%E2%84%AAeys.json', // … with a format suffix (CONTRACT §8)
    '/api/v1/bI%CC%87lling', // I + combining dot above: `billing` lower-cased in Turkish
    '/api/v1/bi%CC%87lling', // i + combining dot above: `BILLING` upper-cased in Lithuanian
    '/api/v1/%EF%BD%90rof%C4%B1le', // fullwidth ｐ (NFKC) and ı (case) together
    '/api/v1/%F0%9D%90%A9rofile', // mathematical bold 𝐩, beyond the BMP
    '/api/v1/profile%EF%BC%9Fx', // fullwidth ？, a query's start once folded
    '/api/v1/b%C4%B1lling%E3%80%80', // … ending in an ideographic space, which a trimming upstream drops
  ])('refuses %s', (path) => {
    expect(context(live, path).path).toBeUndefined();
  });

  it('refuses a spelling of an own endpoint (CONTRACT §8), which no route may take', () => {
    expect(context(live, '/api/v1/auth/log%C4%B1n').path).toBeUndefined();
    expect(context(live, '/api/v1/auth/LOG%C4%B0N').path).toBeUndefined();
  });

  it.each([
    ['/api/v1/caf%C3%A9', '/api/v1'], // no folding to another route: served unchanged
    ['/api/v1/%C3%89t%C3%A9', '/api/v1'],
    ['/api/v1/other/prof%C4%B1le', '/api/v1'], // folds, but to the route it matched as received
    ['/api/v1/profile/%C4%B1', '/api/v1/profile'],
    ['/api/v1/%D0%BF%D1%80%D0%BE%D1%84%D0%B8%D0%BB%D1%8C', '/api/v1'], // Cyrillic: no ASCII in any case
    ['/api/v1/%C5%81ukasz', '/api/v1'],
  ])('serves %s unchanged under %s', (path, route) => {
    const served = context(live, path);
    expect(served.path).toBe(path);
    expect(routeOf(served)).toBe(route);
  });

  it('leaves routes spelled with non-ASCII letters to their own spelling', () => {
    const cafe = liveWith([{ path: '/', auth: 'none' }, { path: '/caf%C3%A9' }]);
    expect(routeOf(context(cafe, '/caf%C3%A9/x'))).toBe('/caf%C3%A9');
    expect(routeOf(context(cafe, '/caf%c3%a9'))).toBe('/caf%C3%A9');
  });

  it('refuses a fold into another route under a route that keeps encoded separators (CONTRACT §19)', () => {
    const projects = liveWith([{ path: '/projects', auth: 'none', encodedSeparators: 'keep' }, { path: '/projects/secret' }]);
    expect(context(projects, '/projects/a%2Fb').path).toBe('/projects/a%2Fb');
    expect(context(projects, '/projects/%C5%BFecret/a%2Fb').path).toBeUndefined();
    expect(context(projects, '/projects/%C5%BFecret').path).toBeUndefined();
  });
});
