// What the console serves and reads back (src/admin/console.ts), exactly: each file of its pages
// with its type and security headers, the route table and the health summary's counts field by
// field, a session's and a sign-in link's lifetimes to the millisecond, sessions and links kept
// apart from each other, and the lines a refused link writes to the log.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { TICKET_MS } from '../../src/admin/console.js';
import { ADMIN_KEY, closeSql, describeWithServices, loggedLines, makeUser, startDecidingGateway, testClock, type TestGateway } from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { request } from '../helpers/http.js';
import { consoleSignIn, listenAdmin } from '../helpers/adminApi.js';
import { failingStatements } from '../helpers/failingDatabase.js';

const SESSION_MS = 8 * 3600_000;
const HTML = 'text/html; charset=utf-8';
const JS = 'text/javascript; charset=utf-8';
const CSS = 'text/css; charset=utf-8';
const installed = createRequire(import.meta.url);
const page = (name: string) => new URL(`../../console/${name}`, import.meta.url);
/** Every file the console's pages load, where it comes from, and the type it is served as. */
const FILES: Array<[string, URL | string, string]> = [
  ['', page('index.html'), HTML],
  ['operator.html', page('operator.html'), HTML],
  ...['app.js', 'users.js', 'overview.js', 'format.js', 'orgs.js', 'billing.js', 'roles.js', 'operators.js', 'operator.js'].map((name): [string, URL, string] => [name, page(name), JS]),
  ['app.css', page('app.css'), CSS],
  ['uplot.js', installed.resolve('uplot/dist/uPlot.iife.min.js'), JS],
  ['uplot.css', installed.resolve('uplot/dist/uPlot.min.css'), CSS],
];

