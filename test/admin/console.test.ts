// The console's doors (CONTRACT §16), over HTTP: absent without an admin key, the admin key
// exchanged for an HttpOnly SameSite=Strict cookie, CSRF and Origin checked on every change,
// a strict CSP, sign-out ending the session, the cookie never forwarded upstream, and one-time
// sign-in links minted with the admin key.
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import { TICKET_MS } from '../../src/admin/console.js';
import { consoleAllowed } from '../../src/admin/consoleOrigin.js';
import { makeCertificate } from '../helpers/certificate.js';
import { docsExample } from '../helpers/docs.js';
import {
  ADMIN_KEY, closeSql, configProblems, describeWithServices, eventually, makeUser, startTestGateway, testClock, testConfig, testConfigFromYaml, throwawayDatabase,
  type TestGateway,
} from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { request } from '../helpers/http.js';
import { consoleSignIn } from '../helpers/adminApi.js';

describeWithServices('console: sign-in, cookie, CSRF', () => {
  let gw: TestGateway;
  let bare: TestGateway;
  let upstream: EchoUpstream;
  const apps: FastifyInstance[] = [];
  let url: string;
  const clock = testClock();

  async function listen(g: TestGateway): Promise<string> {
    const app = await buildAdminApp(g.services);
    apps.push(app);
    return app.listen({ host: '127.0.0.1', port: 0 });
  }

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    gw = await startTestGateway(testConfig({
      upstreams: { app: { url: upstream.url } },
      routes: [{ path: '/console', upstream: 'app', auth: 'none' }, { path: '/billing', upstream: 'app', mfa: 'required' }],
    }), { clock });
    bare = await startTestGateway(testConfig({ admin: { port: 0, apiKey: '' } }));
    url = await listen(gw);
  });
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
    await Promise.all([gw?.close(), bare?.close(), upstream?.close()]);
    await closeSql();
  });

  const signIn = () => consoleSignIn(url);

  it('is absent (404) when the admin listener has no key', async () => {
    const other = await listen(bare);
    expect((await request(other, 'GET', '/console/')).status).toBe(404);
    expect((await request(other, 'POST', '/console/session', { json: { key: '' } })).status).toBe(404);
  });

  it('is absent (404) off loopback without TLS, where the cookie would cross the network in clear', async () => {
    expect(consoleAllowed({ host: '127.0.0.1', apiKey: ADMIN_KEY })).toBe(true);
    expect(consoleAllowed({ host: '::1', apiKey: ADMIN_KEY })).toBe(true);
    expect(consoleAllowed({ host: 'localhost', apiKey: ADMIN_KEY })).toBe(true);
    expect(consoleAllowed({ host: '0.0.0.0', apiKey: ADMIN_KEY })).toBe(false);
    expect(consoleAllowed({ host: '10.0.0.5', apiKey: ADMIN_KEY })).toBe(false);
    expect(consoleAllowed({ host: '127.0.0.1', apiKey: '' })).toBe(false);
    // With TLS the cookie is Secure: any address (test/admin/adminTls.test.ts serves it so), but
    // on every address (a wildcard) only with admin.publicUrl: else the console has no origin (§26).
    const tls = { certFile: 'a.pem', keyFile: 'a-key.pem', http2: false, minVersion: 'TLSv1.2' } as const;
    expect(consoleAllowed({ host: '10.0.0.5', apiKey: ADMIN_KEY, tls })).toBe(true);
    for (const host of ['0.0.0.0', '::', '']) {
      expect(consoleAllowed({ host, apiKey: ADMIN_KEY, tls }), host).toBe(false);
      expect(consoleAllowed({ host, apiKey: ADMIN_KEY, tls, publicUrl: 'https://admin.example.com' }), host).toBe(true);
    }
    const open = await startTestGateway(testConfig({ admin: { host: '0.0.0.0', port: 0 } }));
    try {
      const app = await buildAdminApp(open.services);
      apps.push(app);
      expect((await app.inject({ method: 'GET', url: '/console/' })).statusCode).toBe(404);
      expect((await app.inject({ method: 'POST', url: '/console/tickets', headers: { authorization: `Bearer ${ADMIN_KEY}` } })).statusCode).toBe(404);
      // The admin API itself is still there, with the key.
      expect((await app.inject({ method: 'GET', url: '/admin/v1/users?limit=1', headers: { authorization: `Bearer ${ADMIN_KEY}` } })).statusCode).toBe(200);
    } finally {
      await open.close();
    }
  });

  it('is absent (404) on every address (0.0.0.0, ::) without admin.publicUrl, TLS or not: it has no origin', async () => {
    const cert = makeCertificate();
    const tls = { certFile: cert.certFile, keyFile: cert.keyFile };
    try {
      for (const host of ['0.0.0.0', '::']) {
        const open = await startTestGateway(testConfig({ admin: { host, port: 0, tls } }));
        try {
          const app = await buildAdminApp(open.services);
          apps.push(app);
          expect((await app.inject({ method: 'GET', url: '/console/' })).statusCode, host).toBe(404);
          expect((await app.inject({ method: 'POST', url: '/console/tickets', headers: { authorization: `Bearer ${ADMIN_KEY}` } })).statusCode, host).toBe(404);
        } finally {
          await open.close();
        }
      }
    } finally {
      cert.remove();
    }
  });

  it('takes admin.publicUrl (docs/console.md\'s example) as its origin: links name it, tickets need it', async () => {
    const config = testConfigFromYaml(docsExample('console', 'public-url'), { GATEWAY_ADMIN_KEY: ADMIN_KEY });
    expect(config.admin.publicUrl).toBe('https://gateway-admin.example.com');
    const own = await startTestGateway(config);
    try {
      const app = await buildAdminApp(own.services);
      apps.push(app);
      const local = await app.listen({ host: '127.0.0.1', port: 0 });
      const minted = await request(local, 'POST', '/console/tickets', { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
      expect(minted.json.url).toMatch(/^https:\/\/gateway-admin\.example\.com\/console\/#ticket=[\w-]{43}$/);
      const ticket = String(minted.json.url).split('#ticket=')[1];
      // The listener's own address is not the console's origin any more.
      expect((await request(local, 'POST', '/console/session', { headers: { origin: local }, json: { ticket } })).status).toBe(401);
      const session = await request(local, 'POST', '/console/session', { headers: { origin: 'https://gateway-admin.example.com' }, json: { ticket } });
      expect(session.status).toBe(200);
      // Browsers reach it over https://: the cookie is Secure though the proxy speaks HTTP to the loopback listener.
      expect(session.headers['set-cookie']).toEqual([expect.stringMatching(/^gw_console=[\w-]{43}; HttpOnly; Secure; SameSite=Strict; Path=\/console\/; Max-Age=28800$/)]);
    } finally {
      await own.close();
    }
  });

  it('refuses an admin.publicUrl that is not an origin, or http:// off loopback', () => {
    const problems = (publicUrl: string) => configProblems(`admin:\n  publicUrl: '${publicUrl}'\nupstreams:\n  app: { url: 'http://127.0.0.1:3000' }\n`);
    for (const good of ['https://admin.example.com', 'https://admin.example.com:9443/', 'http://127.0.0.1:9090', 'http://localhost:9090', 'http://[::1]:9090']) expect(problems(good), good).toEqual([]);
    for (const bad of ['http://admin.example.com', 'https://admin.example.com/console/', 'https://admin.example.com/?a=1', 'https://u:p@admin.example.com', 'admin.example.com']) {
      expect(problems(bad), bad).toEqual([expect.stringMatching(/^admin\.publicUrl: expected the console's origin/)]);
    }
  });

  it('serves its page with a strict CSP and nothing from elsewhere', async () => {
    const page = await request(url, 'GET', '/console/');
    expect(page.status).toBe(200);
    expect(page.headers['content-security-policy']).toContain("script-src 'self'");
    expect(page.headers['content-security-policy']).toContain("default-src 'none'");
    expect(page.text).not.toMatch(/https?:\/\//);
    expect((await request(url, 'GET', '/console/app.js')).headers['content-type']).toMatch(/^text\/javascript/);
  });

  it('refuses a wrong key and every API call without the session', async () => {
    expect((await request(url, 'POST', '/console/session', { json: { key: 'wrong' } })).json).toEqual({ error: 'Clé d’administration invalide' });
    expect((await request(url, 'GET', '/console/api/v1/users')).status).toBe(401);
    expect((await request(url, 'GET', '/console/api/health')).status).toBe(401);
  });

  it('gives an HttpOnly, SameSite=Strict cookie on /console/ for 8 hours; changes need the CSRF token and the same Origin', async () => {
    const res = await request(url, 'POST', '/console/session', { json: { key: ADMIN_KEY } });
    expect(res.headers['set-cookie']).toEqual([expect.stringMatching(/^gw_console=[\w-]{43}; HttpOnly; SameSite=Strict; Path=\/console\/; Max-Age=28800$/)]);
    const { cookie, csrf } = await signIn();
    const user = await makeUser(gw);
    expect((await request(url, 'GET', `/console/api/v1/users/${user.id}`, { headers: { cookie } })).json).toEqual(expect.objectContaining({ email: user.email }));
    const change = (headers: Record<string, string>) => request(url, 'PUT', `/console/api/v1/users/${user.id}/plan`, { headers: { cookie, ...headers }, json: { plan: 'pro' } });
    expect((await change({})).json).toEqual({ error: 'Jeton CSRF invalide' });
    expect((await change({ 'x-csrf-token': csrf, origin: 'http://evil.example' })).status).toBe(403);
    // The Origin is compared with the console's own, not with the Host the request names (DNS rebinding).
    const port = new URL(url).port;
    expect((await change({ 'x-csrf-token': csrf, host: `evil.example:${port}`, origin: `http://evil.example:${port}` })).status).toBe(403);
    expect((await change({ 'x-csrf-token': csrf, origin: `http://localhost:${port}` })).status).toBe(200);
    const done = await change({ 'x-csrf-token': csrf });
    expect(done.status).toBe(200);
    expect(done.json.plan).toBe('pro');
  });

  it('sign-out ends the session', async () => {
    const { cookie, csrf } = await signIn();
    expect((await request(url, 'GET', '/console/session', { headers: { cookie } })).status).toBe(200);
    expect((await request(url, 'DELETE', '/console/session', { headers: { cookie, 'x-csrf-token': csrf } })).status).toBe(200);
    expect((await request(url, 'GET', '/console/session', { headers: { cookie } })).status).toBe(401);
    expect((await request(url, 'GET', '/console/api/v1/users', { headers: { cookie } })).status).toBe(401);
  });

  it('shows the route table and a health summary with requests per route', async () => {
    const { cookie } = await signIn();
    expect((await request(url, 'GET', '/console/api/routes', { headers: { cookie } })).json.routes).toEqual([
      expect.objectContaining({ path: '/console', auth: 'none', mfa: 'optional', upstream: { name: 'app', url: upstream.url } }),
      expect.objectContaining({ path: '/billing', auth: 'required', mfa: 'required' }),
    ]);
    await gw.get('/console/x');
    const health = (await request(url, 'GET', '/console/api/health', { headers: { cookie } })).json;
    expect(health).toEqual(expect.objectContaining({ ready: true, checks: expect.objectContaining({ postgres: 'ok' }) }));
    expect(health.routes).toContainEqual(expect.objectContaining({ route: '/console', requests: expect.any(Number) }));
    // The operators' own calls (these tests', the console's) are not the gateway's traffic.
    expect(health.routes.filter((r: { route: string }) => /^\/(admin|console)\//.test(r.route))).toEqual([]);
  });

  it('counts the instances serving from the database, and sees one leave', async () => {
    const db = await throwawayDatabase({ migrated: true });
    const first = await startTestGateway(testConfig({ storage: db.storage }));
    const second = await startTestGateway(testConfig({ storage: db.storage }));
    let secondClosed = false;
    try {
      const own = await listen(first);
      const res = await request(own, 'POST', '/console/session', { json: { key: ADMIN_KEY } });
      const cookie = String(res.headers['set-cookie']).split(';')[0]!;
      const instances = async () => (await request(own, 'GET', '/console/api/health', { headers: { cookie } })).json.instances;
      expect(await instances()).toBe(2);
      await second.close();
      secondClosed = true;
      await eventually(async () => (await instances()) === 1);
    } finally {
      await Promise.all([first.close(), secondClosed ? undefined : second.close()]);
      await db.drop();
    }
  });

  it('the public listener never forwards the console cookie upstream', async () => {
    const { cookie } = await signIn();
    await gw.get('/console/page-cookie', { headers: { cookie: `theme=dark; ${cookie}` } });
    expect(upstream.last('page-cookie')!.headers.cookie).toBe('theme=dark');
  });

  describe('one-time sign-in links', () => {
    const mint = (headers: Record<string, string> = { authorization: `Bearer ${ADMIN_KEY}` }) => request(url, 'POST', '/console/tickets', { headers });
    const ticketOf = (link: string) => /#ticket=([\w-]+)$/.exec(link)![1]!;
    // The console's page POSTs from its own origin: a browser sends that Origin with every POST.
    const use = (ticket: string, headers: Record<string, string> = { origin: url }) => request(url, 'POST', '/console/session', { headers, json: { ticket } });

    it('are minted only with the admin key, for 10 minutes, the ticket in the fragment', async () => {
      expect((await mint({})).json).toEqual({ error: 'Clé d’administration invalide' });
      expect((await mint({ authorization: 'Bearer wrong' })).status).toBe(401);
      const res = await mint();
      expect(res.status).toBe(201);
      expect(res.json.url).toMatch(new RegExp(`^${url}/console/#ticket=[\\w-]{43}$`));
      expect(Date.parse(res.json.expires_at) - clock().getTime()).toBeGreaterThan(TICKET_MS - 5_000);
      expect(Date.parse(res.json.expires_at) - clock().getTime()).toBeLessThanOrEqual(TICKET_MS);
    });

    it('sign in once: the session cookie, then the same ticket is refused', async () => {
      const ticket = ticketOf((await mint()).json.url);
      const first = await use(ticket);
      expect(first.status).toBe(200);
      expect(first.headers['set-cookie']).toEqual([expect.stringMatching(/^gw_console=[\w-]{43}; HttpOnly; SameSite=Strict; Path=\/console\/; Max-Age=28800$/)]);
      const cookie = String(first.headers['set-cookie']).split(';')[0]!;
      expect((await request(url, 'GET', '/console/api/routes', { headers: { cookie } })).status).toBe(200);
      expect((await use(ticket)).json).toEqual({ error: 'Lien de connexion invalide, déjà utilisé ou expiré' });
      expect((await use('made-up')).status).toBe(401);
    });

    it('refuse a ticket from another Origin (and keep it for the console\'s own page)', async () => {
      const ticket = ticketOf((await mint()).json.url);
      expect((await use(ticket, { origin: 'http://evil.example' })).status).toBe(401);
      expect((await use(ticket)).status).toBe(200);
    });

    // CONTRACT §26: the link is built from the console's origin, never from Host (a request's Host
    // is whatever its sender wrote: a link naming evil.example hands the ticket to its page).
    it('are built from the console\'s origin, whatever Host the minting request carried', async () => {
      const res = await mint({ authorization: `Bearer ${ADMIN_KEY}`, host: 'evil.example' });
      expect(res.status).toBe(201);
      expect(res.json.url).toMatch(new RegExp(`^${url}/console/#ticket=[\\w-]{43}$`));
    });

    it('need an Origin equal to the console\'s: none, or one that follows Host, is refused and the ticket kept', async () => {
      const ticket = ticketOf((await mint()).json.url);
      const refused = { status: 401, json: { error: 'Lien de connexion invalide, déjà utilisé ou expiré' } };
      expect(await use(ticket, {})).toMatchObject(refused);
      // DNS rebinding: a page on evil.example resolved to 127.0.0.1 sends its own Host and Origin.
      const port = new URL(url).port;
      expect(await use(ticket, { host: `evil.example:${port}`, origin: `http://evil.example:${port}` })).toMatchObject(refused);
      expect(await use(ticket, { origin: `https://127.0.0.1:${port}` })).toMatchObject(refused);
      expect((await use(ticket)).status).toBe(200);
    });

    it('take 127.0.0.1, localhost and [::1] as one origin on a loopback listener', async () => {
      const port = new URL(url).port;
      for (const host of ['localhost', '[::1]', '127.0.0.1']) {
        const ticket = ticketOf((await mint()).json.url);
        expect((await use(ticket, { origin: `http://${host}:${port}` })).status, host).toBe(200);
      }
      // Another port is another origin.
      const ticket = ticketOf((await mint()).json.url);
      expect((await use(ticket, { origin: `http://localhost:${Number(port) + 1}` })).status).toBe(401);
    });

    it('refuse a ticket past its 10 minutes', async () => {
      const ticket = ticketOf((await mint()).json.url);
      clock.advance(TICKET_MS + 1_000);
      expect((await use(ticket)).status).toBe(401);
    });
  });
});
