// The portal's sessions (CONTRACT §30) on real gateways: the CSRF rule of {path}api/ (a cross-site
// form post, no header, another Origin, Sec-Fetch-Site cross-site), the cookie's attributes over
// http on loopback and over https behind a trusted proxy, rotation through the cookie with two
// refreshes at once on two instances (one wins, the other is a reuse), sign-out then replay, the
// audit's via, mails leading to the portal, and return_to held to its exact list.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeWithServices, makeUser, sql, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';
import { startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';

const PUBLIC_URL = 'http://localhost:4100';
const PAGE = { host: 'localhost:4100', origin: PUBLIC_URL, 'x-gateway-portal': '1' };
const CSRF = { error: 'Jeton CSRF invalide' };
const HTTPS_URL = 'https://portal.example.test';
const HTTPS_PAGE = { 'x-forwarded-host': 'portal.example.test', 'x-forwarded-proto': 'https', origin: HTTPS_URL, 'x-gateway-portal': '1', 'sec-fetch-site': 'same-origin' };

/** The cookie a Set-Cookie line sets: its value and attributes. */
function setCookie(headers: Record<string, unknown>, name: string): { value: string; line: string } | undefined {
  const lines = (headers['set-cookie'] as string[] | undefined) ?? [];
  const line = lines.find((l) => l.startsWith(`${name}=`));
  return line === undefined ? undefined : { value: line.slice(name.length + 1).split(';', 1)[0]!, line };
}

describeWithServices('the portal\'s sessions (CONTRACT §30)', () => {
  let smtp: SmtpCatcher;
  let a: TestGateway;
  let b: TestGateway;
  let secure: TestGateway;

  beforeAll(async () => {
    smtp = await startSmtpCatcher();
    const portal = { enabled: true, publicUrl: PUBLIC_URL, product: { name: 'Acme' } };
    const config = testConfig({
      mail: { smtp: smtp.url, from: 'Gateway <no-reply@example.test>' },
      auth: {
        magicLink: {},
        oidc: { publicUrl: PUBLIC_URL, returnTo: ['https://app.example.com/'], providers: { gh: { kind: 'github', clientId: 'c', clientSecret: 's', authorizeUrl: 'http://127.0.0.1:9/login/oauth/authorize', apiBase: 'http://127.0.0.1:9/api' } } },
      },
      portal,
    });
    [a, b, secure] = await Promise.all([
      startTestGateway(config), startTestGateway(config),
      startTestGateway(testConfig({ server: { trustProxy: true }, portal: { ...portal, publicUrl: HTTPS_URL } })),
    ]);
  });
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close(), secure?.close()]);
    await smtp?.close();
  });

  const signIn = async (gw: TestGateway, headers: Record<string, string> = PAGE) => {
    const user = await makeUser(gw);
    const res = await gw.post('/portal/api/login', { email: user.email, password: user.password }, { headers });
    return { user, res };
  };

  it('refuses every request that is not from the portal\'s pages with 403 Jeton CSRF invalide, sign-in included', async () => {
    const user = await makeUser(a);
    const body = { email: user.email, password: user.password };
    const { 'x-gateway-portal': _header, ...withoutHeader } = PAGE;
    const { origin: _origin, ...withoutOrigin } = PAGE;
    const attempts: Array<[string, Record<string, string>]> = [
      ['without the header', withoutHeader],
      ['from another origin', { ...PAGE, origin: 'https://evil.example' }],
      ['without Origin', withoutOrigin],
      ['cross-site by Sec-Fetch-Site', { ...PAGE, 'sec-fetch-site': 'cross-site' }],
      ['same-site but not same-origin', { ...PAGE, 'sec-fetch-site': 'same-site' }],
    ];
    for (const [why, headers] of attempts) {
      const res = await a.post('/portal/api/login', body, { headers });
      expect([res.status, res.json, res.headers['set-cookie']], why).toEqual([403, CSRF, undefined]);
      expect(res.headers['cache-control']).toBe('no-store');
    }
    // A form another site posts: no custom header, its own Origin.
    const form = await a.request('POST', '/portal/api/login', {
      body: `email=${encodeURIComponent(user.email)}&password=${encodeURIComponent(user.password)}`,
      headers: { host: PAGE.host, origin: 'https://evil.example', 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'cross-site' },
    });
    expect([form.status, form.json]).toEqual([403, CSRF]);
    const codes = await a.post('/portal/api/logout', {}, { headers: { ...withoutHeader, accept: 'application/problem+json' } });
    expect(codes.status).toBe(403);
  });

  it('signs in as /api/v1/auth/login does, the refresh token in an HttpOnly, SameSite=Strict, host-only cookie over http on loopback', async () => {
    const { res } = await signIn(a, { ...PAGE, 'sec-fetch-site': 'same-origin' });
    expect(res.status, res.text).toBe(200);
    expect(res.json).toMatchObject({ token_type: 'Bearer', plan: 'free' });
    expect(res.json.access_token).toEqual(expect.any(String));
    expect(res.json).not.toHaveProperty('refresh_token');
    const cookie = setCookie(res.headers, 'gw_portal')!;
    expect(cookie.line).toBe(`gw_portal=${cookie.value}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${30 * 86400}`);
    // No logo configured: none is served.
    expect((await a.get('/portal/logo', { headers: { host: PAGE.host } })).status).toBe(404);
    const wrong = await a.post('/portal/api/login', { email: 'nobody@example.test', password: 'whatever-password' }, { headers: PAGE });
    expect([wrong.status, wrong.json]).toEqual([401, { error: 'Identifiants invalides' }]);
    // The spec's own answer to an email no account can hold, as under /api/v1/auth: never the generic 400.
    const nul = await a.post('/portal/api/login', { email: 'nobody\u0000@example.test', password: 'whatever-password' }, { headers: PAGE });
    expect([nul.status, nul.json]).toEqual([401, { error: 'Identifiants invalides' }]);
  });

  it('over https behind a trusted proxy, names it __Host-gw_portal and makes it Secure', async () => {
    const { res } = await signIn(secure, HTTPS_PAGE);
    expect(res.status, res.text).toBe(200);
    const cookie = setCookie(res.headers, '__Host-gw_portal')!;
    expect(cookie.line).toBe(`__Host-gw_portal=${cookie.value}; HttpOnly; Secure; SameSite=Strict; Path=/; Max-Age=${30 * 86400}`);
    // The refresh reads that cookie, and no other.
    const refreshed = await secure.post('/portal/api/refresh', {}, { headers: { ...HTTPS_PAGE, cookie: `gw_portal=${cookie.value}` } });
    expect(refreshed.status).toBe(400);
    const rotated = await secure.post('/portal/api/refresh', {}, { headers: { ...HTTPS_PAGE, cookie: `__Host-gw_portal=${cookie.value}` } });
    expect(rotated.status).toBe(200);
  });

  it('rotates through the cookie alone: of two refreshes at once on two instances one wins, the other is a reuse', async () => {
    const { user, res } = await signIn(a);
    const first = setCookie(res.headers, 'gw_portal')!.value;
    // A token in the body is never read: without the cookie, there is none.
    const fromBody = await a.post('/portal/api/refresh', { refresh_token: first }, { headers: PAGE });
    expect([fromBody.status, fromBody.json]).toEqual([400, { error: 'refresh_token manquant' }]);
    // Nor does any other endpoint read the cookie.
    expect((await a.post('/api/v1/auth/refresh', {}, { headers: { cookie: `gw_portal=${first}` } })).status).toBe(400);
    const once = await a.post('/portal/api/refresh', {}, { headers: { ...PAGE, cookie: `gw_portal=${first}` } });
    expect(once.status).toBe(200);
    expect(once.json).not.toHaveProperty('refresh_token');
    const second = setCookie(once.headers, 'gw_portal')!.value;
    expect(second).not.toBe(first);
    const both = await Promise.all([a, b].map((gw) => gw.post('/portal/api/refresh', {}, { headers: { ...PAGE, cookie: `gw_portal=${second}` } })));
    expect(both.map((r) => r.status).sort()).toEqual([200, 401]);
    const lost = both.find((r) => r.status === 401)!;
    expect(lost.json).toEqual({ error: 'Refresh token invalide, révoqué ou expiré' });
    expect(setCookie(lost.headers, 'gw_portal')).toBeUndefined();
    const reuses = await sql<{ n: number }>("SELECT count(*)::int AS n FROM audit_events WHERE user_id = $1 AND type = 'refresh.reuse_detected'", [user.id]);
    expect(reuses[0]!.n).toBe(1);
  });

  it('signs out: the session\'s token revoked, the cookie cleared, and the cookie replayed afterwards refused', async () => {
    const { user, res } = await signIn(a);
    const token = setCookie(res.headers, 'gw_portal')!.value;
    const out = await a.post('/portal/api/logout', {}, { headers: { ...PAGE, cookie: `gw_portal=${token}` } });
    expect(out.status).toBe(200);
    expect(setCookie(out.headers, 'gw_portal')!.line).toBe('gw_portal=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0');
    const replay = await b.post('/portal/api/refresh', {}, { headers: { ...PAGE, cookie: `gw_portal=${token}` } });
    expect([replay.status, replay.json]).toEqual([401, { error: 'Refresh token invalide, révoqué ou expiré' }]);
    const logout = await sql<{ data: Record<string, unknown> }>("SELECT data FROM audit_events WHERE user_id = $1 AND type = 'logout'", [user.id]);
    expect(logout.map((r) => r.data)).toEqual([{ via: 'portal' }]);
  });

  it('records portal actions with data.via "portal", and the API\'s without', async () => {
    const { user } = await signIn(a);
    const rows = await sql<{ data: Record<string, unknown> }>("SELECT data FROM audit_events WHERE user_id = $1 AND type = 'login.succeeded' ORDER BY id", [user.id]);
    // makeUser signed in through the API first, then the portal.
    expect(rows.map((r) => r.data.via)).toEqual([undefined, 'portal']);
  });

  it('changes the password through the portal with the bearer, the new pair\'s refresh token in the cookie', async () => {
    const { user, res } = await signIn(a);
    const changed = await a.post('/portal/api/password/change', { current_password: user.password, new_password: `${user.password}-new` }, {
      headers: { ...PAGE, authorization: `Bearer ${res.json.access_token}` },
    });
    expect(changed.status, changed.text).toBe(200);
    expect(changed.json).not.toHaveProperty('refresh_token');
    expect(setCookie(changed.headers, 'gw_portal')?.value).toEqual(expect.any(String));
  });

  it('sends mail links to the portal\'s pages when mail leaves them out', async () => {
    const user = await makeUser(a);
    // Registering sent the verification link.
    expect((await smtp.waitFor(user.email, 1)).link).toMatch(new RegExp(`^${PUBLIC_URL}/portal/verify-email\\?token=[\\w-]+$`));
    expect((await a.post('/api/v1/auth/password/forgot', { email: user.email })).status).toBe(202);
    expect((await smtp.waitFor(user.email, 2)).link).toMatch(new RegExp(`^${PUBLIC_URL}/portal/reset-password\\?token=[\\w-]+$`));
    expect((await a.post('/portal/api/magic-link/verify', { token: 'nope' }, { headers: PAGE })).status).toBe(400);
    expect((await a.post('/api/v1/auth/magic-link', { email: user.email })).status).toBe(202);
    expect((await smtp.waitFor(user.email, 3)).link).toMatch(new RegExp(`^${PUBLIC_URL}/portal/magic\\?token=[\\w-]+$`));
  });

  it('lets a provider sign-in return to the portal\'s signed-in page, and nowhere else it is not listed', async () => {
    const challenge = 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM';
    const start = (returnTo: string) => a.get(`/api/v1/auth/oidc/gh/start?return_to=${encodeURIComponent(returnTo)}&code_challenge=${challenge}`, { headers: { host: PAGE.host } });
    const ok = await start(`${PUBLIC_URL}/portal/signed-in`);
    expect(ok.status, ok.text).toBe(302);
    // The sign-in cookie reaches the portal's exchange under portal.path.
    expect(setCookie(ok.headers, 'gw_oidc')!.line).toContain('Path=/;');
    for (const evil of ['https://evil.example/', `${PUBLIC_URL}/portal/signed-in/../../evil`, `${PUBLIC_URL}/portal/signed-in?next=https://evil.example`, `${PUBLIC_URL}/portal/`]) {
      const res = await start(evil);
      expect([res.status, res.json], evil).toEqual([400, { error: 'Redirection non autorisée' }]);
    }
    const config = await a.get('/portal/api/config', { headers: PAGE });
    expect(config.json.features.providers).toEqual([{ id: 'gh', name: 'GitHub' }]);
  });
});
