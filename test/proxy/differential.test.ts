// Issue 77 compiled the forwarding header rules (src/proxy/headers.ts: a verdict per name, the
// answer's headers built in one pass). The rules as they were written before stay beside them as
// the reference (headerRules.reference, a test seam): the same requests, sent through one gateway
// with each, must give the upstream the same request line, header lines (in order) and body, and the
// client the same status, header lines and bytes. Request ids are the gateway's, fresh each time:
// compared as where they appear, not what they hold.
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { headerRules } from '../../src/proxy/headers.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { bearer, closeSql, describeWithServices, makeUser, marker, startTestGateway, testConfig, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { opened, startWsUpstream, wsConnect, type WsUpstream } from '../helpers/wsUpstream.js';
import { exchange, type Exchange } from '../helpers/exchange.js';

const APP = 'https://app.example.test';

describeWithServices('the compiled header rules against the rules as written (differential)', () => {
  let upstream: EchoUpstream;
  let ws: WsUpstream;
  let gw: TestGateway;
  let gwOrgs: TestGateway;
  let user: TestUser;

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    // An upstream that answers with what the answer rules act on: its own request id, CORS fields,
    // Vary, hop-by-hop headers and one named by Connection, repeated Set-Cookie.
    upstream.handle = (req, res) => {
      if (!req.url?.includes('answer')) return false;
      res.writeHead(201, [
        'X-Request-Id', 'the-upstream-s-own', 'Access-Control-Allow-Origin', '*', 'Vary', 'Accept', 'Connection', 'keep-alive, x-hop', 'X-Hop', '1',
        'Set-Cookie', 'a=1', 'Set-Cookie', 'b=2', 'X-Custom', 'kept', 'Content-Type', 'text/plain', 'Keep-Alive', 'timeout=5',
      ]);
      res.end('upstream bytes');
      return true;
    };
    ws = await startWsUpstream();
    const routes = [
      { path: '/open', upstream: 'app', auth: 'none' },
      { path: '/guarded', upstream: 'app', auth: 'required' },
      { path: '/counted', upstream: 'app', auth: 'required', rateLimit: true },
      { path: '/live', upstream: 'live', auth: 'required', websocket: true },
    ];
    const base = { upstreams: { app: { url: upstream.url }, live: { url: ws.url } }, routes, cors: { origins: [APP], credentials: true }, plans: { limits: { free: { perMinute: 1000 } } } };
    gw = await startTestGateway(testConfig(base));
    gwOrgs = await startTestGateway(testConfig({ ...base, server: { trustProxy: true }, organizations: { enabled: true },
      mail: { smtp: '', from: 'G <g@example.test>', resetUrl: 'https://a.example/r?token={token}', verifyUrl: 'https://a.example/v?token={token}', invitationUrl: 'https://a.example/j?token={token}' },
    }));
    user = await makeUser(gw);
  });

  afterEach(() => { headerRules.reference = false; });

  afterAll(async () => {
    await Promise.all([gw?.close(), gwOrgs?.close()]);
    await Promise.all([upstream?.close(), ws?.close()]);
    await closeSql();
  });

  /** The same request with the reference rules, then the compiled ones: both exchanges. */
  async function both(target: () => TestGateway, method: string, path: (m: string) => string, headerPairs: (m: string) => string[], body?: string): Promise<[Exchange, Exchange]> {
    const run = async (reference: boolean) => {
      headerRules.reference = reference;
      const m = marker();
      const seen = await exchange(target(), upstream, m, method, path(m), headerPairs(m), body);
      // The marker differs from one run to the other, as do the remaining uses and the seconds to
      // the refill in the RateLimit field (the second request takes one more): named alike.
      return JSON.parse(JSON.stringify(seen).replaceAll(m, '<marker>').replace(/;r=\d+;t=\d+/g, ';r=<remaining>;t=<reset>')) as Exchange;
    };
    return [await run(true), await run(false)];
  }

  // Everything the request rules act on, in the spellings and repetitions a client may send.
  const hostile = (m: string) => [
    'X-User-Id', '999', 'X_User_Plan', 'pro', 'x-auth-method', 'bearer', 'X-Gateway-Assertion', 'forged', 'X-Org-Id', '7', 'Gateway-Org', 'acme',
    'X-Forwarded-For', '6.6.6.6', 'X-Forwarded-Proto', 'https', 'X-Forwarded-Port', '443', 'X-Real-Ip', '6.6.6.6', 'Forwarded', 'for=6.6.6.6',
    'X-Original-Url', '/admin', 'X-Api-Key', 'nope', 'Proxy-Authorization', 'Basic x', 'X-Auth-Request-User', 'boss', 'X-Remote-User', 'boss',
    'Connection', 'keep-alive, x-named, X-User-Email', 'X-Named', 'gone', 'TE', 'trailers', 'X-Request-Id', `client-${m}`,
    'Accept', 'a', 'Accept', 'b', 'X-Custom', m, 'Cookie', 'theme=dark', 'Origin', APP, 'X-Script-Name', '/mount', 'x-custom-two', 'two',
  ];

  it('an anonymous request on a public route: the same request upstream and the same answer', async () => {
    const [reference, compiled] = await both(() => gw, 'GET', (m) => `/open/${m}?q=1&q=2`, hostile);
    expect(reference.upstream).toBeDefined();
    expect(compiled).toEqual(reference);
  });

  it('with a bearer token, a token in a cookie and in the query: identity headers and stripped copies alike', async () => {
    const token = user.access;
    const withToken = (m: string) => [...hostile(m), 'Authorization', `Bearer ${token}`, 'Cookie', `session=${token}`];
    const [reference, compiled] = await both(() => gw, 'GET', (m) => `/guarded/${m}?access_token=${token}&x=1`, withToken);
    expect(reference.status).toBe(200);
    expect(compiled).toEqual(reference);
  });

  it('a body, on a counted route (RateLimit fields), answered with what the answer rules act on', async () => {
    const withBody = (m: string) => [...hostile(m), ...Object.entries(bearer(user.access)).flat(), 'Content-Type', 'application/json'];
    const [reference, compiled] = await both(() => gw, 'POST', (m) => `/counted/${m}/answer`, withBody, '{"a":[1,2,3]}');
    expect(reference.status).toBe(201);
    expect(reference.rawHeaders.map((h) => h.toLowerCase())).toContain('ratelimit-policy');
    expect(compiled).toEqual(reference);
  });

  it('behind a trusted proxy with organizations enabled: its forwarding headers kept, x-org-* dropped alike', async () => {
    // Gateway-Org on a route without `org` is refused (CONTRACT §22): not sent here.
    const withoutGatewayOrg = (m: string) => hostile(m).filter((_v, i, all) => all[i - (i % 2)] !== 'Gateway-Org');
    const [reference, compiled] = await both(() => gwOrgs, 'GET', (m) => `/open/${m}/answer`, withoutGatewayOrg);
    expect(reference.status).toBe(201);
    expect(compiled).toEqual(reference);
  });

  it('a WebSocket handshake: the upstream sees the same header lines', async () => {
    const handshake = async (reference: boolean) => {
      headerRules.reference = reference;
      const m = marker();
      const headers = { 'x-user-id': '1', 'x-forwarded-for': '6.6.6.6', 'x-custom': 'kept' };
      const socket = opened(await wsConnect(`${gw.url.replace('http', 'ws')}/live/${m}?access_token=${user.access}`, { headers }));
      socket.ws.close();
      const seen = ws.last(m)!;
      const { 'x-request-id': id, 'sec-websocket-key': _key, ...sent } = seen.headers;
      expect(id).toMatch(/^[0-9a-f-]{36}$/);
      return { url: seen.url.replace(m, '<marker>'), headers: sent };
    };
    const reference = await handshake(true);
    expect(await handshake(false)).toEqual(reference);
  });
});
