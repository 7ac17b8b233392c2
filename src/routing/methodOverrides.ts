// Method overrides: a request whose upstream runs it as another method than its request line's.
// The route's `methods` must hold for that method too (pipeline.ts), or they would restrict nothing.
import type { IncomingHttpHeaders } from 'node:http';

// Headers by which frameworks let a request run as another method than its request line's:
// Symfony and Laravel read X-HTTP-Method-Override, Express's method-override too, ASP.NET and
// OData X-HTTP-Method. With `_` read as `-`, as for identity headers (CONTRACT §3).
const METHOD_OVERRIDE_HEADERS = new Set(['x-http-method-override', 'x-http-method', 'x-method-override']);

/**
 * The methods a request asks the upstream to run instead of its own (METHOD_OVERRIDE_HEADERS, and
 * the `_method` query parameter of Laravel, Symfony and Express's method-override), upper-cased.
 */
export function overridingMethods(headers: IncomingHttpHeaders, query: string | undefined): readonly string[] {
  // Nearly every request overrides nothing: no array is made for it (this runs on every proxied request).
  let found: string[] | undefined;
  for (const name in headers) {
    if (name.charCodeAt(0) !== 0x78 || !METHOD_OVERRIDE_HEADERS.has(name.replace(/_/g, '-'))) continue;
    (found ??= []).push(...String(headers[name]).split(','));
  }
  // `%5Fmethod` is `_method` once decoded, and PHP reads `.method` or ` method` as `_method` too.
  if (query && /method|%/i.test(query)) {
    for (const [key, value] of new URLSearchParams(query)) {
      if (key.replace(/[. []/g, '_') === '_method') (found ??= []).push(value);
    }
  }
  return found ? found.map((method) => method.trim().toUpperCase()).filter(Boolean) : NONE;
}

const NONE: readonly string[] = [];
