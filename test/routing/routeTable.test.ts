// Unit tests of RouteTable.match (src/routing/routeTable.ts): which route a normalized path is
// guarded by, and the path its upstream is asked for. The threat: a path matched by a public
// route on a shorter prefix while the upstream serves it as a guarded one. Routes come from the
// real schema (configSchema.parse), as gateway.yaml gives them. End to end: routing.*.test.ts.
import { describe, expect, it } from 'vitest';
import { configSchema } from '../../src/config/schema.js';
import { matchKeys } from '../../src/routing/paths.js';
import { RouteTable, type CompiledRoute, type Match } from '../../src/routing/routeTable.js';

const ALL_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

function table(routes: Array<Record<string, unknown>>): RouteTable {
  return new RouteTable(configSchema.parse({ upstreams: { app: { url: 'http://app.test' } }, routes: routes.map((r) => ({ upstream: 'app', auth: 'none', ...r })) }));
}

/** What a match says, in short: the route's path and the upstream path, or the kind alone. */
function outcome(match: Match): [string, string?] | 'none' | ['method-not-allowed', string] {
  if (match.kind === 'none') return 'none';
  if (match.kind === 'method-not-allowed') return ['method-not-allowed', match.route.path];
  return [match.route.path, match.upstreamPath];
}

describe('RouteTable.match', () => {
  const routes = table([
    { path: '/races', methods: ['GET', 'POST'] },
    { path: '/races/premium', auth: 'required', plans: ['premium', 'pro'] },
    { path: '/api/v1' },
  ]);

  describe('longest prefix, on segment boundaries', () => {
    it.each([
      ['/races', '/races'],
      ['/races/', '/races'],
      ['/races/2024/paris', '/races'],
      ['/races/premium', '/races/premium'],
      ['/races/premium/', '/races/premium'],
      ['/races/premium/2024', '/races/premium'],
      // Not under /races/premium: the shorter /races takes it.
      ['/races/premiumX', '/races'],
      ['/races/premium-2024', '/races'],
      ['/api/v1/users', '/api/v1'],
    ])('%s is matched by %s', (path, route) => {
      expect(outcome(routes.match('GET', path))).toEqual([route, path]);
    });

    it.each([['/racesX'], ['/race'], ['/api'], ['/api/v2/users'], ['/'], ['/nowhere/races']])('%s matches no route', (path) => {
      expect(routes.match('GET', path)).toEqual({ kind: 'none' });
    });

    // The table looks a path's keys up (its own and its parents'); this is the rule it must keep,
    // as a scan of every route, longest path first, tried on random tables and paths.
    it('finds the route a scan of every route finds, on random tables and paths', () => {
      const segments = ['a', 'b', 'ab', 'A', 'Ab', 'x.json', 'x', 'v1', 'v1.2'];
      let seed = 7;
      const random = (n: number) => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
      const randomPath = (depth: number) => '/' + Array.from({ length: depth }, () => segments[random(segments.length)]).join('/');
      const scan = (all: readonly CompiledRoute[], key: string) =>
        all.find((r) => r.key === '/' || key === r.key || (key.startsWith(r.key) && key.charCodeAt(r.key.length) === 0x2f));
      let compared = 0;
      for (let t = 0; t < 200; t++) {
        const paths = new Map<string, string>(); // one route per key, as the schema requires
        for (let i = random(12); i >= 0; i--) {
          const path = random(10) === 0 ? '/' : randomPath(1 + random(3));
          paths.set(path.toLowerCase(), path);
        }
        const routes = table([...paths.values()].map((path) => ({ path })));
        for (let i = 0; i < 50; i++) {
          const path = randomPath(1 + random(5)) + (random(4) === 0 ? '/' : '');
          const [key, ...withoutSuffix] = matchKeys(path);
          let expected = scan(routes.all, key!);
          for (const shorter of withoutSuffix) {
            const found = scan(routes.all, shorter);
            if (found && found.key === shorter && (!expected || found.key.length > expected.key.length)) expected = found;
          }
          const match = routes.match('GET', path);
          expect(match.kind === 'none' ? undefined : match.route.path, `${path} in ${[...paths.values()].join(' ')}`).toBe(expected?.path);
          if (expected) compared++;
        }
      }
      expect(compared).toBeGreaterThan(2000);
    });

    it('tries routes from the longest path to the shortest, whatever their order in the config', () => {
      const reversed = table([{ path: '/a' }, { path: '/a/b/c' }, { path: '/a/b' }]);
      expect(reversed.all.map((r) => r.path)).toEqual(['/a/b/c', '/a/b', '/a']);
      expect(outcome(reversed.match('GET', '/a/b/c/d'))).toEqual(['/a/b/c', '/a/b/c/d']);
      expect(outcome(reversed.match('GET', '/a/b/x'))).toEqual(['/a/b', '/a/b/x']);
    });
  });

  describe('spellings an upstream reads as the same path', () => {
    it.each([
      // Case-insensitive upstreams (Express, ASP.NET, IIS).
      ['/RACES/PREMIUM/x'],
      ['/Races/Premium'],
      // Servlet containers drop `;parameters`, and a segment of them alone.
      ['/races;a=1/premium;jsessionid=2/x'],
      ['/races/premium;x'],
      ['/races/;x/premium/y'],
    ])('%s is guarded by /races/premium, and forwarded as written', (path) => {
      expect(outcome(routes.match('GET', path))).toEqual(['/races/premium', path]);
    });

    it('matches a route declared with capitals on any spelling', () => {
      const docs = table([{ path: '/Docs' }]);
      expect(outcome(docs.match('GET', '/docs/x'))).toEqual(['/Docs', '/docs/x']);
      expect(outcome(docs.match('GET', '/DOCS'))).toEqual(['/Docs', '/DOCS']);
    });
  });

  describe('methods', () => {
    it('takes the declared methods, and HEAD with GET, as every HTTP server reads it', () => {
      for (const method of ['GET', 'HEAD', 'POST']) expect(outcome(routes.match(method, '/races/x')), method).toEqual(['/races', '/races/x']);
    });

    it('lists the declared methods, then HEAD, for the Allow header of a 405', () => {
      const match = routes.match('DELETE', '/races');
      expect(match.kind === 'method-not-allowed' && [...match.route.allowedMethods]).toEqual(['GET', 'POST', 'HEAD']);
    });

    it.each([['DELETE'], ['PUT'], ['TRACE'], ['PROPFIND']])('answers %s on a GET/POST route with method-not-allowed, naming the route', (method) => {
      expect(outcome(routes.match(method, '/races/x'))).toEqual(['method-not-allowed', '/races']);
    });

    it('gives HEAD only to routes that take GET', () => {
      const postOnly = table([{ path: '/submit', methods: ['post'] }]);
      expect(outcome(postOnly.match('POST', '/submit'))).toEqual(['/submit', '/submit']);
      for (const method of ['GET', 'HEAD']) expect(outcome(postOnly.match(method, '/submit')), method).toEqual(['method-not-allowed', '/submit']);
    });

    it('takes the seven proxied methods on a route without `methods`, and never TRACE, CONNECT or WebDAV\'s', () => {
      for (const method of ALL_METHODS) expect(outcome(routes.match(method, '/api/v1/x')), method).toEqual(['/api/v1', '/api/v1/x']);
      for (const method of ['TRACE', 'CONNECT', 'PROPFIND', 'MKCOL', 'PURGE']) expect(outcome(routes.match(method, '/api/v1/x')), method).toEqual(['method-not-allowed', '/api/v1']);
    });

    it('decides the method on the longest matching route alone, not on a shorter one that would take it', () => {
      // DELETE is allowed on /api/v1 but not on /api/v1/reports: no fall-through to the shorter route.
      const nested = table([{ path: '/api/v1' }, { path: '/api/v1/reports', methods: ['GET'] }]);
      expect(outcome(nested.match('DELETE', '/api/v1/reports/7'))).toEqual(['method-not-allowed', '/api/v1/reports']);
    });
  });

  describe('rewritePrefix', () => {
    const rewriting = table([
      { path: '/rw', rewritePrefix: '/inner/v2' },
      { path: '/shop/cart', rewritePrefix: '/cart' },
      { path: '/strip', rewritePrefix: '' },
      { path: '/slash', rewritePrefix: '/inner/' },
    ]);

    it.each([
      ['/rw', '/inner/v2'],
      ['/rw/', '/inner/v2/'],
      ['/rw/a/b', '/inner/v2/a/b'],
      ['/shop/cart/items/3', '/cart/items/3'],
      ['/strip', '/'],
      ['/strip/a', '/a'],
      // A trailing slash on the prefix does not double the separator.
      ['/slash/a', '/inner/a'],
      // The prefix is replaced however the client wrote it.
      ['/RW/a', '/inner/v2/a'],
      ['/Rw;v=2', '/inner/v2'],
      ['/RW;v=2/m/page', '/inner/v2/m/page'],
      ['/Shop;s=1/CART;c=2/items', '/cart/items'],
      // Parameter-only segments inside the prefix count as nothing; after it they are the upstream's.
      ['/;a/rw/;b/m', '/inner/v2/;b/m'],
      ['/shop/;x/cart/;y/items', '/cart/;y/items'],
    ])('%s goes to the upstream as %s', (path, upstreamPath) => {
      expect(rewriting.match('GET', path)).toMatchObject({ kind: 'route', upstreamPath });
    });

    it('keeps the case and parameters of what follows the prefix', () => {
      expect(rewriting.match('GET', '/RW/Items;v=1/A')).toMatchObject({ kind: 'route', upstreamPath: '/inner/v2/Items;v=1/A' });
    });
  });

  describe('a `/` route', () => {
    const root = table([{ path: '/' }, { path: '/api', rewritePrefix: '/v1' }]);

    it('takes every path that no longer route takes, itself included', () => {
      for (const path of ['/', '/x', '/apix', '/API2/y']) expect(outcome(root.match('GET', path)), path).toEqual(['/', path]);
      expect(outcome(root.match('GET', '/api/users'))).toEqual(['/api', '/v1/users']);
      expect(outcome(root.match('GET', '/API;x/users'))).toEqual(['/api', '/v1/users']);
    });

    it('puts its rewritePrefix in front of the whole path', () => {
      const based = table([{ path: '/', rewritePrefix: '/base' }]);
      expect(based.match('GET', '/')).toMatchObject({ upstreamPath: '/base/' });
      expect(based.match('GET', '/x/Y;p')).toMatchObject({ upstreamPath: '/base/x/Y;p' });
    });
  });
});
