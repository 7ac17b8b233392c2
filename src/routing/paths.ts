// Paths as the gateway reads them: normalized the way upstreams will understand them, and the
// key routes are matched on. Pure functions, on the security boundary: every route decision and
// every forwarded path goes through them (unit tests in test/routing/paths.test.ts).
import { LRUCache } from 'lru-cache';

// Upstreams disagree on what names the same resource, and a route must guard every spelling any
// of them serves, or a public route on a shorter prefix lets the spelling through unguarded:
// Express, ASP.NET and IIS route without regard to case (`/PAID` is `/paid` there), and servlet
// containers (Tomcat, Jetty, Spring) drop `;parameters` from each segment (`/paid;x/item` is
// `/paid/item` there). So routes are matched on the path with ASCII case folded and segment
// parameters removed.
const NEEDS_KEY = /[A-Z;]/;
const SEGMENT_PARAMETERS = /;[^/]*/g;

/**
 * The form of a normalized path that routes are matched on (see above). A segment of parameters
 * alone disappears, as servlet containers fold the `//` it leaves: `/races/;x/premium` is
 * `/races/premium` there.
 */
export function matchKey(path: string): string {
  return NEEDS_KEY.test(path) ? path.replace(SEGMENT_PARAMETERS, '').replace(/\/{2,}/g, '/').toLowerCase() : path;
}

/**
 * The keys a path may be read as, the most literal first: its matchKey, then that key with a format
 * suffix cut off its last segment at each dot (`/x/locked.tar.json` → `/x/locked.tar`, `/x/locked`).
 * Rails serves `/locked.json` as `/locked` (`(.:format)`), Spring's suffix matching did too: a
 * route must guard every spelling that reaches its action, or a shorter public route would take
 * `/locked.json` and hand it to the guarded action unguarded. The segment's first character is
 * never cut (`/.well-known`); a trailing slash stays where it was.
 */
export function matchKeys(path: string): string[] {
  const key = matchKey(path);
  let end = key.length;
  // Down to 0 for a path of slashes alone: charCodeAt(-1) is NaN, and lastIndexOf clamps -1 to 0.
  while (key.charCodeAt(end - 1) === 0x2f) end--;
  const start = key.lastIndexOf('/', end - 1) + 1;
  const keys = [key];
  // From the end: the trailing slashes hold no dot.
  for (let dot = key.lastIndexOf('.'); dot > start; dot = key.lastIndexOf('.', dot - 1)) keys.push(key.slice(0, dot));
  return keys;
}

