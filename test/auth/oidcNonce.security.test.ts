// The OIDC nonce (CONTRACT §15, src/auth/providers/oidc.ts): each sign-in sends the provider a nonce of its
// own, and the callback accepts only an ID token that carries that flow's nonce. A token the
// provider minted for another sign-in (one an attacker started, or captured) is refused even when
// everything else about the callback is right: its state, its cookie, its PKCE verifier.
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { s256 } from '../../src/auth/providers/oidc.js';
import { closeSql, describeWithServices, newEmail, sql, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';
import { signInAtProvider, startTestProvider, type TestProvider } from '../helpers/oidcProvider.js';

const PUBLIC_URL = 'http://localhost:9';
const START = '/api/v1/auth/oidc/testidp/start';
// The configured returnTo entry, sent as return_to character for character (CONTRACT §26).
const RETURN_TO = 'https://app.example.test/signed-in';

describeWithServices('OIDC nonce: one per sign-in, and bound to it', () => {
  let idp: TestProvider;
  let gw: TestGateway;

  beforeAll(async () => {
    idp = await startTestProvider([`${PUBLIC_URL}/api/v1/auth/oidc/testidp/callback`]);
    const providers = { testidp: { issuer: idp.issuer, clientId: idp.clientId, clientSecret: idp.clientSecret, scopes: ['openid', 'email'] } };
    gw = await startTestGateway(testConfig({ auth: { oidc: { publicUrl: PUBLIC_URL, returnTo: [RETURN_TO], providers } } }));
  });
  afterAll(async () => {
    await gw?.close();
    await idp?.close();
    await closeSql();
  });

  /** A subject the provider knows, with a verified email. */
  function providerUser(): string {
    const subject = `sub-${randomUUID()}`;
    idp.users.set(subject, { email: newEmail('nonce'), email_verified: true });
    return subject;
  }
  /** A start as a browser makes it: the provider's authorization request it is sent to, and its cookie. */
  async function start(): Promise<{ authorization: URL; cookie: string }> {
    const res = await gw.get(`${START}?return_to=${encodeURIComponent(RETURN_TO)}&code_challenge=${s256(randomBytes(32).toString('base64url'))}`);
    expect(res.status, res.text).toBe(302);
    return { authorization: new URL(String(res.headers.location)), cookie: String((res.headers['set-cookie'] as string[])[0]).split(';')[0]! };
  }
  /** The browser back at the callback from the provider, with the flow's cookie: where it is sent. */
  async function callback(back: URL, cookie: string): Promise<URL> {
    const res = await gw.get(`${back.pathname}${back.search}`, { headers: { cookie } });
    expect(res.status, res.text).toBe(302);
    return new URL(String(res.headers.location));
  }
  const identities = (subject: string) => sql('SELECT user_id FROM user_identities WHERE issuer = $1 AND subject = $2', [idp.issuer, subject]);

  it('two sign-ins ask the provider for two different nonces', async () => {
    const [one, two] = [await start(), await start()];
    const nonces = [one.authorization.searchParams.get('nonce'), two.authorization.searchParams.get('nonce')];
    expect(nonces[0]).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(nonces[1]).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(nonces[0]).not.toBe(nonces[1]);
  });

  it('an ID token minted for one sign-in\'s nonce is refused in another (#error=invalid_id_token); with its own nonce, the sign-in completes', async () => {
    const [one, two] = [await start(), await start()];
    // The provider is asked for the second sign-in (its state, its PKCE challenge) with the first's
    // nonce: its code and ID token are the second flow's in all but the nonce.
    const crossed = new URL(two.authorization);
    crossed.searchParams.set('nonce', one.authorization.searchParams.get('nonce')!);
    const victim = providerUser();
    const refused = await callback(await signInAtProvider(crossed.href, victim), two.cookie);
    expect(refused.href).toBe(`${RETURN_TO}#error=invalid_id_token`);
    expect(await identities(victim)).toEqual([]);

    // The first sign-in, as its own nonce asked, completes.
    const subject = providerUser();
    const done = await callback(await signInAtProvider(one.authorization.href, subject), one.cookie);
    expect(done.origin + done.pathname).toBe(RETURN_TO);
    expect(done.hash).toMatch(/^#login_code=[A-Za-z0-9_-]+$/);
    expect(await identities(subject)).toHaveLength(1);
  });
});
