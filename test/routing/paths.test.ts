// Unit tests of src/routing/paths.ts, the functions every route decision and every forwarded path
// goes through. The threat each case names: a path the gateway matches as one route while an
// upstream serves it as another. End to end, the same spellings are in routing.security.test.ts
// (unicodeFolded's whole class, found by scanning: caseFolds.test.ts and caseFolds.security.test.ts).
import { describe, expect, it } from 'vitest';
import { canonicalUrl, matchKey, matchKeys, normalizePath, unicodeFolded } from '../../src/routing/paths.js';

describe('normalizePath', () => {
  it.each([
    ['/'],
    ['/races/premium'],
    ['/races/premium/'],
    // Escapes of reserved or non-ASCII characters name other resources than the bare character.
    ['/a%20b'],
    ['/%C3%A9t%C3%A9'],
    ['/a%3Db'], // not an encoded `?` (refused below)
    ['/files/100%25'], // a literal "%": any %25 but those of a separator, NUL or dot segment
    ['/a%252Eb'], // a dot inside a segment, encoded twice: no dot segment however often decoded
    // Not decodable, or no escape at all: left to the upstream, as it was sent.
    ['/%zz'],
    ['/%'],
    // Segment parameters and case are kept: the upstream receives the path as written (matchKey folds them for matching only).
    ['/Races;jsessionid=1/Premium'],
    // Characters a URL parser would escape: the upstream receives them as sent.
    ['/a{b}'],
    ['/x/"q"'],
  ])('leaves %s as it is', (path) => {
    expect(normalizePath(path)).toBe(path);
  });

  it.each([
    ['dot segments', '/public/../paid', '/paid'],
    ['dot segments', '/public/./paid', '/public/paid'],
    ['dot segments', '/a/b/../../paid', '/paid'],
    ['dot segments', '/a/.', '/a/'],
    ['dot segments', '/a/..', '/'],
    // Above the root is the root, as for every URL parser.
    ['dot segments', '/..', '/'],
    ['dot segments', '/../../paid', '/paid'],
    ['encoded dot segments', '/public/%2e%2e/paid', '/paid'],
    ['encoded dot segments', '/public/%2E%2E/paid', '/paid'],
    ['encoded dot segments', '/public/.%2e/paid', '/paid'],
    ['encoded dot segments', '/public/%2e./paid', '/paid'],
    ['encoded dot segments', '/public/%2e/paid', '/public/paid'],
    ['doubled slashes', '//paid', '/paid'],
    ['doubled slashes', '/public//paid', '/public/paid'],
    ['doubled slashes', '/a///b//', '/a/b/'],
    // Folded before the dots are resolved, so `//..` cannot climb one segment less than it seems.
    ['doubled slashes', '/public//..//paid', '/paid'],
    // Escapes of unreserved characters (RFC 3986 §2.3), which upstreams decode before routing.
    ['unreserved escapes', '/p%61id', '/paid'],
    ['unreserved escapes', '/%50aid', '/Paid'],
    ['unreserved escapes', '/%7Euser', '/~user'],
    ['unreserved escapes', '/a%2Db%5Fc%2Ed', '/a-b_c.d'],
    ['unreserved escapes', '/race%73/premium', '/races/premium'],
    // Three dots are no dot segment, however often decoded: `..%252e` is `...` after two decodings.
    ['unreserved escapes', '/x/%2e%2e%252e/y', '/x/..%252e/y'],
    // A malformed escape is no UTF-8 lead byte, even beside a continuation byte: left as sent.
    ['malformed escapes', '/x%dz%80', '/x%dz%80'],
  ])('resolves %s: %s is %s', (_what, path, normalized) => {
    expect(normalizePath(path)).toBe(normalized);
  });

  it.each([
    // An encoded slash or backslash is a separator to an upstream that decodes before splitting.
    ['/public%2F..%2Fpaid'],
    ['/public%2fpaid'],
    ['/public%5Cpaid'],
    ['/public%5c..%5cpaid'],
    // A backslash is a separator to IIS, ASP.NET and many URL parsers.
    ['/public\\..\\paid'],
    // `..;` is `..` to servlet containers, which drop `;parameters` before resolving dots.
    ['/public/..;/paid'],
    ['/public/..;x=1/paid'],
    ['/public/.;/paid'],
    ['/public/%2e%2e;/paid'],
    // A `#` cuts the path for the proxy's URL parser, after matching (RFC 9112 §3.2: no fragment in a request target).
    ['/races/premium#'],
    ['/races/x#/../premium'],
    // CONTRACT §19: `;` and NUL encoded, and the four encoded twice, for upstreams that decode twice.
    ['/api/v1/profile%3b'],
    ['/api/v1/profile%3B/x'],
    ['/api/v1/reports%00/x'],
    ['/a%252Fb'],
    ['/a%252fb'],
    ['/a%255cb'],
    ['/a%253Bx'],
    ['/a%2500'],
    // Other encoded control characters, and encoded white space that a trimming upstream drops.
    ['/admin%0a'],
    ['/admin%7F'],
    ['/admin%20'],
    ['/admin%09'],
    ['/admin%20/x'],
    ['/admin%20%20'],
    // A dot segment encoded twice, `..` to an upstream that decodes twice.
    ['/public/%252e%252e/admin'],
    ['/public/%252E./admin'],
    ['/public/%252e'],
    // Characters NFKC folds into a separator or a dot: fullwidth solidus, reverse solidus,
    // semicolon and full stop, small full stops, encoded as UTF-8 or raw.
    ['/public%EF%BC%8Fadmin'],
    ['/public%ef%bc%bcadmin'],
    ['/public%EF%BC%9Bx'],
    ['/public/%EF%BC%8E%EF%BC%8E/admin'],
    ['/public/\ufe52\ufe52/admin'],
    ['/public/\uff0e\uff0e/admin'],
    // … also after a run of escapes that is not UTF-8 (a Latin-1 path), which leaves the others read.
    ['/a%C4/b%EF%BC%8Fc'],
    // … and a byte of no character in the same run, which a lenient decoder reads as U+FFFD.
    ['/a%C4%EF%BC%8Fc'],
    ['/a%EF%BC%8F%FF'],
    // A segment ending in dots, which Windows, IIS and ASP.NET read without them.
    ['/api/v1/reports./x'],
    ['/api/v1/reports../x'],
    ['/api/v1/reports%2e/x'],
    ['/api/v1/reports.%2E/x'],
    ['/api/v1/reports.'],
    ['/api/v1/.../x'],
    ['/x/../reports./y'],
    // … also before `;params`, which a servlet container drops first (and routes are matched without).
    ['/api/v1/reports.;/x'],
    ['/api/v1/reports..;/x'],
    ['/api/v1/reports.;jsessionid=1/x'],
    ['/api/v1/Reports.;/x'],
    ['/api/v1/reports%2e;/x'],
    ['/api/v1/reports%20;/x'],
    ['/api/v1/reports%09;x/y'],
    // An encoded `#` or `?`, which an upstream decoding first reads as the end of the path (issue 68).
    ['/api/v1/profile%23'],
    ['/api/v1/profile%23x/y'],
    ['/api/v1/profile%3F'],
    ['/api/v1/profile%3fa=1'],
    ['/api/v1/profile%2523'],
    ['/api/v1/profile%253F'],
  ])('refuses %s, which an upstream could read as another path', (path) => {
    expect(normalizePath(path)).toBeUndefined();
  });

  it.each([
    ['/projects/group%2Fproject/issues', '/projects/group%2Fproject/issues'],
    ['/projects/a%252Fb', '/projects/a%252Fb'],
    ['/projects/x%3Bv=1', '/projects/x%3Bv=1'],
    // Encoded dot segments are still resolved: keeping separators never lets `..` climb unseen.
    ['/projects/%2e%2e/admin%2Fx', '/admin%2Fx'],
    ['/projects/a/../b%2Fc', '/projects/b%2Fc'],
  ])('with encodedSeparators: keep, reads %s as %s', (path, expected) => {
    expect(normalizePath(path, true)).toBe(expected);
  });

  it.each([['/p\\x%2F'], ['/p/..;/x%2F'], ['/p#%2F'], ['/p/a%23b'], ['/p/a%3fb'], ['/p/a%3F'], ['/p/a%2523'], ['/p/a%253f']])('refuses %s even where separators are kept', (path) => {
    expect(normalizePath(path, true)).toBeUndefined();
  });

  it.each([[''], ['races'], ['*'], ['http://gateway.test/races']])('refuses %j, which is not an origin-form path', (path) => {
    expect(normalizePath(path)).toBeUndefined();
  });
});

