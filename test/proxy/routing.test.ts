// Route table and proxying (CONTRACT §2, §3, §6): matching, pass-through, body limits, upstream
// failures, own endpoints, path normalization. Two instances on one database, a real upstream.
import { createHash } from 'node:crypto';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bearer, closeSql, describeWithServices, makeUser, marker, startTestGateway, startTwoGateways, testConfig, type TestGateway,
} from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/upstream.js';
import { sparePort } from '../ops/support.js';

const MB = 1024 * 1024;

interface RawResponse { status: number; headers: http.IncomingHttpHeaders; body: Buffer }

/**
 * A request whose body is written in chunks (Transfer-Encoding: chunked unless a content-length is
 * given). Resolves with the response even when the gateway stops reading the body early.
 */
function streamRequest(baseUrl: string, method: string, path: string, chunks: Buffer[], headers: Record<string, string> = {}): Promise<RawResponse> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    let responded = false;
    const req = http.request({ host: url.hostname, port: url.port, method, path, headers, agent: false }, (res) => {
      responded = true;
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts) }));
      res.on('error', reject);
    });
    req.setTimeout(20_000, () => req.destroy(new Error('timed out')));
    // Once the gateway has answered (413), it may close the socket under our remaining writes.
    req.on('error', (err) => { if (!responded) reject(err); });
    let i = 0;
    const writeNext = () => {
      while (i < chunks.length) {
        if (req.destroyed) return;
        if (!req.write(chunks[i++]!)) { req.once('drain', writeNext); return; }
      }
      req.end();
    };
    writeNext();
  });
}

const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

