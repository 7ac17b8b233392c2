// The proxy doing its job (CONTRACT §2, §3): a route matched by longest prefix on segment
// boundaries, rewritePrefix, requests and responses passed through unchanged (status, headers,
// bodies streamed both ways), pooled upstream connections. Two instances on one database, a real
// upstream. What the proxy refuses is in routing.error.test.ts; requests crafted to get around
// the route table in routing.security.test.ts.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { docsExample } from '../helpers/docs.js';
import { bearer, closeSql, describeWithServices, makeUser, marker, startTestGateway, startTwoGateways, testConfig, testConfigFromYaml, type TestGateway } from '../helpers/gateway.js';
import { streamRequest } from '../helpers/http.js';

const MB = 1024 * 1024;

const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

describeWithServices('reverse proxy', () => {
  let upstream: EchoUpstream;
  // Only the pooling test sends here, so its connection count is that test's alone.
  let pooled: EchoUpstream;
  let a: TestGateway;
  let b: TestGateway;
  let pro: { access: string };

  beforeAll(async () => {
    [upstream, pooled] = await Promise.all([startEchoUpstream(), startEchoUpstream()]);
    // Paths containing these words make the upstream behave specially.
    upstream.handle = (req, res, body) => {
      const url = new URL(req.url ?? '/', 'http://x');
      if (url.pathname.includes('/respond/')) {
        res.writeHead(Number(url.searchParams.get('status')), { 'content-type': 'text/plain; charset=utf-8', 'x-custom': 'kept', 'set-cookie': ['a=1', 'b=2'] });
        res.end(`custom body ${url.searchParams.get('status')}`);
        return true;
      }
      if (url.pathname.includes('/mirror/')) {
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'x-body-sha256': sha(body) });
        res.end(body);
        return true;
      }
      if (url.pathname.includes('/hopbyhop/')) {
        res.writeHead(200, { connection: 'close', 'keep-alive': 'timeout=1', 'content-type': 'text/plain', 'x-end-to-end': 'yes', 'x-request-id': 'from-upstream' });
        res.end('ok');
        return true;
      }
      return false;
    };
    [a, b] = await startTwoGateways(testConfig({
      server: { bodyLimit: '10mb' },
      upstreams: {
        app: { url: upstream.url, timeout: '5s' },
        pooled: { url: pooled.url },
      },
      routes: [
        { path: '/races', upstream: 'app', methods: ['GET', 'POST'], auth: 'none' },
        { path: '/races/premium', upstream: 'app', auth: 'required', plans: ['premium', 'pro'] },
        { path: '/rw', upstream: 'app', auth: 'none', rewritePrefix: '/inner/v2' },
        { path: '/any', upstream: 'app', auth: 'none' },
        { path: '/pooled', upstream: 'pooled', auth: 'none' },
      ],
    }));
    pro = await makeUser(a, { plan: 'pro' });
  });

  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await Promise.all([upstream?.close(), pooled?.close()]);
    await closeSql();
  });

  describe('matching', () => {
    it('matches a prefix on segment boundaries only', async () => {
      const m = marker();
      for (const gw of [a, b]) {
        expect((await gw.get('/races')).status).toBe(200);
        const deep = await gw.get(`/races/${m}/x`);
        expect(deep.status).toBe(200);
        expect(deep.json.path).toBe(`/races/${m}/x`);
        const sibling = await gw.get(`/races${m}`);
        expect(sibling.status).toBe(404);
        expect(sibling.json).toEqual({ error: 'Route introuvable' });
        expect((await gw.get(`/nowhere/${m}`)).json).toEqual({ error: 'Route introuvable' });
      }
      expect(upstream.count(m)).toBe(2);
      expect(upstream.hits.filter((h) => h.path === `/races${m}` || h.path.startsWith('/nowhere/'))).toEqual([]);
    });

    it('lets the longest prefix win', async () => {
      const m = marker();
      // /races/premium is guarded even though /races (auth: none) also matches.
      const denied = await a.get(`/races/premium/${m}`);
      expect(denied.status).toBe(401);
      expect(denied.json).toEqual({ error: 'Token invalide ou expiré' });
      expect(upstream.count(m)).toBe(0);
      const ok = await b.get(`/races/premium/${m}`, { headers: bearer(pro.access) });
      expect(ok.status).toBe(200);
      expect(upstream.count(m)).toBe(1);
      // /races/premiumX is not under /races/premium: the shorter /races route takes it.
      const sibling = await a.get(`/races/premiumX${m}`);
      expect(sibling.status).toBe(200);
      expect(sibling.json.headers['x-user-id']).toBeUndefined();
    });

    it('replaces the matched prefix with rewritePrefix', async () => {
      const m = marker();
      const res = await a.get(`/rw/${m}/page?x=1&y=%20z`);
      expect(res.status).toBe(200);
      expect(res.json.url).toBe(`/inner/v2/${m}/page?x=1&y=%20z`);
      const exact = await b.get(`/rw?${m}`);
      expect(exact.json.url).toBe(`/inner/v2?${m}`);
    });
  });

  describe('pass-through', () => {
    it('forwards method, path, query, headers and body unchanged', async () => {
      const m = marker();
      const body = JSON.stringify({ hello: 'wörld', m });
      const res = await a.request('POST', `/races/${m}/a%20b/%C3%A9?q=1&q=2&e=%26&empty=`, {
        body, headers: { 'content-type': 'application/json', 'x-custom-header': 'v1', accept: 'text/plain', cookie: 'k=v' },
      });
      expect(res.status).toBe(200);
      const hit = upstream.last(m)!;
      expect(hit.method).toBe('POST');
      expect(hit.url).toBe(`/races/${m}/a%20b/%C3%A9?q=1&q=2&e=%26&empty=`);
      expect(hit.body).toBe(body);
      expect(hit.headers).toMatchObject({
        'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)),
        'x-custom-header': 'v1', accept: 'text/plain', cookie: 'k=v',
      });
      const long = `/races/${m}/${'x'.repeat(4000)}`;
      expect((await b.get(long)).json.path).toBe(long);
      expect(upstream.count(m)).toBe(2);
    });

    it.each([201, 404, 503])('returns the upstream status %i, headers and body unchanged (no retry)', async (status) => {
      const m = marker();
      const res = await b.get(`/any/respond/${m}?status=${status}`);
      expect(res.status).toBe(status);
      expect(res.text).toBe(`custom body ${status}`);
      expect(res.headers['content-type']).toBe('text/plain; charset=utf-8');
      expect(res.headers['x-custom']).toBe('kept');
      expect(res.headers['set-cookie']).toEqual(['a=1', 'b=2']);
      expect(upstream.count(m)).toBe(1);
    });

    it('does not pass hop-by-hop headers either way, nor the upstream\'s request id', async () => {
      const m = marker();
      const res = await a.get(`/any/hopbyhop/${m}`, { headers: { 'keep-alive': 'timeout=9', te: 'trailers', upgrade: 'h2c', connection: 'keep-alive, upgrade' } });
      expect(res.status).toBe(200);
      expect(res.headers['x-end-to-end']).toBe('yes');
      expect(res.headers['keep-alive']).not.toBe('timeout=1');
      expect(res.headers.connection).toBe('keep-alive');
      const hit = upstream.last(m)!;
      expect(hit.headers['keep-alive']).toBeUndefined();
      expect(hit.headers.upgrade).toBeUndefined();
      expect(hit.headers.te).toBeUndefined();
      // The response keeps the gateway's request id, the one its logs carry.
      expect(res.headers['x-request-id']).toBe(hit.headers['x-request-id']);
    });

    it('forwards a body sent with Expect: 100-continue', async () => {
      const m = marker();
      const body = Buffer.alloc(4096, 'e');
      const res = await streamRequest(a.url, 'PUT', `/any/mirror/${m}`, [body], { expect: '100-continue', 'content-length': String(body.length) });
      expect(res.status).toBe(200);
      expect(res.body.equals(body)).toBe(true);
      expect(upstream.count(m)).toBe(1);
    });

    it('streams a 5 MB body intact both ways, with and without content-length', async () => {
      const m = marker();
      const chunks = Array.from({ length: 80 }, (_, i) => Buffer.alloc(64 * 1024, i % 251));
      const whole = Buffer.concat(chunks);
      const chunked = await streamRequest(a.url, 'POST', `/any/mirror/${m}`, chunks, { 'content-type': 'application/octet-stream' });
      expect(chunked.status).toBe(200);
      expect(chunked.body.length).toBe(5 * MB);
      expect(sha(chunked.body)).toBe(sha(whole));
      expect(chunked.headers['x-body-sha256']).toBe(sha(whole));
      const sized = await streamRequest(b.url, 'PUT', `/any/mirror/${m}`, chunks, { 'content-length': String(whole.length) });
      expect(sized.status).toBe(200);
      expect(sha(sized.body)).toBe(sha(whole));
      expect(upstream.count(m)).toBe(2);
    });
  });

  describe('upstream connections', () => {
    it('reuses pooled keep-alive connections to the upstream, whatever the client connections do', async () => {
      const m = marker();
      const requests = 20;
      for (let i = 0; i < requests; i++) {
        // Half on the client's own keep-alive connection, half each on a new connection the client
        // asks to close: only the gateway's pool can carry the upstream connection across those.
        const res = i % 2 === 0
          ? await a.get(`/pooled/${m}/${i}`)
          : await a.get(`/pooled/${m}/${i}`, { freshConnection: true, headers: { connection: 'close' } });
        expect(res.status).toBe(200);
        expect(res.json.path).toBe(`/pooled/${m}/${i}`);
      }
      expect(pooled.count(m)).toBe(requests);
      // A connection per request would be 20: a handshake each time, and ports in TIME_WAIT.
      expect(pooled.connections).toBeGreaterThanOrEqual(1);
      expect(pooled.connections).toBeLessThanOrEqual(2);
      // The client's `Connection: close` is about its own hop: the upstream is asked to keep alive.
      expect(pooled.hits.filter((h) => h.path.includes(m)).map((h) => h.headers.connection)).toEqual(Array(requests).fill('keep-alive'));
    });
  });
});