describeWithServices('console: what it serves, exactly', () => {
  let gw: TestGateway;
  let upstream: EchoUpstream;
  let admin: FastifyInstance;
  let url: string;
  const clock = testClock();

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    gw = await startDecidingGateway({
      upstreams: { app: { url: upstream.url } },
      routes: [
        { path: '/shop', upstream: 'app', auth: 'none' },
        { path: '/reports', upstream: 'app', methods: ['GET'], plans: ['pro'], dailyLimit: true, rateLimit: true },
        { path: '/checks', auth: 'required' }, // decided for a proxy in front, never forwarded
      ],
    }, { clock });
    ({ app: admin, url } = await listenAdmin(gw));
  });
  afterAll(async () => {
    await admin?.close();
    await Promise.all([gw?.close(), upstream?.close()]);
    await closeSql();
  });

  const signIn = () => consoleSignIn(url);
  const mint = async () => /#ticket=([\w-]+)$/.exec((await request(url, 'POST', '/console/tickets', { headers: { authorization: `Bearer ${ADMIN_KEY}` } })).json.url)![1]!;
  const redeem = (ticket: string) => request(url, 'POST', '/console/session', { headers: { origin: url }, json: { ticket } });
  const session = (cookie: string) => request(url, 'GET', '/console/session', { headers: { cookie } });

  it.each(FILES)('serves /console/%s as it is on disk, with its type and the security headers', async (name, path, type) => {
    const res = await request(url, 'GET', `/console/${name}`);
    expect(res.status).toBe(200);
    expect(res.text).toBe(await readFile(path, 'utf8'));
    expect(res.headers).toMatchObject({
      'content-type': type,
      'content-security-policy': "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
      'x-content-type-options': 'nosniff', 'cache-control': 'no-store', 'referrer-policy': 'no-referrer',
    });
  });

  it('answers nothing behind the session without one; signing out clears the cookie with the attributes it was set with', async () => {
    for (const path of ['/console/api/routes', '/console/api/health', '/console/api/v1/users']) {
      expect(await request(url, 'GET', path), path).toMatchObject({ status: 401, json: { error: 'Clé d’administration invalide' } });
    }
    const { cookie, csrf } = await signIn();
    const out = await request(url, 'DELETE', '/console/session', { headers: { cookie, 'x-csrf-token': csrf } });
    expect(out.headers['set-cookie']).toEqual(['gw_console=; HttpOnly; SameSite=Strict; Path=/console/; Max-Age=0']);
    // Without a session (a second click, an expired one): the same answer.
    const again = await request(url, 'DELETE', '/console/session', { headers: { cookie } });
    expect([again.status, again.headers['set-cookie']]).toEqual([200, ['gw_console=; HttpOnly; SameSite=Strict; Path=/console/; Max-Age=0']]);
  });

  it('lists each route as configured: null where a route sets no methods, plans or upstream', async () => {
    const { cookie } = await signIn();
    expect((await request(url, 'GET', '/console/api/routes', { headers: { cookie } })).json).toEqual({
      routes: [
        { path: '/shop', methods: null, websocket: false, auth: 'none', mfa: 'optional', plans: null, daily_limit: false, rate_limit: false, upstream: { name: 'app', url: upstream.url } },
        { path: '/reports', methods: ['GET'], websocket: false, auth: 'required', mfa: 'optional', plans: ['pro'], daily_limit: true, rate_limit: true, upstream: { name: 'app', url: upstream.url } },
        { path: '/checks', methods: null, websocket: false, auth: 'required', mfa: 'optional', plans: null, daily_limit: false, rate_limit: false, upstream: null },
      ],
    });
  });

  it('counts each route\'s requests and the gateway\'s refusals (401, 403, 429; not a 405), by route in order; not the operators\' own calls', async () => {
    const { cookie } = await signIn();
    const user = await makeUser(gw, { plan: 'free' });
    const health = async () => (await request(url, 'GET', '/console/api/health', { headers: { cookie } })).json;
    const before = new Map<string, { requests: number; denials: number }>((await health()).routes.map((r: { route: string; requests: number; denials: number }) => [r.route, r]));
    const counted = (route: string) => before.get(route) ?? { requests: 0, denials: 0 };
    expect((await gw.get('/shop/a')).status).toBe(200);
    expect((await gw.request('POST', '/reports')).status).toBe(405);
    expect((await gw.get('/reports')).status).toBe(401);
    expect((await gw.get('/reports', { headers: { authorization: `Bearer ${user.access}` } })).status).toBe(403);
    expect((await request(url, 'GET', `/admin/v1/users/${user.id}`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } })).status).toBe(200);
    const after = await health();
    expect(after).toMatchObject({ ready: true, stripe: null });
    const rows = after.routes.filter((r: { route: string }) => r.route === '/shop' || r.route === '/reports');
    expect(rows).toEqual([
      { route: '/reports', requests: counted('/reports').requests + 3, denials: counted('/reports').denials + 2 },
      { route: '/shop', requests: counted('/shop').requests + 1, denials: counted('/shop').denials },
    ]);
    const names = after.routes.map((r: { route: string }) => r.route);
    expect(names).toEqual([...names].sort((a, b) => a.localeCompare(b)));
    expect(names.filter((route: string) => route.includes('admin') || route.includes('console'))).toEqual([]);
  });

  it('says so while Postgres does not answer: not ready, and how many instances serve unknown (null)', async () => {
    const { cookie } = await signIn();
    const restore = failingStatements(gw.services.db, /^SELECT (1$|count\(\*\)::int AS n FROM pg_stat_activity)/, () => new Error('Connection terminated unexpectedly'));
    try {
      expect((await request(url, 'GET', '/console/api/health', { headers: { cookie } })).json).toMatchObject({ ready: false, checks: { postgres: 'down' }, instances: null });
    } finally {
      restore();
    }
    expect((await request(url, 'GET', '/console/api/health', { headers: { cookie } })).json).toMatchObject({ ready: true, checks: { postgres: 'ok' }, instances: expect.any(Number) });
  });

  it('keeps a session 8 hours to the millisecond, and a sign-in link 10 minutes', async () => {
    clock.freeze();
    try {
      const { cookie, csrf } = await signIn();
      expect((await session(cookie)).json).toEqual({ csrf, expires_at: new Date(clock().getTime() + SESSION_MS).toISOString() });
      clock.advance(SESSION_MS - 1);
      expect((await session(cookie)).status).toBe(200);
      clock.advance(1);
      expect((await session(cookie)).status).toBe(401);
      const [inTime, late] = [await mint(), await mint()];
      clock.advance(TICKET_MS - 1);
      expect((await redeem(inTime)).status).toBe(200);
      clock.advance(1);
      expect(await redeem(late)).toMatchObject({ status: 401, json: { error: 'Lien de connexion invalide, déjà utilisé ou expiré' } });
    } finally {
      clock.thaw();
    }
  });

  it('keeps every session and every link apart: each its own CSRF token, each link redeemed once by itself', async () => {
    const [first, second] = [await signIn(), await signIn()];
    const user = await makeUser(gw);
    const change = (who: { cookie: string }, csrf: string) =>
      request(url, 'PUT', `/console/api/v1/users/${user.id}/active`, { headers: { cookie: who.cookie, 'x-csrf-token': csrf }, json: { active: true } });
    expect((await change(first, second.csrf)).json).toEqual({ error: 'Jeton CSRF invalide' });
    expect((await change(second, first.csrf)).status).toBe(403);
    expect((await change(first, first.csrf)).headers['content-type']).toBe('application/json; charset=utf-8');
    expect((await change(second, second.csrf)).status).toBe(200);
    const [a, b] = [await mint(), await mint()];
    expect((await redeem(a)).status).toBe(200);
    expect((await redeem(b)).status).toBe(200);
    // A link is no session, whatever it is presented as.
    expect((await session(`gw_console=${await mint()}`)).status).toBe(401);
  });

  it('acts on the admin API with the operator\'s own address and user agent, as the audit shows', async () => {
    // On ::1, so that the address the audit shows is the operator's, not the in-process call's default 127.0.0.1.
    const { app: v6, url: at } = await listenAdmin(gw, '::1');
    try {
      const json = { 'content-type': 'application/json' };
      const signedIn = await fetch(`${at}/console/session`, { method: 'POST', headers: json, body: JSON.stringify({ key: ADMIN_KEY }) });
      const cookie = signedIn.headers.getSetCookie()[0]!.split(';')[0]!;
      const user = await makeUser(gw);
      const headers = { ...json, cookie, 'x-csrf-token': (await signedIn.json()).csrf, 'user-agent': 'console-test/1' };
      const changed = await fetch(`${at}/console/api/v1/users/${user.id}/active`, { method: 'PUT', headers, body: JSON.stringify({ active: false }) });
      expect([changed.status, (await changed.json()).active]).toEqual([200, false]);
      expect(await gw.services.db.query("SELECT actor, ip, user_agent FROM audit_events WHERE user_id = $1 AND type = 'admin.active_changed'", [user.id]))
        .toEqual([{ actor: 'console', ip: '::1', user_agent: 'console-test/1' }]);
    } finally {
      await v6.close();
    }
  });

  it('says in the log why a link was refused: another origin (which, and the console\'s), or unknown, spent or expired', async () => {
    const ticket = await mint();
    expect((await request(url, 'POST', '/console/session', { headers: { origin: 'http://evil.example' }, json: { ticket } })).status).toBe(401);
    expect((await request(url, 'POST', '/console/session', { json: { ticket } })).status).toBe(401);
    const other = loggedLines(gw, 'console sign-in refused: a sign-in link redeemed from another origin than the console\'s');
    expect(other.slice(-2).map((line) => [line.level, line.origin, line.expected])).toEqual([[40, 'http://evil.example', url], [40, null, url]]);
    const before = loggedLines(gw, 'console sign-in refused: unknown, spent or expired sign-in link').length;
    expect((await redeem('made-up')).status).toBe(401);
    expect(loggedLines(gw, 'console sign-in refused: unknown, spent or expired sign-in link').map((line) => line.level)).toEqual([...Array(before).fill(40), 40]);
  });
});
