// What the proxy refuses, and how it answers an upstream that fails (CONTRACT §2, §6): 405 with
// Allow for a method a route does not take (or that the gateway never forwards), 404 off every
// route, 413 past bodyLimit before the upstream sees a whole request, 502 and 504 for an upstream
// that refuses or is too slow, never a retry. Two instances on one database, a real upstream.
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { closeSql, describeWithServices, marker, startTwoGateways, testConfig, type TestGateway } from '../helpers/gateway.js';
import { streamRequest } from '../helpers/http.js';
import { refusedPort } from '../helpers/ports.js';

const MB = 1024 * 1024;

describeWithServices('reverse proxy refusals and upstream failures', () => {
  let upstream: EchoUpstream;
  let a: TestGateway;
  let b: TestGateway;
  // Answers every request with a status HTTP does not have, at once.
  let odd: net.Server;

  beforeAll(async () => {
    odd = net.createServer((socket) => {
      socket.once('data', () => socket.end('HTTP/1.1 600 Odd\r\ncontent-length: 2\r\nx-odd: yes\r\n\r\nok'));
    });
    await new Promise<void>((resolve) => odd.listen(0, '127.0.0.1', resolve));
    upstream = await startEchoUpstream();
    // A path containing /sleep/ is answered late.
    upstream.handle = (req, res) => {
      if (!(req.url ?? '').includes('/sleep/')) return false;
      const timer = setTimeout(() => { res.writeHead(200); res.end('late'); }, 1500);
      res.on('close', () => clearTimeout(timer));
      return true;
    };
    const dead = await refusedPort();
    [a, b] = await startTwoGateways(testConfig({
      server: { bodyLimit: '10mb' },
      upstreams: {
        app: { url: upstream.url, timeout: '5s' },
        slow: { url: upstream.url, timeout: '300ms' },
        dead: { url: `http://127.0.0.1:${dead}`, timeout: '2s' },
        odd: { url: `http://127.0.0.1:${(odd.address() as AddressInfo).port}`, timeout: '2s' },
      },
      routes: [
        { path: '/races', upstream: 'app', methods: ['GET', 'POST'], auth: 'none' },
        { path: '/any', upstream: 'app', auth: 'none' },
        { path: '/slow', upstream: 'slow', auth: 'none' },
        { path: '/dead', upstream: 'dead', auth: 'none' },
        { path: '/odd', upstream: 'odd', auth: 'none' },
      ],
    }));
  });

  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await upstream?.close();
    await new Promise((resolve) => odd?.close(resolve));
    await closeSql();
  });

  describe('methods and routes', () => {
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

    it('answers 502 to a status HTTP does not have, and passes none of that answer on', async () => {
      const res = await a.get(`/odd/${marker()}`);
      expect(res.status).toBe(502);
      expect(res.json).toEqual({ error: 'Service en amont indisponible' });
      expect(res.headers['x-odd']).toBeUndefined();
    });
  });
});
