// A real browser against the gateway (CONTRACT §10): headless Chromium loads a page from another
// origin (test/browser/page.html, served by a small static server) that registers, logs in, calls a
// guarded route and reads the 401 and 429 bodies through CORS, and opens a WebSocket with
// ?access_token=. What the browser enforces (preflights, CORS on answers, the WebSocket handshake)
// is enforced by Chromium itself here, not by a client written to agree with the gateway.
import path from 'node:path';
import type { Page } from 'puppeteer-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeWithBrowser, launchBrowser, serveFile, type StaticSite, type TestBrowser } from '../helpers/browser.js';
import { closeSql, marker, newEmail, newPassword, sql, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { startWsUpstream, type WsUpstream } from '../helpers/wsUpstream.js';

interface Answer { status: number; body: Record<string, unknown>; requestId: string | null }
/** What page.html puts on window.app (see there). */
interface PageApp {
  call(method: string, path: string, options?: { token?: string; body?: unknown }): Promise<Answer | { refused: string }>;
  openSocket(path: string, token: string): Promise<{ index: number; protocol: string } | { closed: { code: number; reason: string } }>;
  exchange(index: number, text: string): Promise<string>;
  closed(index: number): Promise<{ code: number; reason: string }>;
}
type Args = Parameters<PageApp['call']>;

const PAGE = path.join(import.meta.dirname, 'page.html');

describeWithBrowser('a page on another origin, in Chromium', () => {
  let upstream: EchoUpstream;
  let wsUpstream: WsUpstream;
  let site: StaticSite;
  let elsewhere: StaticSite;
  let gw: TestGateway;
  let chromium: TestBrowser;
  let page: Page;

  const call = (...args: Args) => page.evaluate((...a: Args) => (globalThis as unknown as { app: PageApp }).app.call(...a), ...args) as Promise<Answer & { refused?: string }>;

  beforeAll(async () => {
    [upstream, wsUpstream, site, elsewhere] = await Promise.all([startEchoUpstream(), startWsUpstream(), serveFile(PAGE), serveFile(PAGE)]);
    gw = await startTestGateway(testConfig({
      cors: { origins: [site.origin] },
      upstreams: { app: { url: upstream.url }, live: { url: wsUpstream.url } },
      routes: [
        { path: '/api/v1/races', upstream: 'app', dailyLimit: true },
        { path: '/api/v1/stream', upstream: 'live', websocket: true },
      ],
    }));
    chromium = await launchBrowser();
    page = await chromium.browser.newPage();
    await page.goto(`${site.origin}/?gateway=${encodeURIComponent(gw.url)}`);
  }, 60_000);

  afterAll(async () => {
    await chromium?.close();
    await gw?.close();
    await Promise.all([upstream?.close(), wsUpstream?.close(), site?.close(), elsewhere?.close()]);
    await closeSql();
  });

  /** Registers and logs in through the page; the access token. */
  async function signUp(email: string, password: string): Promise<string> {
    const registered = await call('POST', '/api/v1/auth/register', { body: { email, password } });
    expect(registered.status).toBe(201);
    const login = await call('POST', '/api/v1/auth/login', { body: { email, password } });
    expect(login.status).toBe(200);
    return login.body.access_token as string;
  }

  it('registers, logs in, calls a guarded route, and reads the 401 and the 429 the gateway answers', async () => {
    const email = newEmail('browser');
    const token = await signUp(email, newPassword());
    const m = marker();

    const anonymous = await call('GET', `/api/v1/races/${m}`);
    expect(anonymous).toMatchObject({ status: 401, body: { error: 'Token invalide ou expiré' } });
    const allowed = await call('GET', `/api/v1/races/${m}`, { token });
    expect(allowed.status).toBe(200);
    // The echo upstream's body: what the gateway told it, read by the page.
    expect((allowed.body.headers as Record<string, string>)['x-user-email']).toBe(email);
    expect(allowed.requestId).toMatch(/^[0-9a-f-]{36}$/); // exposed by cors.exposeHeaders
    const limited = await call('GET', `/api/v1/races/${m}`, { token });
    expect(limited).toMatchObject({ status: 429, body: { error: 'Limite quotidienne atteinte (plan free: 1 course/jour)', upgrade_url: '/api/v1/subscription/upgrade' } });
    // Chromium sent preflights (Authorization is not a simple header); none reached the upstream.
    expect(upstream.hits.filter((h) => h.path.includes(m)).map((h) => h.method)).toEqual(['GET']);
  });

  it('opens a WebSocket with ?access_token=, relays messages, and is closed with 1008 when the user is deactivated', async () => {
    const email = newEmail('browser-ws');
    const token = await signUp(email, newPassword());
    const m = marker();
    const socket = await page.evaluate((p: string, t: string) => (globalThis as unknown as { app: PageApp }).app.openSocket(p, t), `/api/v1/stream/${m}`, token);
    if (!('index' in socket)) throw new Error(`the socket did not open: ${JSON.stringify(socket)}`);
    expect(socket.protocol).toBe('chat.v1');
    const reply = await page.evaluate((i: number) => (globalThis as unknown as { app: PageApp }).app.exchange(i, 'from the page'), socket.index);
    expect(reply).toBe('echo:from the page');
    const seen = wsUpstream.last(m)!;
    expect(seen.url).toBe(`/api/v1/stream/${m}`);
    expect(seen.headers['x-user-email']).toBe(email);
    expect(seen.headers.origin).toBe(site.origin);

    await sql('UPDATE users SET is_active = 0 WHERE lower(email) = lower($1)', [email]);
    const closed = await page.evaluate((i: number) => (globalThis as unknown as { app: PageApp }).app.closed(i), socket.index);
    expect(closed).toEqual({ code: 1008, reason: 'Utilisateur introuvable' });

    // And without a valid token the browser never gets a socket.
    const refused = await page.evaluate((p: string) => (globalThis as unknown as { app: PageApp }).app.openSocket(p, 'not-a-token'), `/api/v1/stream/${marker()}`);
    expect(refused).toEqual({ closed: { code: 1006, reason: '' } });
  });

  it('keeps the answers from a page on an origin the gateway does not allow', async () => {
    const other = await chromium.browser.newPage();
    try {
      await other.goto(`${elsewhere.origin}/?gateway=${encodeURIComponent(gw.url)}`);
      const attempt = await other.evaluate(() => (globalThis as unknown as { app: PageApp }).app.call('POST', '/api/v1/auth/login', { body: { email: 'x@example.test', password: 'whatever-1' } }));
      expect(attempt).toEqual({ refused: 'TypeError: Failed to fetch' });
    } finally {
      await other.close();
    }
  });
});
