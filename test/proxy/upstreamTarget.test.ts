// Unit tests of upstreamTarget (src/proxy/relay.ts): the origin and path a route's upstream is asked
// for. Most paths take a shortcut around the URL parser; the upstream must receive exactly what the
// parser would have made of them (as @fastify/reply-from built it before), and a path no request
// can carry must be refused, not sent in some other form.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { upstreamTarget } from '../../src/proxy/relay.js';
import { fuzzRuns } from '../helpers/fuzz.js';

/** What @fastify/reply-from made of `base + path` (its buildURL), the reference the shortcut must equal. */
function parsed(base: string, path: string): { origin: string; path: string } | undefined {
  const source = base + path;
  try {
    const decoded = decodeURIComponent(source);
    if (decoded.includes('/..') || decoded.includes('../')) return undefined;
    const url = new URL(source);
    return { origin: url.origin, path: url.pathname };
  } catch {
    return undefined;
  }
}

describe('upstreamTarget', () => {
  it.each([
    ['http://127.0.0.1:3000', '/items/1', 'http://127.0.0.1:3000', '/items/1'],
    ['http://127.0.0.1:3000/api', '/items/1', 'http://127.0.0.1:3000', '/api/items/1'],
    ['https://svc.internal', '/', 'https://svc.internal', '/'],
    // What the URL parser escapes, the upstream receives escaped.
    ['http://127.0.0.1:3000', '/a b/"x"/{y}', 'http://127.0.0.1:3000', '/a%20b/%22x%22/%7By%7D'],
    ['http://127.0.0.1:3000', '/été', 'http://127.0.0.1:3000', '/%C3%A9t%C3%A9'],
    // A base the parser writes otherwise (default port, upper case) is asked for in its form.
    ['http://LOCALHOST:80/Base', '/x', 'http://localhost', '/Base/x'],
  ])('asks %s for %s as %s %s', (base, path, origin, upstreamPath) => {
    expect(upstreamTarget(base, path)).toEqual({ origin, path: upstreamPath });
  });

  it.each([
    ['malformed percent-encoding', '/x/%zz'],
    ['a truncated escape', '/x/%E0%A4%A'],
    ['`..` at a segment start once decoded', '/x/%2e%2e'],
    ['`..` at a segment start', '/x/..y'],
  ])('refuses %s (%s)', (_why, path) => {
    expect(upstreamTarget('http://127.0.0.1:3000', path)).toBeUndefined();
  });

  it('gives what the URL parser gives, for any path and base', () => {
    const char = fc.constantFrom(...'aZ09-._~!$&\'()*+,;=:@/%2e%2Fé "<>{}|^`[]\\?#'.split(''), '%41', '%2e', '%zz', '..');
    const path = fc.array(char, { maxLength: 24 }).map((parts) => `/${parts.join('')}`);
    const base = fc.constantFrom('http://127.0.0.1:3000', 'http://127.0.0.1:3000/api', 'https://svc.example/a/b', 'http://HOST.example:80');
    fc.assert(fc.property(base, path, (b, p) => {
      expect(upstreamTarget(b, p)).toEqual(parsed(b, p));
    }), fuzzRuns(5000));
  });

  it('keeps a plain path\'s target: the same answer again, and the right one after the kept ones are started again', () => {
    const base = 'http://127.0.0.1:3000/api';
    const first = upstreamTarget(base, '/kept/1');
    expect(first).toEqual({ origin: 'http://127.0.0.1:3000', path: '/api/kept/1' });
    expect(upstreamTarget(base, '/kept/1')).toBe(first);
    for (let i = 0; i <= 10_000; i++) expect(upstreamTarget(base, `/many/${i}`)?.path).toBe(`/api/many/${i}`);
    expect(upstreamTarget(base, '/kept/1')).toEqual(first);
  });
});