describe('canonicalUrl', () => {
  it('normalizes the path and leaves the query untouched, dots, escapes and all', () => {
    expect(canonicalUrl('/public/../paid?next=/../admin&q=%61')).toBe('/paid?next=/../admin&q=%61');
    expect(canonicalUrl('/p%61id?')).toBe('/paid?');
    expect(canonicalUrl('/public/./paid')).toBe('/public/paid');
    // The query is not the path's: an encoded slash there refuses nothing.
    expect(canonicalUrl('/public/../paid?next=%2Fadmin')).toBe('/paid?next=%2Fadmin');
  });

  it('returns the very string it was given when there is nothing to normalize', () => {
    const url = '/races/premium?q=1';
    expect(canonicalUrl(url)).toBe(url);
  });

  it('leaves a path it cannot normalize as it is, for the proxy to answer 400', () => {
    expect(canonicalUrl('/public%2F..%2Fpaid?x=1')).toBe('/public%2F..%2Fpaid?x=1');
    expect(canonicalUrl('/public/..;/paid')).toBe('/public/..;/paid');
    expect(normalizePath(canonicalUrl('/public/..;/paid'))).toBeUndefined();
  });
});

describe('matchKey', () => {
  it.each([
    // Express, ASP.NET and IIS route without regard to case.
    ['/RACES/Premium', '/races/premium'],
    // Servlet containers drop each segment's `;parameters`.
    ['/races;a=1/premium;jsessionid=2/x', '/races/premium/x'],
    ['/races/premium;', '/races/premium'],
    // A segment of parameters alone disappears, and the `//` it leaves is folded, as Tomcat does.
    ['/races/;x/premium', '/races/premium'],
    ['/races/;/premium', '/races/premium'],
    ['/;a/rw/;b/m', '/rw/m'],
    ['/Races;v=1/PREMIUM;w=2', '/races/premium'],
  ])('reads %s as %s', (path, key) => {
    expect(matchKey(path)).toBe(key);
  });

  it('folds the hex digits of escapes with the rest, which RFC 3986 §6.2.2.1 makes equivalent', () => {
    expect(matchKey('/Caf%C3%A9')).toBe('/caf%c3%a9');
  });

  it('returns the path itself when it has no capital and no `;`', () => {
    expect(matchKey('/races/premium/x')).toBe('/races/premium/x');
    expect(matchKey('/')).toBe('/');
  });
});

