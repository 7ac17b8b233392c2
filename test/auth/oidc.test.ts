// Sign in with an identity provider (CONTRACT §15) against a real OpenID Connect provider
// (oidc-provider on loopback, test/helpers/oidcProvider.ts), on two gateway instances sharing one
// database: the browser's redirects are followed here by hand, the start on one instance and the
// callback or the exchange on the other. What is asserted is what a browser and an application
// see: statuses, Location, cookies, fragments, bodies, and the rows left behind.
import { randomBytes, randomUUID } from 'node:crypto';
import { authenticator } from '../helpers/totp.js';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { s256 } from '../../src/auth/providers/oidc.js';
import { sha256Hex } from '../../src/credentials/digest.js';
import {
  bearer, claims, closeSql, describeWithServices, makeUser, marker, newEmail, newPassword, sql, startTestGateway, startTwoGateways, testClock, testConfig,
  type TestGateway,
} from '../helpers/gateway.js';
import type { HttpResponse } from '../helpers/http.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { signInAtProvider, startTestProvider, type TestProvider } from '../helpers/oidcProvider.js';
import { mailSettings, startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';

const PUBLIC_URL = 'http://localhost:9';
const START = '/api/v1/auth/oidc/testidp/start';
const EXCHANGE = '/api/v1/auth/oidc/exchange';
const APP = 'https://app.example.test/app/signed-in';
const RETURN_TO = APP;
// An entry of its own for the provider-down test, whose states it looks for (return_to matches exactly, CONTRACT §26).
const DOWN = 'https://app.example.test/app/down';
const LINK_INVALID = { error: 'Lien invalide ou expiré' };
const BAD_REQUEST = { error: 'Requête invalide' };

describeWithServices('sign in with an identity provider', () => {
  let idp: TestProvider;
  let smtp: SmtpCatcher;
  let upstream: EchoUpstream;
  let a: TestGateway;
  let b: TestGateway;
  let oidc: Record<string, unknown>;
  const clock = testClock();

  beforeAll(async () => {
    idp = await startTestProvider([`${PUBLIC_URL}/api/v1/auth/oidc/testidp/callback`]);
    // trustEmail: this suite is §15's linking by a provider trusted with addresses (the default for
    // Google only; test/auth/oidcDomains.test.ts has the others).
    oidc = {
      publicUrl: PUBLIC_URL, returnTo: [APP, DOWN],
      providers: { testidp: { issuer: idp.issuer, clientId: idp.clientId, clientSecret: idp.clientSecret, scopes: ['openid', 'email'], trustEmail: true } },
    };
    upstream = await startEchoUpstream();
    // Mail and sign-in links: the mailbox owner's ways to take an account (pre-hijacking, below).
    smtp = await startSmtpCatcher();
    const magicLink = { url: 'https://app.example.test/magic?token={token}' };
    [a, b] = await startTwoGateways(testConfig({
      mail: mailSettings(smtp), auth: { oidc, magicLink }, upstreams: { app: { url: upstream.url } }, routes: [{ path: '/app', upstream: 'app', auth: 'none' }],
    }), { clock });
  });
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await Promise.all([idp?.close(), upstream?.close(), smtp?.close()]);
    await closeSql();
  });
  beforeEach(() => idp.misbehave('none'));

  /** A user the provider knows, with a fresh subject. */
  function providerUser(user: { email?: string; email_verified?: boolean } = { email: newEmail('idp'), email_verified: true }): string {
    const subject = `sub-${randomUUID()}`;
    idp.users.set(subject, user);
    return subject;
  }

  interface Started { verifier: string; cookie: string; location: URL; res: HttpResponse }
  /** GET /start as an application's page sends the browser there, with a fresh PKCE pair of its own. */
  async function start(gw: TestGateway, returnTo = RETURN_TO): Promise<Started> {
    const verifier = randomBytes(32).toString('base64url');
    const res = await gw.get(`${START}?return_to=${encodeURIComponent(returnTo)}&code_challenge=${s256(verifier)}`);
    expect(res.status, res.text).toBe(302);
    const cookie = String((res.headers['set-cookie'] as string[])[0]).split(';')[0]!;
    return { verifier, cookie, location: new URL(String(res.headers.location)), res };
  }
  /** The browser arriving at the callback (on `gw`: it holds the cookie of the gateway's domain, whichever instance answers). */
  const callback = (gw: TestGateway, at: URL, cookie?: string) => gw.get(`${at.pathname}${at.search}`, { headers: cookie ? { cookie } : {} });
  /** Where the callback sent the browser, and its fragment. */
  function backAt(res: HttpResponse): { url: URL; fragment: URLSearchParams } {
    expect(res.status, res.text).toBe(302);
    const url = new URL(String(res.headers.location));
    return { url, fragment: new URLSearchParams(url.hash.slice(1)) };
  }
  /** Start on `a`, sign in at the provider as `subject`, come back on `b`: the fragment. */
  async function signIn(subject: string): Promise<{ fragment: URLSearchParams; verifier: string; res: HttpResponse; providerCode: string | null }> {
    const started = await start(a);
    const back = await signInAtProvider(started.location.href, subject);
    const res = await callback(b, back, started.cookie);
    return { fragment: backAt(res).fragment, verifier: started.verifier, res, providerCode: back.searchParams.get('code') };
  }
  /** The whole sign-in to the token pair. */
  async function signedIn(subject: string): Promise<HttpResponse> {
    const { fragment, verifier } = await signIn(subject);
    expect(fragment.get('error')).toBeNull();
    return a.post(EXCHANGE, { login_code: fragment.get('login_code'), code_verifier: verifier });
  }
  const identityOf = (subject: string) => sql<{ user_id: number; provider: string; email: string | null }>(
    'SELECT user_id, provider, email FROM user_identities WHERE issuer = $1 AND subject = $2', [idp.issuer, subject]);

  it('start sends the browser to the provider: code flow, PKCE S256 of its own, state and nonce bound by an HttpOnly SameSite=Lax cookie', async () => {
    const { location, res, verifier } = await start(a);
    expect(location.origin + location.pathname).toBe(`${idp.issuer}/auth`);
    const q = location.searchParams;
    expect(Object.fromEntries([...q].filter(([k]) => !['state', 'nonce', 'code_challenge'].includes(k)))).toEqual({
      client_id: idp.clientId, redirect_uri: `${PUBLIC_URL}/api/v1/auth/oidc/testidp/callback`, response_type: 'code', scope: 'openid email', code_challenge_method: 'S256',
    });
    expect(q.get('state')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(q.get('nonce')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    // The provider gets the gateway's own challenge, never the application's.
    expect(q.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(q.get('code_challenge')).not.toBe(s256(verifier));
    const setCookie = (res.headers['set-cookie'] as string[]);
    expect(setCookie).toHaveLength(1);
    expect(setCookie[0]).toMatch(/^gw_oidc=[A-Za-z0-9_-]{43}; HttpOnly; SameSite=Lax; Path=\/api\/v1\/auth\/oidc\/; Max-Age=600$/);
    expect(res.headers['cache-control']).toBe('no-store');
    // Stored: the state's hash alone, with what the start was asked.
    const rows = await sql<{ return_to: string; app_challenge: string; ttl: number }>(
      'SELECT return_to, app_challenge, EXTRACT(EPOCH FROM expires_at - $2::timestamptz)::int AS ttl FROM oidc_states WHERE state_hash = $1', [sha256Hex(q.get('state')!), clock()]);
    expect(rows).toEqual([{ return_to: RETURN_TO, app_challenge: s256(verifier), ttl: 600 }]);
  });

  it('the same first sign-in in two tabs at once, on two instances: one account, one link, both tabs signed in to it', async () => {
    for (let round = 0; round < 3; round++) {
      const email = newEmail('idp-race');
      const subject = providerUser({ email, email_verified: true });
      // Two flows to the provider's consent, then both callbacks at the same moment.
      const [one, two] = [await start(a), await start(b)];
      const [backOne, backTwo] = [await signInAtProvider(one.location.href, subject), await signInAtProvider(two.location.href, subject)];
      const [resOne, resTwo] = await Promise.all([callback(a, backOne, one.cookie), callback(b, backTwo, two.cookie)]);
      const codes = [backAt(resOne).fragment, backAt(resTwo).fragment].map((f) => f.get('login_code'));
      expect(codes.every((c) => c && /^[\w-]{43}$/.test(c)), String([resOne.headers.location, resTwo.headers.location])).toBe(true);
      const pairs = await Promise.all([a.post(EXCHANGE, { login_code: codes[0], code_verifier: one.verifier }), b.post(EXCHANGE, { login_code: codes[1], code_verifier: two.verifier })]);
      expect(pairs.map((p) => p.status)).toEqual([200, 200]);
      const links = await identityOf(subject);
      expect(links).toHaveLength(1);
      expect(pairs.map((p) => claims(p.json.access_token).sub)).toEqual([String(links[0]!.user_id), String(links[0]!.user_id)]);
      expect(await sql('SELECT id FROM users WHERE email = $1', [email])).toEqual([{ id: links[0]!.user_id }]);
      expect(await sql('SELECT type FROM audit_events WHERE user_id = $1 AND type = $2', [links[0]!.user_id, 'user.registered'])).toHaveLength(1);
    }
  });

  it('a provider that does not answer: start sends the browser back with #error=provider_error and keeps nothing; once it answers, sign-in works without a restart', async () => {
    idp.misbehave('unavailable');
    // An instance of its own: the others have the provider's discovery document cached.
    const fresh = await startTestGateway(testConfig({ auth: { oidc } }), { clock });
    try {
      const returnTo = DOWN;
      const res = await fresh.get(`${START}?return_to=${encodeURIComponent(returnTo)}&code_challenge=${s256(randomBytes(32).toString('base64url'))}`);
      expect(res.status).toBe(302);
      expect(res.headers.location).toBe(`${returnTo}#error=provider_error`);
      expect(res.headers['set-cookie']).toBeUndefined();
      expect(await sql('SELECT 1 FROM oidc_states WHERE return_to = $1', [returnTo])).toEqual([]);
      expect(fresh.logs.join('\n')).toContain('identity provider unavailable');
      idp.misbehave('none');
      const subject = providerUser();
      const started = await start(fresh);
      const back = await signInAtProvider(started.location.href, subject);
      const { fragment } = backAt(await callback(fresh, back, started.cookie));
      expect((await fresh.post(EXCHANGE, { login_code: fragment.get('login_code'), code_verifier: started.verifier })).status).toBe(200);
    } finally {
      await fresh.close();
    }
  });

  it('the cookie is Secure when the gateway is reached over https (publicUrl)', async () => {
    const oidc = { publicUrl: 'https://gw.example.test', returnTo: [APP], providers: { testidp: { issuer: idp.issuer, clientId: idp.clientId, clientSecret: idp.clientSecret } } };
    // app.example.test is of the gateway's site: the login code is bound to the browser, whose page posts the exchange with credentials.
    const secure = await startTestGateway(testConfig({ cors: { origins: ['https://app.example.test'], credentials: true }, auth: { oidc } }), { clock });
    try {
      const { res, location } = await start(secure);
      expect((res.headers['set-cookie'] as string[])[0]).toMatch(/^gw_oidc=[\w-]{43}; HttpOnly; SameSite=Lax; Path=\/api\/v1\/auth\/oidc\/; Max-Age=600; Secure$/);
      expect(location.searchParams.get('redirect_uri')).toBe('https://gw.example.test/api/v1/auth/oidc/testidp/callback');
    } finally {
      await secure.close();
    }
  });

  it('a first sign-in creates the account (free, no password, email verified as the provider says), links it, and the exchange gives a pair with amr ["fed"]', async () => {
    const email = newEmail('idp');
    const subject = providerUser({ email: email.toUpperCase(), email_verified: true });
    const { fragment, verifier, res, providerCode } = await signIn(subject);
    expect(providerCode).toBeTruthy();
    expect(String(res.headers.location)).toMatch(/^https:\/\/app\.example\.test\/app\/signed-in#login_code=[A-Za-z0-9_-]{43}$/);
    expect(res.headers['set-cookie']).toEqual(['gw_oidc=; HttpOnly; SameSite=Lax; Path=/api/v1/auth/oidc/; Max-Age=0']);
    const loginCode = fragment.get('login_code')!;
    const [code] = await sql<{ ttl: number; used_at: Date | null }>(
      'SELECT EXTRACT(EPOCH FROM expires_at - $2::timestamptz)::int AS ttl, used_at FROM oidc_login_codes WHERE code_hash = $1', [sha256Hex(loginCode), clock()]);
    expect(code).toEqual({ ttl: 60, used_at: null });

    const pair = await a.post(EXCHANGE, { login_code: loginCode, code_verifier: verifier });
    expect(pair.status).toBe(200);
    expect(pair.json).toEqual({ access_token: expect.any(String), refresh_token: expect.any(String), token_type: 'Bearer', plan: 'free' });
    const [link] = await identityOf(subject);
    expect(link).toEqual({ user_id: expect.any(Number), provider: 'testidp', email });
    expect(claims(pair.json.access_token)).toMatchObject({ sub: String(link!.user_id), amr: ['fed'], acr: 'aal1' });
    const [user] = await sql<{ email: string; password_hash: string | null; plan: string; verified: boolean }>(
      'SELECT email, password_hash, plan, email_verified_at IS NOT NULL AS verified FROM users WHERE id = $1', [link!.user_id]);
    expect(user).toEqual({ email, password_hash: null, plan: 'free', verified: true });
    // The provider's tokens are kept nowhere: not in the pair, not in a log.
    const logs = [...a.logs, ...b.logs].join('\n');
    expect(logs).not.toContain(loginCode);
    expect(logs).not.toContain(providerCode);
    expect(logs).toContain('/api/v1/auth/oidc/testidp/callback?code=[redacted]');
    expect(logs).not.toContain('id_token');
    const audit = await sql<{ type: string; data: unknown }>('SELECT type, data FROM audit_events WHERE user_id = $1 ORDER BY id', [link!.user_id]);
    expect(audit).toEqual([
      { type: 'user.registered', data: {} },
      { type: 'oidc.linked', data: { provider: 'testidp', issuer: idp.issuer } },
      { type: 'login.succeeded', data: { amr: ['fed'] } },
    ]);
    // The account has no password: a login is refused as a wrong password.
    expect((await b.post('/api/v1/auth/login', { email, password: 'anything-at-all' })).status).toBe(401);
    // A refresh keeps the sign-in's assurance; GET /identities lists the link.
    const refreshed = await b.post('/api/v1/auth/refresh', { refresh_token: pair.json.refresh_token });
    expect(claims(refreshed.json.access_token)).toMatchObject({ amr: ['fed'], acr: 'aal1' });
    const listed = await b.get('/api/v1/user/identities', { headers: bearer(pair.json.access_token) });
    expect([listed.status, listed.json]).toEqual([200, { identities: [{ provider: 'testidp', issuer: idp.issuer, subject, email, created_at: expect.any(String) }] }]);

    // Signing in again reaches the same account, and makes none.
    const again = await signedIn(subject);
    expect(claims(again.json.access_token).sub).toBe(String(link!.user_id));
    expect(await sql('SELECT id FROM users WHERE email = $1', [email])).toHaveLength(1);
  });

  it('the sign-in cookie is the gateway\'s own: never forwarded to an upstream', async () => {
    const { cookie } = await start(a);
    const res = await b.get('/app/oidc-cookie', { headers: { cookie: `theme=dark; ${cookie}` } });
    expect(res.status).toBe(200);
    expect(upstream.last('oidc-cookie')!.headers.cookie).toBe('theme=dark');
  });

  it('a login_code works once, for 60 seconds, with the verifier of the start\'s challenge; a wrong verifier leaves it to its application', async () => {
    const subject = providerUser();
    const used = await signIn(subject);
    const code = used.fragment.get('login_code');
    const wrong = await b.post(EXCHANGE, { login_code: code, code_verifier: randomBytes(32).toString('base64url') });
    expect([wrong.status, wrong.json]).toEqual([400, LINK_INVALID]);
    expect((await a.post(EXCHANGE, { login_code: code, code_verifier: used.verifier })).status).toBe(200);
    for (const gw of [a, b]) {
      const res = await gw.post(EXCHANGE, { login_code: code, code_verifier: used.verifier });
      expect([res.status, res.json]).toEqual([400, LINK_INVALID]);
    }
    const late = await signIn(subject);
    clock.advance(61_000);
    try {
      const res = await b.post(EXCHANGE, { login_code: late.fragment.get('login_code'), code_verifier: late.verifier });
      expect([res.status, res.json]).toEqual([400, LINK_INVALID]);
    } finally {
      clock.advance(-61_000);
    }
    for (const body of [{}, { login_code: 'made-up', code_verifier: late.verifier }, { login_code: late.fragment.get('login_code') }]) {
      const res = await a.post(EXCHANGE, body);
      expect([res.status, res.json], JSON.stringify(body)).toEqual([400, LINK_INVALID]);
    }
  });

  it('one login_code exchanged ten times at once over two instances signs in once', async () => {
    const subject = providerUser();
    const { fragment, verifier } = await signIn(subject);
    await signedIn(subject); // the account exists: count its sessions from here
    const [link] = await identityOf(subject);
    const before = await sql('SELECT id FROM sessions WHERE user_id = $1', [link!.user_id]);
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).post(EXCHANGE, { login_code: fragment.get('login_code'), code_verifier: verifier })));
    expect(answers.map((r) => r.status).sort()).toEqual([200, ...Array(9).fill(400)]);
    expect(await sql('SELECT id FROM sessions WHERE user_id = $1', [link!.user_id])).toHaveLength(before.length + 1);
  });

  it('the callback needs the cookie of the browser that started, once: else a JSON 400 and nothing else', async () => {
    const subject = providerUser();
    const mine = await start(a);
    const theirs = await start(b);
    const back = await signInAtProvider(mine.location.href, subject);
    for (const cookie of [undefined, theirs.cookie, 'gw_oidc=forged']) {
      const res = await callback(b, back, cookie);
      expect([res.status, res.json, res.headers.location], String(cookie)).toEqual([400, BAD_REQUEST, undefined]);
    }
    // A state the provider never issued, with a real cookie.
    const forged = new URL(back);
    forged.searchParams.set('state', 'x'.repeat(43));
    expect((await callback(a, forged, mine.cookie)).status).toBe(400);
    // The right cookie: once, on whichever instance.
    expect(backAt(await callback(a, back, mine.cookie)).fragment.get('login_code')).toBeTruthy();
    const replay = await callback(b, back, mine.cookie);
    expect([replay.status, replay.json]).toEqual([400, BAD_REQUEST]);
    // Another provider's path for the same state: unknown provider, 404.
    expect((await a.get(`/api/v1/auth/oidc/other/callback${back.search}`, { headers: { cookie: mine.cookie } })).status).toBe(404);
  });

  it('start refuses a return_to not on the list (400 "Redirection non autorisée"), a missing challenge (400) and an unknown provider (404)', async () => {
    const challenge = s256(randomBytes(32).toString('base64url'));
    for (const returnTo of [
      'https://evil.test/app/signed-in', 'https://app.example.test/app/signed-inx', 'https://app.example.test/', 'http://app.example.test/app/signed-in',
      'https://app.example.test:8443/app/signed-in', 'https://app.example.test@evil.test/app/signed-in', 'https://x@app.example.test/app/signed-in', '/app/signed-in', 'javascript:alert(1)',
      'https://app.example.test/app/signed-in/../../admin', 'https://app.example.test/app/signed-in#frag', '',
      // Issue 45: a query under the entry (an open redirect of the application carried the code away), a path under it, encoded separators.
      'https://app.example.test/app/signed-in?next=https://evil.test/', 'https://app.example.test/app/signed-in/deep/page',
      'https://app.example.test/app/signed-in/..%2fadmin', 'https://app.example.test/app/signed-in/%5c..%5cadmin', 'https://app.example.test/app/%73igned-in',
    ]) {
      const res = await a.get(`${START}?return_to=${encodeURIComponent(returnTo)}&code_challenge=${challenge}`);
      expect([res.status, res.json, res.headers['set-cookie']], returnTo).toEqual([400, { error: 'Redirection non autorisée' }, undefined]);
    }
    for (const query of [
      `return_to=${encodeURIComponent(APP)}`,
      `return_to=${encodeURIComponent(APP)}&code_challenge=short`,
      `return_to=${encodeURIComponent(APP)}&code_challenge=${challenge}&code_challenge_method=plain`,
    ]) {
      const res = await a.get(`${START}?${query}`);
      expect([res.status, res.json], query).toEqual([400, BAD_REQUEST]);
    }
    const unknown = await a.get(`/api/v1/auth/oidc/nope/start?return_to=${encodeURIComponent(APP)}&code_challenge=${challenge}`);
    expect(unknown.status).toBe(404);
    // The list's own entry, as written, is fine (DOWN's states are the provider-down test's to count).
    expect((await start(b, APP)).res.status).toBe(302);
  });

  it.each([
    ['wrong-nonce', 'a nonce from another sign-in'],
    ['wrong-aud', 'an audience that is another client'],
    ['expired', 'an expired ID token'],
    ['unknown-kid', 'a key the provider never published'],
    ['forged-signature', 'a key never published, under the id of the published one'],
    ['alg-none', 'no signature at all'],
    ['hs256', 'an HMAC with the client secret, never offered'],
    ['garbled', 'a header that is not JSON'],
    ['crit', 'a critical header extension nobody understands'],
  ] as const)('an ID token with %s (%s) sends the browser back with #error=invalid_id_token, and signs no one in', async (how, _what) => {
    await signedIn(providerUser()); // the provider's key set is cached
    const subject = providerUser();
    idp.misbehave(how);
    const fetched = idp.jwksFetches();
    const logged = b.logs.length;
    const { fragment, res } = await signIn(subject);
    expect(new URL(String(res.headers.location)).hash).toBe('#error=invalid_id_token');
    // The operator's log says what was wrong with the token (the callback came to b).
    expect(b.logs.slice(logged).join('')).toMatch(/"code":"invalid_id_token","reason":"ID token refused: \w/);
    expect(fragment.get('login_code')).toBeNull();
    expect(await identityOf(subject)).toEqual([]);
    // An unknown key id made one fetch of the key set (a rotation would be picked up), not more; a
    // forged signature under a known key id fails on the cached key, the others on their claims.
    expect(idp.jwksFetches() - fetched).toBe(how === 'unknown-kid' ? 1 : 0);
  });

  it('a key the provider rotated in is fetched once and accepted', async () => {
    const subject = providerUser();
    await signedIn(subject); // the current key set is cached
    const fetched = idp.jwksFetches();
    idp.misbehave('rotated-key');
    const res = await signedIn(subject);
    expect(res.status).toBe(200);
    expect(idp.jwksFetches() - fetched).toBe(1);
    // Cached from then on.
    expect((await signedIn(subject)).status).toBe(200);
    expect(idp.jwksFetches() - fetched).toBe(1);
  });

  it('the provider saying no (access_denied), or failing otherwise, sends the browser back with #error', async () => {
    for (const [error, expected] of [['access_denied', 'access_denied'], ['server_error', 'provider_error']] as const) {
      const started = await start(a);
      const state = started.location.searchParams.get('state')!;
      const res = await callback(b, new URL(`${PUBLIC_URL}/api/v1/auth/oidc/testidp/callback?error=${error}&state=${state}&iss=${encodeURIComponent(idp.issuer)}`), started.cookie);
      expect(String(res.headers.location)).toBe(`${RETURN_TO}#error=${expected}`);
    }
  });

  it('no silent takeover: an account of the same email is linked only when both sides have it verified; else #error=account_exists', async () => {
    // The provider does not vouch for the address: an account here is never handed to it.
    const local = await makeUser(a);
    await sql('UPDATE users SET email_verified_at = now() WHERE id = $1', [local.id]);
    const unverified = providerUser({ email: local.email, email_verified: false });
    expect(new URL(String((await signIn(unverified)).res.headers.location)).hash).toBe('#error=account_exists');
    // The account's own address is not verified: whoever registered it may not own it.
    const other = await makeUser(a);
    const verifiedThere = providerUser({ email: other.email, email_verified: true });
    expect(new URL(String((await signIn(verifiedThere)).res.headers.location)).hash).toBe('#error=account_exists');
    expect(await identityOf(unverified)).toEqual([]);
    expect(await identityOf(verifiedThere)).toEqual([]);
    // Both verified: linked, the same account, its password still its own.
    const both = providerUser({ email: local.email, email_verified: true });
    const pair = await signedIn(both);
    expect(claims(pair.json.access_token).sub).toBe(String(local.id));
    expect((await identityOf(both))[0]!.user_id).toBe(local.id);
    expect((await b.post('/api/v1/auth/login', { email: local.email, password: local.password })).status).toBe(200);
    const linked = await sql<{ data: unknown }>("SELECT data FROM audit_events WHERE user_id = $1 AND type = 'oidc.linked'", [local.id]);
    expect(linked).toEqual([{ data: { provider: 'testidp', issuer: idp.issuer } }]);
  });

  it('an email the provider does not vouch for makes an account without email_verified_at; no email at all makes none (#error=email_unverified)', async () => {
    const email = newEmail('idp');
    const subject = providerUser({ email, email_verified: false });
    expect((await signedIn(subject)).status).toBe(200);
    expect(await sql('SELECT email_verified_at FROM users WHERE email = $1', [email])).toEqual([{ email_verified_at: null }]);
    const anonymous = providerUser({});
    expect(new URL(String((await signIn(anonymous)).res.headers.location)).hash).toBe('#error=email_unverified');
  });

  it('an email claim that is not one mailbox (a list, a display name, a domain literal) makes no account, even vouched for (CONTRACT §19, §26)', async () => {
    const t = marker();
    for (const email of [`victim.${t}@x.test,attacker.${t}@y.test`, `CEO <ceo.${t}@bank.test>`, `a.${t}@x.test (c)`, `a.${t}@[127.0.0.1]`, `a.${t}@[IPv6:::1]`]) {
      const subject = providerUser({ email, email_verified: true });
      expect(new URL(String((await signIn(subject)).res.headers.location)).hash, email).toBe('#error=email_unverified');
    }
    expect(await sql('SELECT id FROM users WHERE email LIKE $1', [`%${t}%`])).toEqual([]);
    expect(await sql('SELECT user_id FROM user_identities WHERE email LIKE $1', [`%${t}%`])).toEqual([]);
  });

  it('a user with TOTP gets the 403 with an mfa_token, which a code turns into a pair with amr ["fed","otp","mfa"]', async () => {
    const subject = providerUser();
    const first = await signedIn(subject);
    const token = first.json.access_token as string;
    const { secret } = (await a.post('/api/v1/auth/mfa/totp/enroll', {}, { headers: bearer(token) })).json as { secret: string };
    expect((await a.post('/api/v1/auth/mfa/totp/confirm', { code: authenticator.generate(secret) }, { headers: bearer(token) })).status).toBe(200);
    const challenge = await signedIn(subject);
    expect([challenge.status, challenge.json]).toEqual([403, { error: 'Code à deux facteurs requis', mfa_token: expect.any(String), methods: ['totp', 'recovery_code'] }]);
    const next = authenticator.clone({ epoch: Date.now() + 30_000 }).generate(secret);
    const pair = await b.post('/api/v1/auth/mfa/verify', { mfa_token: challenge.json.mfa_token, code: next });
    expect(pair.status).toBe(200);
    expect(claims(pair.json.access_token)).toMatchObject({ amr: ['fed', 'otp', 'mfa'], acr: 'aal2' });
    // Without a password, a recent sign-in stands in for it to remove TOTP (CONTRACT §14).
    expect((await a.request('DELETE', '/api/v1/auth/mfa/totp', { json: {}, headers: bearer(pair.json.access_token) })).status).toBe(200);
  });

  it('unlinking: the last way to sign in is refused (409), a provider not linked is 404, a stale sign-in 403; with a password, it goes', async () => {
    const subject = providerUser();
    const pair = await signedIn(subject);
    const token = pair.json.access_token as string;
    const [link] = await identityOf(subject);
    const last = await a.request('DELETE', '/api/v1/user/identities/testidp', { headers: bearer(token) });
    expect([last.status, last.json]).toEqual([409, { error: 'Impossible de retirer la dernière méthode de connexion' }]);
    const notLinked = await b.request('DELETE', '/api/v1/user/identities/other', { headers: bearer(token) });
    expect([notLinked.status, notLinked.json]).toEqual([404, { error: 'Fournisseur non lié' }]);
    // A first password, set from the recent sign-in without current_password (CONTRACT §14).
    const password = newPassword();
    const changed = await a.post('/api/v1/auth/password/change', { new_password: password }, { headers: bearer(token) });
    expect(changed.status).toBe(200);
    clock.advance(6 * 60_000);
    try {
      const stale = await b.request('DELETE', '/api/v1/user/identities/testidp', { headers: bearer(changed.json.access_token) });
      expect([stale.status, stale.json]).toEqual([403, { error: 'Authentification récente requise' }]);
    } finally {
      clock.advance(-6 * 60_000);
    }
    const gone = await b.request('DELETE', '/api/v1/user/identities/testidp', { headers: bearer(changed.json.access_token) });
    expect([gone.status, gone.json]).toEqual([200, { message: 'Fournisseur retiré' }]);
    expect(await identityOf(subject)).toEqual([]);
    expect((await b.get('/api/v1/user/identities', { headers: bearer(changed.json.access_token) })).json).toEqual({ identities: [] });
    const again = await b.request('DELETE', '/api/v1/user/identities/testidp', { headers: bearer(changed.json.access_token) });
    expect([again.status, again.json]).toEqual([404, { error: 'Fournisseur non lié' }]);
    const unlinked = await sql<{ data: unknown }>("SELECT data FROM audit_events WHERE user_id = $1 AND type = 'oidc.unlinked'", [link!.user_id]);
    expect(unlinked).toEqual([{ data: { provider: 'testidp', issuer: idp.issuer } }]);
    // API keys never unlink (guard factor): bearer tokens only.
    expect((await a.request('DELETE', '/api/v1/user/identities/testidp', { headers: { 'x-api-key': 'gw_not-a-key' } })).status).toBe(401);
  });

  it('a user without a password deletes the account from a recent sign-in (CONTRACT §14)', async () => {
    const subject = providerUser();
    const pair = await signedIn(subject);
    const [link] = await identityOf(subject);
    const res = await b.request('DELETE', '/api/v1/user/me', { json: {}, headers: bearer(pair.json.access_token) });
    expect(res.status).toBe(200);
    expect(await sql('SELECT id FROM users WHERE id = $1', [link!.user_id])).toEqual([]);
    expect(await identityOf(subject)).toEqual([]);
  });
  // Pre-hijacking (CONTRACT §15's "no silent takeover", from the other side): someone signs in first
  // with an address a provider does not vouch for, and waits for its owner.
  /** The mail with `subject` to `email` once it came (`asked` sends it). */
  async function mailed(email: string, subject: string, asked: () => Promise<HttpResponse>): Promise<string> {
    const before = smtp.to(email).filter((m) => m.subject === subject).length;
    expect((await asked()).status).toBe(202);
    await expect.poll(() => smtp.to(email).filter((m) => m.subject === subject).length).toBe(before + 1);
    return smtp.to(email).filter((m) => m.subject === subject).at(-1)!.token!;
  }
  const magicLinkOf = (email: string) => mailed(email, 'Votre lien de connexion', () => a.post('/api/v1/auth/magic-link', { email }));
  const resetLinkOf = (email: string) => mailed(email, 'Réinitialisation de votre mot de passe', () => a.post('/api/v1/auth/password/forgot', { email }));
  const auditOf = (userId: number, type: string) => sql<{ actor: string; data: unknown }>('SELECT actor, data FROM audit_events WHERE user_id = $1 AND type = $2 ORDER BY id', [userId, type]);

  it('pre-hijacking: a link no provider vouched for is removed when the mailbox owner signs in by link; the taker\'s sessions end and it cannot come back', async () => {
    const email = newEmail('victim');
    const taker = providerUser({ email, email_verified: false });
    const taken = (await signedIn(taker)).json as { access_token: string; refresh_token: string };
    const [link] = await identityOf(taker);
    // With mail, an address nobody proved gets no password added (as no factor): the taker keeps no way in of its own.
    const password = await a.post('/api/v1/auth/password/change', { new_password: newPassword() }, { headers: bearer(taken.access_token) });
    expect([password.status, password.json]).toEqual([403, { error: 'Adresse email non vérifiée' }]);
    // The owner cannot register the address, but its mailbox opens a sign-in link.
    expect((await b.post('/api/v1/auth/register', { email, password: newPassword() })).status).toBe(409);
    const owner = await b.post('/api/v1/auth/magic-link/verify', { token: await magicLinkOf(email) });
    expect(owner.status).toBe(200);
    expect(claims(owner.json.access_token).sub).toBe(String(link!.user_id));
    expect(await identityOf(taker)).toEqual([]);
    expect((await a.post('/api/v1/auth/refresh', { refresh_token: taken.refresh_token })).json).toEqual({ error: 'Refresh token invalide, révoqué ou expiré' });
    expect(new URL(String((await signIn(taker)).res.headers.location)).hash).toBe('#error=account_exists');
    expect((await a.get('/api/v1/user/me', { headers: bearer(owner.json.access_token) })).json).toMatchObject({ email, email_verified_at: expect.any(String) });
    expect(await auditOf(link!.user_id, 'oidc.unlinked')).toEqual([{ actor: 'system', data: { provider: 'testidp', issuer: idp.issuer, reason: 'mailbox_proven' } }]);
    expect(await auditOf(link!.user_id, 'session.revoked')).toEqual([{ actor: 'system', data: { sessions: 1, reason: 'mailbox_proven' } }]);
    expect(await auditOf(link!.user_id, 'email.verified')).toHaveLength(1);
  });

  it('pre-hijacking: a password reset by the mailbox owner removes the link no provider vouched for too', async () => {
    const email = newEmail('victim');
    const taker = providerUser({ email, email_verified: false });
    const taken = (await signedIn(taker)).json as { refresh_token: string };
    const password = newPassword();
    expect((await b.post('/api/v1/auth/password/reset', { token: await resetLinkOf(email), new_password: password })).status).toBe(200);
    expect(await identityOf(taker)).toEqual([]);
    expect((await a.post('/api/v1/auth/refresh', { refresh_token: taken.refresh_token })).status).toBe(401);
    expect(new URL(String((await signIn(taker)).res.headers.location)).hash).toBe('#error=account_exists');
    expect((await a.post('/api/v1/auth/login', { email, password })).status).toBe(200);
  });

  it('pre-hijacking by registration: the owner\'s first sign-in link ends the registrant\'s sessions and password', async () => {
    const taker = await makeUser(a);
    const owner = await b.post('/api/v1/auth/magic-link/verify', { token: await magicLinkOf(taker.email) });
    expect(owner.status).toBe(200);
    expect((await a.post('/api/v1/auth/login', { email: taker.email, password: taker.password })).json).toEqual({ error: 'Identifiants invalides' });
    expect((await a.post('/api/v1/auth/refresh', { refresh_token: taker.refresh })).status).toBe(401);
    expect(await auditOf(taker.id, 'password.changed')).toEqual([{ actor: 'system', data: { removed: true, reason: 'mailbox_proven' } }]);
    // The owner sets a password of its own from this sign-in; a later link on the verified address changes nothing else.
    const password = newPassword();
    const set = await a.post('/api/v1/auth/password/change', { new_password: password }, { headers: bearer(owner.json.access_token) });
    expect(set.status).toBe(200);
    clock.advance(61_000); // one link mail a minute per address
    const again = await b.post('/api/v1/auth/magic-link/verify', { token: await magicLinkOf(taker.email) });
    expect(again.status).toBe(200);
    expect((await a.post('/api/v1/auth/login', { email: taker.email, password })).status).toBe(200);
    expect((await a.post('/api/v1/auth/refresh', { refresh_token: set.json.refresh_token })).status).toBe(200);
  });

  it('a link its provider vouched for stays when the user also signs in by link', async () => {
    const subject = providerUser();
    const first = (await signedIn(subject)).json as { refresh_token: string };
    const [link] = await identityOf(subject);
    const [user] = await sql<{ email: string }>('SELECT email FROM users WHERE id = $1', [link!.user_id]);
    expect((await b.post('/api/v1/auth/magic-link/verify', { token: await magicLinkOf(user!.email) })).status).toBe(200);
    expect(await identityOf(subject)).toHaveLength(1);
    expect((await a.post('/api/v1/auth/refresh', { refresh_token: first.refresh_token })).status).toBe(200);
    expect((await signedIn(subject)).status).toBe(200);
  });
});
