// The portal's own origin and what every portal answer carries (CONTRACT §30), on real gateways:
// on publicUrl's host no route matches (HTTP, WebSocket, the decisions listener), elsewhere the
// portal's path answers 308 to publicUrl; sharedOrigin serves it everywhere; pages, assets, the
// logo and {path}api/config with their headers; an upstream's Set-Cookie of a gateway cookie dropped.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeWithServices, makeUser, startDecidingGateway, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { streamRequest } from '../helpers/http.js';
import { refused, startWsUpstream, wsConnect, type WsUpstream } from '../helpers/wsUpstream.js';

const PUBLIC_URL = 'http://localhost:4100';
const PORTAL_HOST = { host: 'localhost:4100' };
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";
const NOT_FOUND = { error: 'Route introuvable' };
const PAGE = { 'x-gateway-portal': '1' };

describeWithServices('the portal\'s origin (CONTRACT §30)', () => {
  let app: EchoUpstream;
  let ws: WsUpstream;
  let gw: TestGateway;
  let shared: TestGateway;
  let deciding: TestGateway;
  let logoDir: string | undefined;
  let logo: string;
  let pngLogo: string;

  beforeAll(async () => {
    [app, ws] = await Promise.all([startEchoUpstream(), startWsUpstream()]);
    const dir = (logoDir = mkdtempSync(path.join(os.tmpdir(), 'portal-')));
    logo = path.join(dir, 'logo.svg');
    writeFileSync(logo, '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><script>alert(1)</script></svg>');
    // The shared origin's logo is a PNG: an image is sent as it is, never gzipped.
    pngLogo = path.join(dir, 'logo.png');
    writeFileSync(pngLogo, Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64'));
    const settings = (sharedOrigin: boolean) => ({
      upstreams: { app: { url: app.url }, ws: { url: ws.url } },
      routes: [
        { path: '/socket', upstream: 'ws', auth: 'none', websocket: true },
        // The scopes a key may be given, as api/config lists them: sorted, each once.
        { path: '/reports', upstream: 'app', auth: 'required', scopes: ['reports:write', 'reports:read'] }, { path: '/exports', upstream: 'app', auth: 'required', scopes: ['reports:read'] },
        { path: '/', upstream: 'app', auth: 'none' },
      ],
      portal: {
        enabled: true, publicUrl: PUBLIC_URL, sharedOrigin, product: { name: 'Acme <b>API</b>', logo: sharedOrigin ? pngLogo : logo, support: 'help@example.com' },
        returnTo: ['https://app.example.com/'],
      },
    });
    [gw, shared, deciding] = await Promise.all([
      startTestGateway(testConfig(settings(false))), startTestGateway(testConfig(settings(true))), startDecidingGateway(settings(false)),
    ]);
  });
  afterAll(async () => {
    await Promise.all([gw?.close(), shared?.close(), deciding?.close()]);
    await Promise.all([app?.close(), ws?.close()]);
    if (logoDir) rmSync(logoDir, { recursive: true, force: true });
  });

  it('serves no route on the portal\'s host, every spelling of the host and port included, but the gateway\'s own endpoints', async () => {
    const before = app.count('/anything');
    for (const host of ['localhost:4100', 'LOCALHOST', 'localhost.:8080', `localhost:${new URL(gw.url).port}`]) {
      const res = await gw.get('/anything', { headers: { host } });
      expect(res.status, host).toBe(404);
      expect(res.json).toEqual(NOT_FOUND);
    }
    expect(app.count('/anything')).toBe(before);
    // The gateway's own endpoints are there all the same: the pages call them.
    expect((await gw.get('/healthz', { headers: PORTAL_HOST })).status).toBe(200);
    const user = await makeUser(gw);
    expect((await gw.get('/api/v1/user/me', { headers: { ...PORTAL_HOST, authorization: `Bearer ${user.access}` } })).status).toBe(200);
    // On another host the route is proxied.
    expect((await gw.get('/anything')).status).toBe(200);
    expect(app.count('/anything')).toBe(before + 1);
  });

  it('refuses a WebSocket upgrade on the portal\'s host with the same 404, and opens it elsewhere', async () => {
    const refusal = refused(await wsConnect(`ws://127.0.0.1:${new URL(gw.url).port}/socket`, { headers: PORTAL_HOST }));
    expect(refusal.status).toBe(404);
    expect(refusal.json).toEqual(NOT_FOUND);
    const socket = await wsConnect(`ws://127.0.0.1:${new URL(gw.url).port}/socket`);
    expect('ws' in socket).toBe(true);
    if ('ws' in socket) socket.ws.close();
  });

  it('denies a decision for the portal\'s host, by Host or by X-Forwarded-Host, as the public listener does', async () => {
    expect((await deciding.decide('GET', '/decisions/anything')).status).toBe(200);
    for (const headers of [PORTAL_HOST, { 'x-forwarded-host': 'localhost' }, { 'x-forwarded-host': 'app.example.com, localhost:4100' }]) {
      const res = await deciding.decide('GET', '/decisions/anything', { headers });
      expect(res.status).toBe(404);
      expect(res.json).toEqual(NOT_FOUND);
    }
    // The portal's cookie is the gateway's own: the proxy in front is told to forward the Cookie header without it.
    const cleaned = await deciding.decide('GET', '/decisions/anything', { headers: { cookie: 'gw_portal=a; theirs=1; __Host-gw_portal=b', 'x-gateway-clean': 'cookie' } });
    expect([cleaned.status, cleaned.headers['x-gateway-clean-cookie']]).toEqual([200, 'theirs=1']);
  });

  it('sends the portal\'s path on any other host to the same path on publicUrl (308), with the query', async () => {
    for (const [from, to] of [['/portal/keys?x=1', '/portal/keys?x=1'], ['/portal/', '/portal/'], ['/portal/api/login', '/portal/api/login']] as const) {
      const res = await gw.get(from, { headers: { host: 'api.example.com' } });
      expect(res.status, from).toBe(308);
      expect(res.headers.location).toBe(`${PUBLIC_URL}${to}`);
    }
    expect((await gw.post('/portal/api/login', {}, { headers: { host: 'api.example.com' } })).status).toBe(308);
    expect(gw.logs.join('')).toContain('"msg":"portal asked for on another host: sent to portal.publicUrl"');
  });

  it('serves every page as index.html and a missing asset as 404, with every header the contract lists', async () => {
    for (const page of ['/portal/', '/portal/keys', '/portal/verify-email?token=abc', '/portal/orgs/12/members']) {
      const res = await gw.get(page, { headers: PORTAL_HOST });
      expect(res.status, page).toBe(200);
      expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(res.headers['cache-control']).toBe('no-cache');
      expect(res.text).toContain('<html');
      expectPortalHeaders(res.headers);
    }
    const bare = await gw.get('/portal?x=1', { headers: PORTAL_HOST });
    expect([bare.status, bare.headers.location]).toEqual([308, '/portal/?x=1']);
    // The pages' own script is served as one (the pages are in portal/ now); a missing asset is no page.
    const script = await gw.get('/portal/app.js', { headers: PORTAL_HOST });
    expect([script.status, script.headers['content-type']]).toEqual([200, 'text/javascript; charset=utf-8']);
    const missing = await gw.get('/portal/no-such-file.js', { headers: PORTAL_HOST });
    expect(missing.status).toBe(404);
    expectPortalHeaders(missing.headers);
    const posted = await gw.post('/portal/keys', {}, { headers: PORTAL_HOST });
    expect([posted.status, posted.headers.allow]).toEqual([405, 'GET, HEAD']);
    expectPortalHeaders(posted.headers);
    // A path under {path}api/ that is no endpoint is JSON's 404, uncached.
    const api = await gw.get('/portal/api/nothing', { headers: { ...PORTAL_HOST, ...PAGE } });
    expect([api.status, api.json, api.headers['cache-control']]).toEqual([404, NOT_FOUND, 'no-store']);
    expectPortalHeaders(api.headers);
  });

  it('sends text gzipped to a client that accepts it, saying it varies by Accept-Encoding; an image as it is; HEAD as GET', async () => {
    const index = readFileSync(new URL('../../portal/index.html', import.meta.url));
    const zipped = await streamRequest(gw.url, 'GET', '/portal/keys', [], { ...PORTAL_HOST, 'accept-encoding': 'br, gzip;q=0.8' });
    expect([zipped.status, zipped.headers['content-encoding'], zipped.headers.vary]).toEqual([200, 'gzip', 'Accept-Encoding']);
    expect(gunzipSync(zipped.body).equals(index)).toBe(true);
    for (const encoding of [undefined, 'br, deflate']) {
      const plain = await streamRequest(gw.url, 'GET', '/portal/keys', [], { ...PORTAL_HOST, ...(encoding ? { 'accept-encoding': encoding } : {}) });
      expect([plain.status, plain.headers['content-encoding'], plain.headers.vary], String(encoding)).toEqual([200, undefined, 'Accept-Encoding']);
      expect(plain.body.equals(index)).toBe(true);
    }
    const png = await streamRequest(shared.url, 'GET', '/portal/logo', [], { 'accept-encoding': 'gzip' });
    expect([png.status, png.headers['content-type'], png.headers['content-encoding'], png.headers.vary]).toEqual([200, 'image/png', undefined, undefined]);
    expect(png.body.equals(readFileSync(pngLogo))).toBe(true);
    expect((await gw.request('HEAD', '/portal/keys', { headers: PORTAL_HOST })).status).toBe(200);
    // A dot inside a page's path is no extension: the page, not an asset's 404.
    expect((await gw.get('/portal/docs/v1.2/keys', { headers: PORTAL_HOST })).status).toBe(200);
  });

  it('serves the logo with a CSP under which an SVG runs no script', async () => {
    const res = await gw.get('/portal/logo', { headers: PORTAL_HOST });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('image/svg+xml');
    expect(res.headers['content-security-policy']).toBe("default-src 'none'; style-src 'unsafe-inline'");
    expect(res.headers['x-content-type-options']).toBe('nosniff');
  });

  it('answers {path}api/config to the pages, uncached, the product\'s name as given', async () => {
    const res = await gw.get('/portal/api/config', { headers: { ...PORTAL_HOST, ...PAGE } });
    expect(res.status).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    expectPortalHeaders(res.headers);
    expect(res.json).toMatchObject({
      product: { name: 'Acme <b>API</b>', accent: '#3b5bdb', logo: '/portal/logo', support: 'help@example.com', terms: null, privacy: null },
      docs: null, path: '/portal/', publicUrl: PUBLIC_URL, language: { available: ['fr', 'en'], default: 'fr', negotiate: false },
      features: { registration: true, billing: false, passkeys: false, magicLink: false, organizations: false, sso: false, providers: [] },
      signedIn: `${PUBLIC_URL}/portal/signed-in`, scopes: ['reports:read', 'reports:write'], returnTo: ['https://app.example.com/'],
    });
    // Without the pages' header, as from a form or another site's image: refused.
    expect((await gw.get('/portal/api/config', { headers: PORTAL_HOST })).status).toBe(403);
    // A HEAD is as safe as a GET: no Origin needed, but a foreign one refused.
    expect((await gw.request('HEAD', '/portal/api/config', { headers: { ...PORTAL_HOST, ...PAGE } })).status).toBe(200);
    expect((await gw.request('HEAD', '/portal/api/config', { headers: { ...PORTAL_HOST, ...PAGE, origin: 'https://evil.example' } })).status).toBe(403);
    // The operator's log says why, with the Origin and Sec-Fetch-Site that were sent.
    const lastRefusal = () => gw.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'portal request refused: not from the portal\'s pages').at(-1);
    expect(lastRefusal()).toMatchObject({ origin: 'https://evil.example' });
    await gw.post('/portal/api/login', {}, { headers: { ...PORTAL_HOST, ...PAGE, origin: PUBLIC_URL, 'sec-fetch-site': 'cross-site' } });
    expect(lastRefusal()).toMatchObject({ origin: PUBLIC_URL, site: 'cross-site' });
  });

  it('with sharedOrigin, serves the portal on every host beside the routes', async () => {
    const page = await shared.get('/portal/keys', { headers: { host: 'api.example.com' } });
    expect(page.status).toBe(200);
    expectPortalHeaders(page.headers);
    expect((await shared.get('/anything', { headers: PORTAL_HOST })).status).toBe(200);
  });

  it('never lets an upstream set, replace or clear one of the gateway\'s cookies', async () => {
    app.handle = (req, res) => {
      if (!req.url?.startsWith('/cookies')) return false;
      res.writeHead(200, { 'set-cookie': ['__Host-gw_portal=fixed; Path=/; Secure', 'gw_portal=x', 'gw_console=y; Path=/console/', 'gw_oidc=z', 'theirs=1; Path=/'] });
      res.end('{}');
      return true;
    };
    const res = await gw.get('/cookies');
    expect(res.headers['set-cookie']).toEqual(['theirs=1; Path=/']);
    app.handle = undefined;
    // Nor does the client's portal cookie reach an upstream.
    await gw.get('/seen', { headers: { cookie: 'gw_portal=a; theirs=1; __Host-gw_portal=b' } });
    expect(app.last('/seen')!.headers.cookie).toBe('theirs=1');
  });
});

function expectPortalHeaders(headers: Record<string, unknown>): void {
  expect(headers['content-security-policy']).toBe(CSP);
  expect(headers['referrer-policy']).toBe('no-referrer');
  expect(headers['x-content-type-options']).toBe('nosniff');
  expect(headers['cross-origin-opener-policy']).toBe('same-origin');
}