// A route guards every spelling that reaches its action: Rails serves `/locked.json` (and
// `/locked.json/`) as `/locked`, so the keys of a path include it without each format suffix.
describe('matchKeys', () => {
  it.each([
    ['/x/locked.tar.json', ['/x/locked.tar.json', '/x/locked.tar', '/x/locked']],
    ['/x/locked.json/', ['/x/locked.json/', '/x/locked']],
    ['/x/a.b.c/', ['/x/a.b.c/', '/x/a.b', '/x/a']],
    ['/X/Locked.JSON', ['/x/locked.json', '/x/locked']],
    // Only the last segment is cut, never at its first character.
    ['/a.b/c', ['/a.b/c']],
    ['/.well-known', ['/.well-known']],
    ['/x/.json', ['/x/.json']],
    ['/.json', ['/.json']],
    ['/', ['/']],
  ])('%s is read as %j', (path, keys) => {
    expect(matchKeys(path)).toEqual(keys);
  });
});

// How an upstream that folds Unicode reads a path (CONTRACT §19, §26); the caller refuses the path
// when that reading is routed elsewhere than the path as sent.
describe('unicodeFolded', () => {
  it.each([
    ['/api/v1/profile'],
    ['/API/V1/%41%7e'], // ASCII, escapes of ASCII included: nothing to fold
    ['/caf%C3%A9'], // é folds to no ASCII
    ['/caf\u00e9'],
    ['/%D0%BF%D1%80%D0%BE%D1%84%D0%B8%D0%BB%D1%8C'], // Cyrillic: no ASCII in any case
    ['/%C5%81ukasz'], // Ł is case-mapped, but to ł, not ASCII
    ['/\u0141ukasz'],
    ['/%C4'], // a byte of no character
    ['/x%dz%80'], // a malformed escape beside a continuation byte
    ['/%E4%B8%AD%E6%96%87'], // CJK: one decoding, nothing that folds
    ['/%C2%BC'], // ¼ is 1⁄4 under NFKC: ASCII around a fraction slash is not ASCII
    ['/%C2%A8'], // ¨ is a space and a combining diaeresis under NFKC
  ])('reads %s as it is sent (undefined)', (path) => {
    expect(unicodeFolded(path)).toBeUndefined();
  });

  it.each([
    ['/api/v1/prof%C4%B1le', '/api/v1/profile'], // Turkish dotless ı, encoded
    ['/api/v1/prof%c4%b1le', '/api/v1/profile'], // … in lower-case hex
    ['/api/v1/prof\u0131le', '/api/v1/profile'], // … raw
    ['/api/v1/b%C4%B0ll%C4%B1ng', '/api/v1/billing'], // İ and ı in one run of escapes
    ['/API/%E2%84%AAEYS', '/API/kEYS'], // Kelvin sign: k; the ASCII around it as sent
    ['/api/\uff52eports', '/api/reports'], // fullwidth ｒ (NFKC)
    ['/a/%EF%AC%81le', '/a/file'], // the ﬁ ligature
    ['/gro%C3%9Fe', '/grosse'], // ß upper-cases to SS
    ['/gro%E1%BA%9Ee', '/grosse'], // capital ẞ: lower-cased to ß, then upper-cased to SS
    // Bytes that are no UTF-8 character (overlong, a surrogate, a 4-byte lead without its
    // continuation) stay as sent, and the characters after them are read.
    ['/a%E0%80%80%C4%B1', '/a%E0%80%80i'],
    ['/a%ED%A0%80%C4%B1', '/a%ED%A0%80i'],
    ['/a%F0%80%80%80%C4%B1', '/a%F0%80%80%80i'],
    ['/a%F1%C4%B1%80', '/a%F1i%80'],
    ['/api/v1/%F0%9D%90%A9rofile', '/api/v1/profile'], // mathematical bold 𝐩, beyond the BMP
    ['/x%C3%A9/prof%C4%B1le', '/x%C3%A9/profile'], // é stays as sent, ı is read
    ['/api/v1/bI%CC%87lling', '/api/v1/billing'], // I + combining dot above, Turkish lower case
    ['/api/v1/bi\u0307lling', '/api/v1/billing'], // i + combining dot above, Lithuanian upper case
    ['/api/v1/bj%cc%87', '/api/v1/bj'],
    ['/api/v1/profile%EF%BC%9Fx', '/api/v1/profile'], // fullwidth ？ starts a query once folded
    ['/api/v1/b%C4%B1lling%E3%80%80', '/api/v1/billing%20'], // ideographic space: a space, kept encoded
  ])('reads %s as %s', (path, folded) => {
    expect(unicodeFolded(path)).toBe(folded);
    // A character's reading is kept once computed: the second reading is the same.
    expect(unicodeFolded(path)).toBe(folded);
  });
});
