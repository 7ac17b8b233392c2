// TLS to upstreams (CONTRACT §10): a CA of the operator's own, a client certificate for an upstream
// that demands one (mTLS), a server name other than the URL's host; files read again on reload.
// The upstream is a real HTTPS server with requestCert; the certificates come from openssl.
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createSecureServer } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyConfig, reload } from '../../src/live/reload.js';
import { makePki, type Issued, type Pki } from '../helpers/certs.js';
import { ensureBuilt, gateway as cli } from '../helpers/cli.js';
import { docsExample } from '../helpers/docs.js';
import {
  bearer, closeSql, configProblems, describeWithServices, eventually, makeUser, marker, startTestGateway, testConfig, testConfigFromFile, type TestGateway,
} from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';

describeWithServices('upstreams over TLS', () => {
  let pki: Pki;
  let other: Pki;
  let client: Issued;
  let upstream: EchoUpstream;
  let dir: string;
  let gw: TestGateway;

  beforeAll(async () => {
    pki = makePki('Internal CA');
    other = makePki('Another CA');
    // The upstream's certificate names app.internal only: reached at 127.0.0.1, only serverName makes it match.
    const server = pki.issue('app', { cn: 'app.internal', names: ['app.internal'] });
    client = pki.issue('gw-client', { cn: 'gateway' });
    upstream = await startEchoUpstream({ tls: { key: server.key, cert: server.cert, ca: pki.ca, requestCert: true, rejectUnauthorized: true } });
    // The docs' example as an operator lays it out: gateway.yaml beside ./certs/.
    dir = mkdtempSync(path.join(tmpdir(), 'gw-upstream-tls-'));
    mkdirSync(path.join(dir, 'certs'));
    copyFileSync(pki.caFile, path.join(dir, 'certs/internal-ca.pem'));
    copyFileSync(client.certFile, path.join(dir, 'certs/gw-client.pem'));
    copyFileSync(client.keyFile, path.join(dir, 'certs/gw-client-key.pem'));
    gw = await startTestGateway(testConfigFromFile(docsExample('tls', 'upstream-tls'), dir, { APP_URL: upstream.url }));
  });

  afterAll(async () => {
    await gw?.close();
    await upstream?.close();
    pki?.remove();
    other?.remove();
    if (dir) rmSync(dir, { recursive: true, force: true });
    await closeSql();
  });

  it('reaches an upstream that demands a client certificate, with its CA and server name (the docs\' example)', async () => {
    const user = await makeUser(gw);
    const m = marker();
    const res = await gw.get(`/api/v1/orders/${m}`, { headers: bearer(user.access) });
    expect(res.status).toBe(200);
    const hit = upstream.last(m)!;
    expect(hit.clientCn).toBe('gateway');
    expect(hit.headers['x-user-id']).toBe(String(user.id));
  });

  it('answers 502 when the upstream cannot be verified or refuses the gateway, and the request never runs', async () => {
    const files = { caFile: path.join(dir, 'certs/internal-ca.pem'), certFile: client.certFile, keyFile: client.keyFile, serverName: 'app.internal' };
    const cases = {
      'public CAs only': undefined,
      'another CA': { ...files, caFile: other.caFile },
      'no client certificate': { caFile: files.caFile, serverName: 'app.internal' },
      'a name the certificate lacks': { ...files, serverName: 'other.internal' },
      'no server name (the URL is an IP address)': { caFile: files.caFile, certFile: files.certFile, keyFile: files.keyFile },
    };
    for (const [label, tls] of Object.entries(cases)) {
      const own = await startTestGateway(testConfig({ upstreams: { app: { url: upstream.url, ...(tls ? { tls } : {}) } }, routes: [{ path: '/x', upstream: 'app', auth: 'none' }] }));
      try {
        const m = marker();
        const res = await own.get(`/x/${m}`);
        expect(res.status, label).toBe(502);
        expect(res.json, label).toEqual({ error: 'Service en amont indisponible' });
        expect(upstream.count(m), label).toBe(0);
      } finally {
        await own.close();
      }
    }
  });

  it('reads the files again on reload: a renewed client certificate is used by the next connection', async () => {
    const renewed = pki.issue('gw-client-2', { cn: 'gateway-renewed' });
    const own = await startTestGateway(testConfigFromFile(docsExample('tls', 'upstream-tls'), dir, { APP_URL: upstream.url }));
    try {
      const user = await makeUser(own);
      const before = marker();
      expect((await own.get(`/api/v1/orders/${before}`, { headers: bearer(user.access) })).status).toBe(200);
      expect(upstream.last(before)!.clientCn).toBe('gateway');
      // Same file names, new contents, same configuration: as certificate renewal tools do.
      copyFileSync(renewed.certFile, path.join(dir, 'certs/gw-client.pem'));
      copyFileSync(renewed.keyFile, path.join(dir, 'certs/gw-client-key.pem'));
      const result = reload(own.services, () => testConfigFromFile(docsExample('tls', 'upstream-tls'), dir, { APP_URL: upstream.url }));
      expect(result).toEqual({ applied: [], needsRestart: [] });
      // Pooled connections were verified with the old certificate; new ones take the new one.
      upstream.dropConnections();
      await eventually(async () => {
        const after = marker();
        return (await own.get(`/api/v1/orders/${after}`, { headers: bearer(user.access) })).status === 200 && upstream.last(after)!.clientCn === 'gateway-renewed';
      });
    } finally {
      copyFileSync(client.certFile, path.join(dir, 'certs/gw-client.pem'));
      copyFileSync(client.keyFile, path.join(dir, 'certs/gw-client-key.pem'));
      await own.close();
    }
  });

  it('refuses a reload whose files cannot be used, keeping the running setup', async () => {
    const own = await startTestGateway(testConfigFromFile(docsExample('tls', 'upstream-tls'), dir, { APP_URL: upstream.url }));
    try {
      const broken = testConfigFromFile(docsExample('tls', 'upstream-tls'), dir, { APP_URL: upstream.url });
      broken.upstreams.app!.tls!.keyFile = other.caFile; // not a key at all
      expect(() => applyConfig(own.services, broken)).toThrow(/^upstreams\.app\.tls: /);
      expect(reload(own.services, () => broken)).toBeUndefined();
      const user = await makeUser(own);
      expect((await own.get(`/api/v1/orders/${marker()}`, { headers: bearer(user.access) })).status).toBe(200);
    } finally {
      await own.close();
    }
  });

  it('speaks HTTP/1.1 to an upstream that also offers HTTP/2 (undici 8 would negotiate h2 by default)', async () => {
    const server = pki.issue('h2', { cn: 'h2.internal', names: ['h2.internal'] });
    const seen: string[] = [];
    const h2 = createSecureServer({ key: server.key, cert: server.cert, allowHTTP1: true }, (req, res) => {
      seen.push(req.httpVersion);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ httpVersion: req.httpVersion }));
    });
    await new Promise<void>((resolve) => h2.listen(0, '127.0.0.1', resolve));
    const url = `https://127.0.0.1:${(h2.address() as AddressInfo).port}`;
    const own = await startTestGateway(testConfig({
      upstreams: { app: { url, tls: { caFile: pki.caFile, serverName: 'h2.internal' } } }, routes: [{ path: '/x', upstream: 'app', auth: 'none' }],
    }));
    try {
      const res = await own.get('/x/y');
      expect(res.status).toBe(200);
      expect(res.json).toEqual({ httpVersion: '1.1' });
      expect(seen).toEqual(['1.1']);
    } finally {
      await own.close();
      await new Promise((resolve) => h2.close(resolve));
    }
  });
});