describeWithServices('reverse proxy', () => {
  let upstream: EchoUpstream;
  // Only the pooling test sends here, so its connection count is that test's alone.
  let pooled: EchoUpstream;
  let a: TestGateway;
  let b: TestGateway;
  let rootGw: TestGateway;
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
      if (url.pathname.includes('/sleep/')) {
        const timer = setTimeout(() => { res.writeHead(200); res.end('late'); }, 1500);
        res.on('close', () => clearTimeout(timer));
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
    const dead = await sparePort();
    const config = testConfig({
      server: { bodyLimit: '10mb' },
      upstreams: {
        app: { url: upstream.url, timeout: '5s' },
        slow: { url: upstream.url, timeout: '300ms' },
        dead: { url: `http://127.0.0.1:${dead}`, timeout: '2s' },
        pooled: { url: pooled.url },
      },
      routes: [
        { path: '/races', upstream: 'app', methods: ['GET', 'POST'], auth: 'none' },
        { path: '/races/premium', upstream: 'app', auth: 'required', plans: ['premium', 'pro'] },
        { path: '/rw', upstream: 'app', auth: 'none', rewritePrefix: '/inner/v2' },
        { path: '/any', upstream: 'app', auth: 'none' },
        { path: '/slow', upstream: 'slow', auth: 'none' },
        { path: '/dead', upstream: 'dead', auth: 'none' },
        { path: '/public', upstream: 'app', auth: 'none' },
        { path: '/paid', upstream: 'app', auth: 'required', plans: ['pro'] },
        { path: '/api/v1', upstream: 'app', auth: 'none' },
        { path: '/pooled', upstream: 'pooled', auth: 'none' },
      ],
    });
    [a, b] = await startTwoGateways(config);
    rootGw = await startTestGateway(testConfig({ upstreams: { app: { url: upstream.url } }, routes: [{ path: '/', upstream: 'app', auth: 'none' }] }));
    pro = await makeUser(a, { plan: 'pro' });
  });

  afterAll(async () => {
    await Promise.all([a?.close(), b?.close(), rootGw?.close()]);
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

    it('answers 405 with Allow for a method the route does not take', async () => {
      const m = marker();
      const res = await a.request('DELETE', `/races/${m}`);
      expect(res.status).toBe(405);
      expect(res.json).toEqual({ error: 'Méthode non autorisée' });
      expect(res.headers.allow).toBe('GET, POST, HEAD');
      const head = await b.request('HEAD', `/races/${m}`);
      expect(head.status).toBe(200);
      expect(upstream.count(m)).toBe(1);
      expect(upstream.last(m)!.method).toBe('HEAD');
    });

    it('answers 405 to methods it never forwards (TRACE, WebDAV) on a route, 404 off every route', async () => {
      const m = marker();
      for (const method of ['TRACE', 'PROPFIND', 'MKCOL']) {
        // /any declares no methods: it takes the seven the gateway proxies, and only those.
        const res = await a.request(method, `/any/${m}`);
        expect(res.status).toBe(405);
        expect(res.json).toEqual({ error: 'Méthode non autorisée' });
        expect(res.headers.allow).toBe('GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS');
      }
      const restricted = await b.request('PROPFIND', `/races/${m}`);
      expect(restricted.status).toBe(405);
      expect(restricted.headers.allow).toBe('GET, POST, HEAD');
      const own = await a.request('PROPFIND', '/api/v1/auth/login', { headers: { 'x-marker': m } });
      expect(own.status).toBe(405);
      expect(own.headers.allow).toBe('POST');
      const nowhere = await b.request('TRACE', `/nowhere/${m}`);
      expect(nowhere.status).toBe(404);
      expect(nowhere.json).toEqual({ error: 'Route introuvable' });
      expect(upstream.count(m)).toBe(0);
      expect(upstream.hits.filter((h) => h.headers['x-marker'] === m)).toEqual([]);
    });

    it('replaces the matched prefix with rewritePrefix', async () => {
      const m = marker();
      const res = await a.get(`/rw/${m}/page?x=1&y=%20z`);
      expect(res.status).toBe(200);
      expect(res.json.url).toBe(`/inner/v2/${m}/page?x=1&y=%20z`);
      const exact = await b.get(`/rw?${m}`);
      expect(exact.json.url).toBe(`/inner/v2?${m}`);
    });

    it('never lets a route shadow the gateway\'s own endpoints', async () => {
      const m = marker();
      for (const gw of [a, rootGw]) {
        const login = await gw.post('/api/v1/auth/login', {}, { headers: { 'x-marker': m } });
        expect(login.status).toBe(400);
        expect(login.json).toEqual({ error: 'Email et mot de passe requis' });
        const health = await gw.get('/healthz', { headers: { 'x-marker': m } });
        expect(health.json).toEqual({ status: 'ok' });
        const me = await gw.get('/api/v1/user/me', { headers: { 'x-marker': m } });
        expect(me.json).toEqual({ error: 'Token invalide ou expiré' });
        // Another method on an own path is the gateway's answer too, never the upstream's.
        const get = await gw.get('/api/v1/auth/login', { headers: { 'x-marker': m } });
        expect(get.status).toBe(405);
        expect(get.json).toEqual({ error: 'Méthode non autorisée' });
        expect(get.headers.allow).toBe('POST');
        // Dot segments reach the own endpoint, not the upstream.
        const dotted = await gw.post('/api/v1/x/../auth/login', {}, { headers: { 'x-marker': m } });
        expect(dotted.json).toEqual({ error: 'Email et mot de passe requis' });
        // The rest of the own endpoints, one request each.
        expect(await gw.get('/readyz', { headers: { 'x-marker': m } })).toMatchObject({ status: 200, json: { status: 'ready' } });
        const jwks = await gw.get('/.well-known/jwks.json', { headers: { 'x-marker': m } });
        expect(jwks.status).toBe(200);
        expect(jwks.json.keys).toEqual(expect.any(Array));
        const own = [
          ['POST', '/api/v1/user/api-token', 401, 'Token invalide ou expiré'],
          ['DELETE', '/api/v1/user/webhook', 401, 'Token invalide ou expiré'],
          ['POST', '/api/v1/auth/refresh', 400, 'refresh_token manquant'],
        ] as const;
        for (const [method, path, status, error] of own) {
          const res = await gw.request(method, path, { json: {}, headers: { 'x-marker': m } });
          expect({ status: res.status, json: res.json }, `${method} ${path}`).toEqual({ status, json: { error } });
        }
      }
      expect(upstream.hits.filter((h) => h.headers['x-marker'] === m)).toEqual([]);
      // What is not an own endpoint still goes to the route.
      const other = await rootGw.get(`/api/v1/${m}`);
      expect(other.status).toBe(200);
      expect(upstream.count(m)).toBe(1);
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

  describe('limits and upstream failures', () => {
    it('answers 413 to a body over bodyLimit announced by content-length, before the upstream', async () => {
      const m = marker();
      const res = await streamRequest(a.url, 'POST', `/any/${m}`, [Buffer.alloc(1024)], { 'content-length': String(10 * MB + 1) });
      expect(res.status).toBe(413);
      expect(JSON.parse(res.body.toString())).toEqual({ error: 'Requête trop volumineuse' });
      expect(upstream.count(m)).toBe(0);
    });

    it('answers 413 to a chunked body that grows past bodyLimit', async () => {
      const m = marker();
      const chunks = Array.from({ length: 12 }, () => Buffer.alloc(MB, 1));
      const res = await streamRequest(b.url, 'POST', `/any/${m}`, chunks);
      expect(res.status).toBe(413);
      expect(JSON.parse(res.body.toString())).toEqual({ error: 'Requête trop volumineuse' });
      // The upstream may have seen the start of the body, never a complete request.
      expect(upstream.count(m)).toBe(0);
    });

    it('answers 502 when the upstream refuses the connection', async () => {
      for (const gw of [a, b]) {
        const res = await gw.post(`/dead/${marker()}`, { x: 1 });
        expect(res.status).toBe(502);
        expect(res.json).toEqual({ error: 'Service en amont indisponible' });
      }
    });

    it('answers 504 when the upstream is slower than its timeout', async () => {
      const m = marker();
      const res = await a.get(`/slow/sleep/${m}`);
      expect(res.status).toBe(504);
      expect(res.json).toEqual({ error: 'Service en amont trop lent' });
      expect(upstream.count(m)).toBe(1);
      // The same upstream under a route with a longer timeout answers.
      const patient = await b.get(`/any/sleep/${m}`);
      expect(patient.status).toBe(200);
      expect(patient.text).toBe('late');
    });
  });

  describe('path normalization', () => {
    it('matches and guards dot-segment paths as their normalized form', async () => {
      const m = marker();
      for (const raw of [`/public/../paid/${m}`, `/public/%2e%2e/paid/${m}`, `/public/.%2E/paid/${m}`, `/public//..//paid/${m}`, `/public/./../p%61id/${m}`]) {
        const res = await a.get(raw);
        expect(res.status, raw).toBe(401);
        expect(res.json).toEqual({ error: 'Token invalide ou expiré' });
      }
      expect(upstream.count(m)).toBe(0);
      const ok = await b.get(`/public/../paid/${m}?x=1`, { headers: bearer(pro.access) });
      expect(ok.status).toBe(200);
      expect(upstream.last(m)!.url).toBe(`/paid/${m}?x=1`);
      expect(upstream.last(m)!.headers['x-user-plan']).toBe('pro');
    });

    it('guards every spelling that a case-folding or servlet upstream reads as the route', async () => {
      // /races is public and /races/premium paid: Express or ASP.NET serve /races/PREMIUM as the
      // paid route, Tomcat or Spring serve /races/premium;x/... as it.
      const m = marker();
      const spellings = [`/races/PREMIUM/${m}`, `/RACES/Premium/${m}`, `/races/premium;jsessionid=1/${m}`, `/races;a=1/premium;b=2/${m}`, `/races/%50remium/${m}`,
        // A segment of parameters alone: Tomcat drops `;x`, then folds the `//` it leaves.
        `/races/;x/premium/${m}`, `/races/;/premium/${m}`];
      for (const raw of spellings) {
        const res = await a.get(raw);
        expect(res.status, raw).toBe(401);
        expect(res.json).toEqual({ error: 'Token invalide ou expiré' });
      }
      expect(upstream.count(m)).toBe(0);
      // Allowed through, the path reaches the upstream as the client wrote it.
      const ok = await b.get(`/races/PREMIUM;v=1/${m}?q=1`, { headers: bearer(pro.access) });
      expect(ok.status).toBe(200);
      expect(upstream.last(m)!.url).toBe(`/races/PREMIUM;v=1/${m}?q=1`);
      expect(upstream.last(m)!.headers['x-user-plan']).toBe('pro');
      // Every route is matched so: the public one's methods, and rewritePrefix replacing the prefix however it was written.
      expect((await a.request('DELETE', `/RACES/${m}`)).status).toBe(405);
      expect((await a.get(`/RW;v=2/${m}/page`)).json.url).toBe(`/inner/v2/${m}/page`);
      expect((await b.get(`/Rw;v=2?${m}`)).json.url).toBe(`/inner/v2?${m}`);
      expect((await b.get(`/;a/rw/;b/${m}`)).json.url).toBe(`/inner/v2/;b/${m}`);
      expect(upstream.count(m)).toBe(3); // count() reads paths: one request has the marker in its query only
    });

    it('refuses paths an upstream could split differently (encoded slash, ..;, #)', async () => {
      const m = marker();
      const before = upstream.hits.length;
      // A `#` ends the path for the proxy's URL parser: `/races/premium#` would go out as the paid
      // route's path after matching the public /races (the marker, after it, would not reach the upstream).
      for (const raw of [`/public%2F..%2Fpaid/${m}`, `/public%2fpaid/${m}`, `/public%5Cpaid/${m}`, `/public/..;/paid/${m}`, `/public\\..\\paid/${m}`, `/races/premium#${m}`, `/races/premium#?${m}`, `/races/x#/../premium/${m}`]) {
        const res = await a.get(raw);
        expect(res.status, raw).toBe(400);
        expect(res.json).toEqual({ error: 'Requête invalide' });
      }
      expect(upstream.hits.slice(before)).toEqual([]);
    });
  });
});
