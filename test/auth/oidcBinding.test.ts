// Binding the login code to the browser (CONTRACT §26, auth.oidc.bindToBrowser), against a real
// provider on loopback. Issue 45: /start takes the application's code_challenge from the URL, so
// an attacker sent the victim's browser through a sign-in with a challenge whose verifier the
// attacker held; the login code, read off the return page, then traded for the victim's pair.
// With the binding, the callback sets gw_oidc anew for 60 s and the exchange needs that cookie:
// the code is worth nothing outside the browser that signed in.
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { s256 } from '../../src/auth/providers/oidc.js';
import { claims, closeSql, describeWithServices, newEmail, sql, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';
import { signInAtProvider, startTestProvider, type TestProvider } from '../helpers/oidcProvider.js';

const PUBLIC_URL = 'https://gw.example.test';
const RETURN_TO = 'https://app.example.test/signed-in';
const EXCHANGE = '/api/v1/auth/oidc/exchange';
const LINK_INVALID = { error: 'Lien invalide ou expiré' };
const cookieOf = (setCookie: unknown) => String((setCookie as string[])[0]).split(';')[0]!;

describeWithServices('login codes bound to the browser', () => {
  let idp: TestProvider;
  let bound: TestGateway;
  let unbound: TestGateway;

  beforeAll(async () => {
    idp = await startTestProvider([`${PUBLIC_URL}/api/v1/auth/oidc/testidp/callback`]);
    const oidc = { publicUrl: PUBLIC_URL, returnTo: [RETURN_TO], providers: { testidp: { issuer: idp.issuer, clientId: idp.clientId, clientSecret: idp.clientSecret } } };
    // app.example.test and gw.example.test are one site: bound by default.
    bound = await startTestGateway(testConfig({ cors: { origins: ['https://app.example.test'], credentials: true }, auth: { oidc } }));
    unbound = await startTestGateway(testConfig({ auth: { oidc: { ...oidc, bindToBrowser: false } } }));
  });
  afterAll(async () => {
    await Promise.all([bound?.close(), unbound?.close()]);
    await idp?.close();
    await closeSql();
  });

  /** A browser sent to /start with `challenge` (the application's, or an attacker's), signed in at the provider, back at the callback. */
  async function signInWith(gw: TestGateway, challenge: string) {
    const subject = `sub-${randomUUID()}`;
    idp.users.set(subject, { email: newEmail('bound'), email_verified: true });
    const started = await gw.get(`/api/v1/auth/oidc/testidp/start?return_to=${encodeURIComponent(RETURN_TO)}&code_challenge=${challenge}`);
    expect(started.status, started.text).toBe(302);
    const back = await signInAtProvider(String(started.headers.location), subject);
    const res = await gw.get(`${back.pathname}${back.search}`, { headers: { cookie: cookieOf(started.headers['set-cookie']) } });
    expect(res.status, res.text).toBe(302);
    const loginCode = new URLSearchParams(new URL(String(res.headers.location)).hash.slice(1)).get('login_code');
    return { loginCode, res, subject };
  }

  it('the callback sets gw_oidc anew for 60 s; the exchange needs it (absent or another browser\'s: 400) and then clears it', async () => {
    const verifier = randomBytes(32).toString('base64url');
    const { loginCode, res } = await signInWith(bound, s256(verifier));
    const setCookie = res.headers['set-cookie'] as string[];
    expect(setCookie).toHaveLength(1);
    expect(setCookie[0]).toMatch(/^gw_oidc=[A-Za-z0-9_-]{43}; HttpOnly; SameSite=Lax; Path=\/api\/v1\/auth\/oidc\/; Max-Age=60; Secure$/);
    const other = await signInWith(bound, s256(verifier));
    for (const headers of [{}, { cookie: cookieOf(other.res.headers['set-cookie']) }, { cookie: 'gw_oidc=forged' }] as Array<Record<string, string>>) {
      const refused = await bound.post(EXCHANGE, { login_code: loginCode, code_verifier: verifier }, { headers });
      expect([refused.status, refused.json], JSON.stringify(headers)).toEqual([400, LINK_INVALID]);
    }
    // Refusals leave the code to its browser.
    const pair = await bound.post(EXCHANGE, { login_code: loginCode, code_verifier: verifier }, { headers: { cookie: cookieOf(setCookie) } });
    expect(pair.status, pair.text).toBe(200);
    expect(claims(pair.json.access_token)).toMatchObject({ amr: ['fed'] });
    expect(pair.headers['set-cookie']).toEqual(['gw_oidc=; HttpOnly; SameSite=Lax; Path=/api/v1/auth/oidc/; Max-Age=0; Secure']);
  });

  it('issue 45: a code from a sign-in started with the attacker\'s challenge is refused to the attacker, verifier and all', async () => {
    const attackerVerifier = randomBytes(32).toString('base64url');
    const { loginCode, subject } = await signInWith(bound, s256(attackerVerifier));
    const stolen = await bound.post(EXCHANGE, { login_code: loginCode, code_verifier: attackerVerifier });
    expect([stolen.status, stolen.json]).toEqual([400, LINK_INVALID]);
    // Nobody signed in: the account the sign-in made has no session.
    const sessions = await sql('SELECT s.id FROM sessions s JOIN user_identities i ON i.user_id = s.user_id WHERE i.issuer = $1 AND i.subject = $2', [idp.issuer, subject]);
    expect(sessions).toEqual([]);
  });

  it('bindToBrowser: false: the callback clears gw_oidc and the application\'s verifier alone binds the code (CONTRACT §15)', async () => {
    const verifier = randomBytes(32).toString('base64url');
    const { loginCode, res } = await signInWith(unbound, s256(verifier));
    expect(res.headers['set-cookie']).toEqual(['gw_oidc=; HttpOnly; SameSite=Lax; Path=/api/v1/auth/oidc/; Max-Age=0; Secure']);
    const wrong = await unbound.post(EXCHANGE, { login_code: loginCode, code_verifier: randomBytes(32).toString('base64url') });
    expect([wrong.status, wrong.json]).toEqual([400, LINK_INVALID]);
    expect((await unbound.post(EXCHANGE, { login_code: loginCode, code_verifier: verifier })).status).toBe(200);
  });
});