describe('upstream tls settings', () => {
  const problems = configProblems;

  it('takes tls on https:// upstreams only, a certificate with its key, and one setup per origin', () => {
    expect(problems('upstreams: { a: { url: "http://127.0.0.1:1", tls: { caFile: ./ca.pem } } }')).toEqual(['upstreams.a.tls: tls applies to https:// upstreams only']);
    expect(problems('upstreams: { a: { url: "https://a.internal", tls: { certFile: ./c.pem } } }')).toEqual(['upstreams.a.tls.keyFile: expected certFile and keyFile together (the client certificate and its key)']);
    expect(problems(`
upstreams:
  a: { url: "https://a.internal:8443", tls: { caFile: ./ca.pem } }
  b: { url: "https://A.internal:8443/v2", tls: { caFile: ./other.pem } }
  c: { url: "https://a.internal:8443", tls: { caFile: ./ca.pem } }`)).toEqual(['upstreams.b.tls: expected the same tls settings as upstream "a", which has the same origin (https://a.internal:8443)']);
  });

  it('gateway check reads the files: a key that is not the certificate\'s, a missing CA', { timeout: 120_000 }, async () => {
    ensureBuilt();
    const pki = makePki();
    const other = makePki();
    try {
      pki.issue('mine', { cn: 'gateway' });
      const theirs = other.issue('theirs', { cn: 'someone' });
      const write = (name: string, tls: Record<string, string>) => {
        const file = path.join(pki.dir, name);
        writeFileSync(file, `apiKeys: { prefix: acme }\nupstreams:\n  app:\n    url: https://app.internal\n    tls: ${JSON.stringify(tls)}\n`);
        return file;
      };
      const ok = await cli(['check', '--config', write('ok.yaml', { caFile: './ca.pem', certFile: './mine.pem', keyFile: './mine-key.pem' })]);
      expect(ok.stderr).toBe('');
      expect(ok.code).toBe(0);
      const mismatch = await cli(['check', '--config', write('mismatch.yaml', { caFile: './ca.pem', certFile: './mine.pem', keyFile: theirs.keyFile })]);
      expect(mismatch.code).toBe(1);
      expect(mismatch.stderr.split('\n')[1]).toMatch(new RegExp(`^  - upstreams\\.app\\.tls\\.keyFile: ${theirs.keyFile}: does not go with the certificate ${path.join(pki.dir, 'mine.pem')}: `));
      const missing = await cli(['check', '--config', write('missing.yaml', { caFile: './nope.pem' })]);
      expect(missing.stderr.split('\n')[1]).toBe(`  - upstreams.app.tls.caFile: ${path.join(pki.dir, 'nope.pem')}: cannot read the file: ENOENT`);
    } finally {
      pki.remove();
      other.remove();
    }
  });
});