// docs/routing-and-headers.md opens with a configuration: run it as written and check that it
// does what the page says, so the page cannot drift from the gateway.
describeWithServices('the routing page\'s example, run as written', () => {
  let upstream: EchoUpstream;
  let gw: TestGateway;

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    gw = await startTestGateway(testConfigFromYaml(docsExample('routing-and-headers', 'routing'), { APP_UPSTREAM: upstream.url }));
  });

  afterAll(async () => {
    await gw?.close();
    await upstream?.close();
  });

  it('forwards the public route, rewritten and without identity, and refuses the guarded one without a token', async () => {
    const m = marker();
    const open = await gw.get(`/api/v1/public/${m}?x=1`, { headers: { 'x-user-id': '1' } });
    expect(open.status).toBe(200);
    expect(upstream.last(m)!.url).toBe(`/public/${m}?x=1`);
    expect(upstream.last(m)!.headers['x-user-id']).toBeUndefined();
    const guarded = await gw.get(`/api/v1/races/${m}`);
    expect(guarded.status).toBe(401);
    expect(guarded.json).toEqual({ error: 'Token invalide ou expiré' });
    expect(upstream.count(m)).toBe(1);
  });

  it('lets a free user through once a day and keeps the reports for premium and pro', async () => {
    const m = marker();
    const user = await makeUser(gw);
    const first = await gw.get(`/api/v1/races/${m}`, { headers: bearer(user.access) });
    expect(first.status).toBe(200);
    expect(upstream.last(m)!.headers).toMatchObject({ 'x-user-id': String(user.id), 'x-user-plan': 'free', 'x-auth-method': 'bearer' });
    const second = await gw.get(`/api/v1/races/${m}`, { headers: bearer(user.access) });
    expect(second.status).toBe(429);
    const reports = await gw.get(`/api/v1/reports/${m}`, { headers: bearer(user.access) });
    expect(reports.status).toBe(403);
    expect(reports.json).toEqual({ error: 'Plan insuffisant', required: ['premium', 'pro'], current_plan: 'free', upgrade_url: '/api/v1/subscription/upgrade' });
    expect(upstream.count(m)).toBe(1);
  });
});
