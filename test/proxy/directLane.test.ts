// Issue 77: plain proxied requests skip fastify (src/proxy/directLane.ts). The same requests, sent
// through one gateway with the lane off (the seam's `off`: fastify's request, reply and hooks, as
// before) and on, must give the upstream the same request line, header lines and body, and the
// client the same status, header lines and bytes; and the lane must have forwarded the ones it
// takes (`taken`), and handed the rest to fastify. Request ids are fresh each time: compared as
// where they appear.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { directLane } from '../../src/proxy/directLane.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { exchange, type Exchange } from '../helpers/exchange.js';
import { closeSql, describeWithServices, loggedLines, makeUser, marker, startTestGateway, testConfig, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { refusedPort } from '../helpers/ports.js';

const APP = 'https://app.example.test';

describeWithServices('the direct lane against fastify\'s path (differential)', () => {
  let upstream: EchoUpstream;
  let gw: TestGateway;
  let behindProxy: TestGateway;
  let user: TestUser;
  let pro: TestUser;

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    // An answer with what the answer rules act on: its own request id, CORS fields, hop-by-hop headers, repeated Set-Cookie.
    upstream.handle = (req, res) => {
      if (!req.url?.includes('answer')) return false;
      res.writeHead(201, ['X-Request-Id', 'the-upstream-s-own', 'Access-Control-Allow-Origin', '*', 'Vary', 'Accept', 'Connection', 'keep-alive, x-hop', 'X-Hop', '1',
        'Set-Cookie', 'a=1', 'Set-Cookie', 'b=2', 'Content-Type', 'text/plain']);
      res.end('upstream bytes');
      return true;
    };
    const routes = [
      { path: '/open', upstream: 'app', auth: 'none' },
      { path: '/guarded', upstream: 'app', auth: 'required' },
      { path: '/premium', upstream: 'app', auth: 'required', plans: ['pro'] },
      { path: '/counted', upstream: 'app', auth: 'required', rateLimit: true, dailyLimit: true },
      { path: '/down', upstream: 'down', auth: 'none' },
    ];
    const upstreams = { app: { url: upstream.url }, down: { url: `http://127.0.0.1:${await refusedPort()}` } };
    const plans = { limits: { free: { perMinute: 1000, daily: 1000 }, pro: { perMinute: 1000, daily: 1000 } } };
    gw = await startTestGateway(testConfig({ upstreams, routes, plans, cors: { origins: [APP] } }));
    behindProxy = await startTestGateway(testConfig({ upstreams, routes, plans, server: { trustProxy: true } }));
    user = await makeUser(gw);
    pro = await makeUser(gw, { plan: 'pro' });
  });

  afterEach(() => { directLane.off = false; });

  afterAll(async () => {
    await Promise.all([gw?.close(), behindProxy?.close()]);
    await upstream?.close();
    await closeSql();
  });

  /** The same request through fastify's path, then the lane: both exchanges, and how many the lane forwarded. */
  async function both(target: TestGateway, method: string, path: (m: string) => string, headerPairs: (m: string) => string[] = () => []): Promise<[Exchange, Exchange, number]> {
    const run = async (off: boolean) => {
      directLane.off = off;
      const m = marker();
      const seen = await exchange(target, upstream, m, method, path(m), headerPairs(m));
      // The remaining uses and the seconds to the refill differ from one request to the next.
      return JSON.parse(JSON.stringify(seen).replaceAll(m, '<marker>').replace(/;r=\d+;t=\d+/g, ';r=<remaining>;t=<reset>')) as Exchange;
    };
    const fastify = await run(true);
    const taken = directLane.taken;
    const lane = await run(false);
    return [fastify, lane, directLane.taken - taken];
  }

  // What the request rules act on, without Origin (a CORS request is fastify's).
  const hostile = (m: string) => [
    'X-User-Id', '999', 'X_User_Plan', 'pro', 'x-auth-method', 'bearer', 'X-Gateway-Assertion', 'forged', 'X-Forwarded-For', '6.6.6.6',
    'X-Forwarded-Proto', 'https', 'X-Forwarded-Host', 'evil.example', 'X-Real-Ip', '6.6.6.6', 'Forwarded', 'for=6.6.6.6', 'X-Api-Key', 'nope',
    'Connection', 'keep-alive, x-named, X-User-Email', 'X-Named', 'gone', 'TE', 'trailers', 'X-Request-Id', `client-${m}`,
    'Accept', 'a', 'Accept', 'b', 'X-Custom', m, 'Cookie', 'theme=dark',
  ];

  describe('forwarded by the lane, as fastify forwarded them', () => {
    it('an anonymous GET on a route CORS covers: the same request upstream, the same answer (Vary: Origin)', async () => {
      const [fastify, lane, taken] = await both(gw, 'GET', (m) => `/open/${m}?q=1&q=2`, hostile);
      expect(fastify.status).toBe(200);
      expect(fastify.rawHeaders).toContain('Origin');
      expect(lane).toEqual(fastify);
      expect(taken).toBe(1);
    });

    it('a bearer token in the header, the cookie and the query: identity headers and stripped copies alike', async () => {
      const withToken = (m: string) => [...hostile(m), 'Authorization', `Bearer ${user.access}`, 'Cookie', `session=${user.access}`];
      const [fastify, lane, taken] = await both(gw, 'GET', (m) => `/guarded/${m}?access_token=${user.access}&x=1`, withToken);
      expect(fastify.upstream?.rawHeaders).toContain(String(user.id));
      expect(lane).toEqual(fastify);
      expect(taken).toBe(1);
    });

    it('a counted route (decided after a count in storage), answered with what the answer rules act on', async () => {
      const [fastify, lane, taken] = await both(gw, 'GET', (m) => `/counted/${m}/answer`, (m) => [...hostile(m), 'Authorization', `Bearer ${user.access}`]);
      expect(fastify.status).toBe(201);
      expect(fastify.rawHeaders.map((h) => h.toLowerCase())).toContain('ratelimit-policy');
      expect(lane).toEqual(fastify);
      expect(taken).toBe(1);
    });

    it('HEAD, and a DELETE with an empty body', async () => {
      for (const [method, headers] of [['HEAD', []], ['DELETE', ['Content-Length', '0']]] as const) {
        const [fastify, lane, taken] = await both(gw, method, (m) => `/open/${m}`, () => [...headers]);
        expect(fastify.upstream?.method).toBe(method);
        expect(lane).toEqual(fastify);
        expect(taken).toBe(1);
      }
    });

    it('behind a trusted proxy: X-Forwarded-For extended, -Proto and -Host as the proxy sent them', async () => {
      const [fastify, lane, taken] = await both(behindProxy, 'GET', (m) => `/open/${m}/answer`, hostile);
      expect(fastify.upstream?.rawHeaders).toContain('evil.example');
      expect(lane).toEqual(fastify);
      expect(taken).toBe(1);
    });

    it('an upstream that does not answer: the catalog\'s 502, the same bytes, counted in the metrics both ways', async () => {
      const answered = () => gw.services.metrics.tallies.routes.get('/down')?.answered.get('GET')?.get(502) ?? 0;
      const before = answered();
      const [fastify, lane, taken] = await both(gw, 'GET', (m) => `/down/${m}`);
      expect(fastify.status).toBe(502);
      expect(lane).toEqual(fastify);
      expect(taken).toBe(1);
      expect(answered() - before).toBe(2);
    });

    it('counts each answer in the route\'s metrics and writes the access line with the request id, the token censored', async () => {
      const answered = () => gw.services.metrics.tallies.routes.get('/guarded')?.answered.get('GET')?.get(200) ?? 0;
      const before = answered();
      const [, lane] = await both(gw, 'GET', (m) => `/guarded/${m}?access_token=${user.access}`, () => ['Authorization', `Bearer ${user.access}`]);
      expect(answered() - before).toBe(2);
      const id = lane.upstream!.rawHeaders[lane.upstream!.rawHeaders.indexOf('<request id>') - 1];
      expect(id?.toLowerCase()).toBe('x-request-id');
      const line = loggedLines(gw, 'request completed').at(-1)!;
      expect(line.req).toMatchObject({ method: 'GET', url: expect.stringMatching(/^\/guarded\/m[0-9a-f]+\?access_token=\[redacted\]$/) });
      expect(line.res).toEqual({ statusCode: 200 });
      // The forwarder's debug line, asked of its own logger first (the lane's request makes one only to write).
      expect(loggedLines(gw, 'proxying').slice(-2).map((l) => [l.route, l.upstream, l.userId, typeof l.reqId])).toEqual(Array(2).fill(['/guarded', 'app', user.id, 'string']));
      expect(JSON.stringify(gw.logs.slice(-20))).not.toContain(user.access);
    });
  });

  describe('decided by the lane and answered by fastify, or left to fastify', () => {
    it('a denial (no token, a plan that does not pass): fastify\'s answer, decided once', async () => {
      for (const [path, headers, status] of [['/guarded', [], 401], ['/premium', ['Authorization', `Bearer ${user.access}`], 403]] as const) {
        const [fastify, lane, taken] = await both(gw, 'GET', (m) => `${path}/${m}`, () => [...headers]);
        expect(fastify.status).toBe(status);
        expect(fastify.upstream).toBeUndefined();
        expect(lane).toEqual(fastify);
        expect(taken).toBe(0);
      }
      const passed = await both(gw, 'GET', (m) => `/premium/${m}`, () => ['Authorization', `Bearer ${pro.access}`]);
      expect(passed[1]).toEqual(passed[0]);
      expect(passed[2]).toBe(1);
    });

    it('a refused Host, an own endpoint, a body, an Origin: never the lane\'s', async () => {
      const cases: [string, string, string[]][] = [
        ['GET', '/open/x', ['Host', 'evil:1@127.0.0.1']],
        ['GET', '/api/v1/user/me', ['Authorization', `Bearer ${user.access}`]],
        ['POST', '/open/x', ['Content-Type', 'application/json', 'Transfer-Encoding', 'chunked']],
        ['GET', '/open/x', ['Origin', APP]],
        ['GET', '/nowhere/x', []],
      ];
      for (const [method, path, headers] of cases) {
        const [fastify, lane, taken] = await both(gw, method, (m) => path.replace('x', m), () => headers);
        expect(lane, `${method} ${path}`).toEqual(fastify);
        expect(taken, `${method} ${path}`).toBe(0);
      }
    });
  });
});