// Percent-escapes of unreserved characters (RFC 3986 §2.3) name the same resource as the bare
// character, and many upstream frameworks decode them before routing: `/p%61id` is `/paid` there.
const ESCAPE = /%([0-9A-Fa-f]{2})/g;
// Tested on one character.
const UNRESERVED = /[A-Za-z0-9\-._~]/;
// Only paths that may need work go through the URL parser; the common case costs one regex test.
const MAY_NEED_WORK = /[%#\\]|\/\/|\/\.|\.(?:[/;]|$)|[\u0080-\uffff]/;
// A segment ending in dots once dot segments are resolved (`/reports./x`, `/reports../x`, `/...`):
// Windows, IIS and ASP.NET drop trailing dots from a segment, and read it as `/reports/x`. Also
// before its `;params` (`/reports.;/x`): a servlet container in front of such an upstream drops
// them, and routes are matched without them (matchKey), which leaves `reports.`.
const SEGMENT_ENDING_IN_DOT = /\.(?:[/;]|$)/;

// Spellings upstreams read differently from one another (CONTRACT §19), all refused unless the
// route says `encodedSeparators: keep`:
// - a separator or NUL, encoded once or twice: `/a%2fb` is `/a/b` to an upstream that decodes
//   before splitting, `/a%252fb` to one that decodes twice; `%3b` is a `;params` start to a servlet
//   container, `%00` the end of the path to C code; `%5c` is `/` on Windows;
// - any other encoded control character, and encoded white space ending a segment (`/admin%20`,
//   `/admin%09`), which trimming upstreams read as `/admin`;
// - a dot segment encoded twice (`/x/%252e%252e/admin`), `..` after a second decoding;
// - a character that NFKC (Unicode compatibility) folds into `/`, `\`, `;` or `.` (fullwidth
//   `／` `＼` `；` `．`, small `﹒` `﹔`…), as upstreams that normalize Unicode read it.
const ENCODED_SEPARATOR = /%(?:25)?(?:00|2f|3b|5c)/i;
const ENCODED_CONTROL = /%(?:25)?(?:[01][0-9a-f]|7f)/i;
// The last of a run of encoded spaces ends the segment: the run is refused through it.
const ENCODED_SPACE_ENDING_SEGMENT = /%(?:25)?(?:20|09)(?:[/;]|$)/i;
const DOUBLE_ENCODED_DOT = /%252e/i;
// The path starts with `/`.
const DOT_SEGMENT = /\/\.{1,2}(?:\/|$)/;
const FOLDS_TO_SEPARATOR = /[/\\;.]/;

// A `#` or `?` encoded once or twice (CONTRACT §33): an upstream that decodes the path before
// parsing it reads `/api/v1/profile%23x` as `/api/v1/profile` and a fragment, `%3F` as the query's
// start, so a public catch-all would hand it a guarded path.
const ENCODED_DELIMITER = /%(?:25)?(?:23|3f)/i;

/**
 * Whether `rawPath` (a path, without its query) holds an encoded `#` or `?` (above): refused on
 * every listener, the public one and the decisions' through normalizePath, the admin one by its
 * first hook.
 */
export function hasEncodedDelimiter(rawPath: string): boolean {
  return rawPath.includes('%') && ENCODED_DELIMITER.test(rawPath);
}

/** Whether an upstream could read `rawPath` with a separator, NUL or dot segment we do not see (above). */
function hasEncodedSeparators(rawPath: string): boolean {
  if (ENCODED_SEPARATOR.test(rawPath) || ENCODED_CONTROL.test(rawPath) || ENCODED_SPACE_ENDING_SEGMENT.test(rawPath)) return true;
  if (DOUBLE_ENCODED_DOT.test(rawPath) && DOT_SEGMENT.test(rawPath.replace(/%252e/gi, '.').replace(/%2e/gi, '.'))) return true;
  return foldsToSeparator(rawPath);
}

// A character in well-formed UTF-8, percent-encoded (RFC 3629 §4: no overlong form, no surrogate),
// which decodeURIComponent decodes without throwing.
const UTF8_ESCAPED = /%(?:c[2-9a-f]|d[0-9a-f])%[89ab][0-9a-f]|%(?:e0%[ab]|e[1-9a-cef]%[89ab]|ed%[89])[0-9a-f]%[89ab][0-9a-f]|%(?:f0%[9ab]|f[1-3]%[89ab]|f4%8)[0-9a-f]%[89ab][0-9a-f]%[89ab][0-9a-f]/gi;

/**
 * `rawPath` with each character of its percent-encoded UTF-8 decoded; bytes of no character (a
 * Latin-1 path, a broken sequence) stay as sent, and leave the characters beside them read: an
 * upstream that decodes leniently reads `%C4%EF%BC%8F` as U+FFFD and `／`.
 */
function withUtf8Decoded(rawPath: string): string {
  return rawPath.replace(UTF8_ESCAPED, (spelling) => decodeURIComponent(spelling));
}

/**
 * A non-ASCII character, sent raw or percent-encoded as UTF-8, that NFKC turns into a separator or a
 * dot: one that NFKC changes (never an ASCII one) into one holding a separator (ASCII).
 */
function foldsToSeparator(rawPath: string): boolean {
  for (const char of withUtf8Decoded(rawPath)) {
    const compatible = char.normalize('NFKC');
    if (compatible !== char && FOLDS_TO_SEPARATOR.test(compatible)) return true;
  }
  return false;
}

// How upstreams that fold Unicode read a path (CONTRACT §19 for NFKC, §26 for case): `/api/v1/ｒeports`
// is `/api/v1/reports` under NFKC (IIS's "best fit" mapping does much the same), and
// `/api/v1/prof%C4%B1le` is `/api/v1/profile` to Java's equalsIgnoreCase (dotless ı upper-cases to
// I), to String.toUpperCase, or to toLowerCase in a Turkish locale (İ is i there). Only characters
// read as ASCII matter: routes are ASCII (others percent-encoded), matched without regard to ASCII
// case. Such a character is one that NFKC or a case mapping changes, a few thousand of all
// (CHANGES_WHEN_FOLDED); each one's reading is computed once and kept ('' for none).
const LOCALES = [undefined, 'tr', 'az', 'lt'] as const;
const CHANGES_WHEN_FOLDED = /[\p{Changes_When_NFKC_Casefolded}\p{Changes_When_Casemapped}]/u;
const ASCII_ONLY = /^\p{ASCII}+$/u;
// Bounded: only characters that CHANGES_WHEN_FOLDED come here, 11,922 with Node 26's ICU.
const asciiReadings = new LRUCache<string, string>({ max: 20_000, memoMethod: asciiReading });
// Non-ASCII, raw or percent-encoded as UTF-8: what most paths do not hold.
const MAY_BE_UNICODE = /%[89a-f][0-9a-f]|[\u0080-\uffff]/i;

/**
 * Each way `text` is case-mapped, in the locales whose rules differ: lower, and lower then upper.
 * Upper alone and upper then lower add no ASCII reading to these (checked over every code point
 * that changes when folded, U+0080 to U+10FFFF, Node 26's ICU): capital ẞ needs lower then upper.
 */
function caseMappings(text: string): string[] {
  return LOCALES.flatMap((locale) => {
    const lower = text.toLocaleLowerCase(locale);
    return [lower, lower.toLocaleUpperCase(locale)];
  });
}

/** The ASCII that an upstream folding Unicode reads one character as (lower case), or '' (none). */
function asciiReading(char: string): string {
  const compatible = char.normalize('NFKC');
  const readings = [compatible, ...caseMappings(char), ...caseMappings(compatible)];
  return readings.map((read) => read.normalize('NFKC')).find((read) => ASCII_ONLY.test(read))?.toLowerCase() ?? '';
}

/** `char` (spelled `spelling` in the path) as an upstream folding Unicode reads it, in the path's form. */
function foldedCharacter(char: string, spelling: string): string {
  const reading = CHANGES_WHEN_FOLDED.test(char) ? asciiReadings.memo(char) : '';
  // White space and controls stay encoded, so that the checks of the path read them as sent encoded
  // (a segment ending in a space is refused: a trimming upstream drops it).
  return reading === '' ? spelling : reading.replace(/[\p{Cc} ]/gu, (c) => encodeURIComponent(c));
}

// Lower-casing in Turkish drops a combining dot above (U+0307) after `I`, upper-casing in Lithuanian
// drops it after `i` and `j`: `bI%CC%87lling` is `billing` there.
const DOT_ABOVE_DROPPED = /([ijI])(?:%[cC][cC]%87|\u0307)/g;

/**
 * `path` (normalized, see normalizePath) as an upstream that folds Unicode reads it: each character
 * that NFKC or a case mapping in any locale reads as ASCII replaced by that ASCII, the rest as sent,
 * and cut at a `?` that folding made (fullwidth `？`). Undefined when that changes nothing, as for
 * most paths, at the cost of one regular expression for an ASCII one. The caller refuses a path
 * whose folded form would be routed elsewhere (requestContext.ts).
 */
export function unicodeFolded(path: string): string | undefined {
  if (!MAY_BE_UNICODE.test(path)) return undefined;
  let folded = path
    // Each percent-encoded UTF-8 character folded; bytes of no character stay as sent.
    .replace(UTF8_ESCAPED, (spelling) => foldedCharacter(decodeURIComponent(spelling), spelling))
    .replace(/\P{ASCII}/gu, (char) => foldedCharacter(char, char))
    .replace(DOT_ABOVE_DROPPED, (_, letter: string) => letter.toLowerCase());
  const query = folded.indexOf('?');
  if (query !== -1) folded = folded.slice(0, query);
  return folded === path ? undefined : folded;
}

/**
 * The path as an upstream will understand it: unreserved escapes decoded, dot segments (also
 * percent-encoded) resolved and repeated slashes folded, so `/public/../paid` is matched, guarded
 * and forwarded as `/paid`, never matched as one route and served as another. Undefined when an
 * upstream could read it as another path than we do: a backslash or `#`, a `..;` segment
 * (`/public/..;/paid` is `/paid` to servlet containers), an encoded separator or one of its kin
 * (above: `/public%2F..%2Fpaid` is `/paid` to an upstream that decodes before splitting), or when
 * it is not a path at all, or a segment ends in a dot (above). With `keepSeparators` (a route's `encodedSeparators: keep`), encoded
 * separators and their kin stay in the path as sent, undecoded.
 */
export function normalizePath(rawPath: string, keepSeparators = false): string | undefined {
  if (!rawPath.startsWith('/')) return undefined;
  if (!MAY_NEED_WORK.test(rawPath)) return rawPath;
  // A `#` has no place in a request target (RFC 9112 §3.2); the proxy's URL parser would cut the
  // path there, after matching: `/races/premium#` would be matched as itself and sent as `/races/premium`.
  if (/[\\#]/.test(rawPath)) return undefined;
  // Under `encodedSeparators: keep` too: no route's path holds one.
  if (hasEncodedDelimiter(rawPath)) return undefined;
  if (!keepSeparators && hasEncodedSeparators(rawPath)) return undefined;
  const decoded = rawPath.replace(ESCAPE, (escape, hex: string) => {
    const char = String.fromCharCode(parseInt(hex, 16));
    return UNRESERVED.test(char) ? char : escape;
  });
  // A `..;` or `.;` segment (servlet containers' `..`) is no dot segment to the URL parser, and is
  // refused below: a segment ending in a dot before its `;params`. The parser cannot fail here: the
  // path starts with one `/` (a path-absolute URL against the base: no host to parse).
  const path = new URL(decoded.replace(/\/{2,}/g, '/'), 'http://gateway.invalid').pathname;
  return SEGMENT_ENDING_IN_DOT.test(path) ? undefined : path;
}

/**
 * request.url with its path normalized (query untouched), for fastify's rewriteUrl: every route,
 * the gateway's own endpoints included, is matched on the same path the proxy forwards. A path
 * that cannot be normalized is left as is; the proxy answers it 400.
 */
export function canonicalUrl(url: string): string {
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  const normalized = normalizePath(path);
  // A path already normalized gives back `url` itself (equal text).
  if (normalized === undefined) return url;
  return q === -1 ? normalized : normalized + url.slice(q);
}
