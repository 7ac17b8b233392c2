// What a sign-in comes to when the identity provider's answers are broken (CONTRACT §15): its key
// set, its discovery document, its token response and its UserInfo, each wrong in one way, against
// a real OpenID Connect provider on loopback (test/helpers/oidcProvider.ts). The browser is sent
// back with #error=provider_error (the provider's fault) or #error=invalid_id_token (the token's),
// nobody is signed in, the operator's log says why, and the next sign-in works once the provider
// answers again. Also what the gateway asks of the provider: discovery and the key set once for
// concurrent sign-ins, UserInfo only when the ID token has no email. And a provider on https, as
// every one outside loopback is (its certificate added to this process's default CAs, as
// NODE_EXTRA_CA_CERTS would): its metadata never makes the gateway send the code and the client
// secret over plain http (openid-client's insecure requests are for an http:// issuer only).
// Each test has a gateway of its own: discovery documents and key sets are cached per instance.
import { randomBytes, randomUUID } from 'node:crypto';
import tls from 'node:tls';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { s256 } from '../../src/auth/providers/oidc.js';
import { makeCertificate, type TestCertificate } from '../helpers/certificate.js';
import { describeWithServices, newEmail, sql, type TestGateway } from '../helpers/gateway.js';
import { sparePort } from '../helpers/ports.js';
import { DISCOVERY_PATH, signInAtProvider, type ProviderUser } from '../helpers/oidcProvider.js';
import { RETURN_TO, withTestProvider } from '../helpers/oidcSignIn.js';

describeWithServices('sign-in against a provider that answers wrongly', () => {
  const oidc = withTestProvider();
  const { start, callback } = oidc;
  // The same provider on https, with a certificate of its own added to this process's default CAs.
  let cert: TestCertificate | undefined;
  const defaultCas = tls.getCACertificates('default');
  beforeAll(() => {
    cert = makeCertificate();
    tls.setDefaultCACertificates([...defaultCas, cert.cert]);
  });
  afterAll(() => {
    tls.setDefaultCACertificates(defaultCas);
    cert?.remove();
  });
  const secure = withTestProvider({ tls: () => cert! });
  beforeEach(() => {
    oidc.idp.misbehave('none');
    secure.idp.misbehave('none');
  });

  /** A gateway of its own, nothing of the provider cached yet. */
  const freshGateway = () => oidc.gatewayWith({ trustEmail: true });
  /** A whole sign-in of a fresh subject with `user`'s claims. */
  const signIn = (gw: TestGateway, user: ProviderUser = { email: newEmail('answers'), email_verified: true }) => oidc.signIn(gw, user);
  const linksOf = (subject: string) => sql('SELECT user_id FROM user_identities WHERE issuer = $1 AND subject = $2', [oidc.idp.issuer, subject]);
  /** The reasons the gateway logged for the sign-ins it refused. */
  const refusals = (gw: TestGateway) => gw.logs.flatMap((line) => line.split('\n')).filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((entry) => entry.msg === 'identity provider sign-in refused').map(({ code, reason }) => ({ code, reason }));

  it.each([
    ['jwks-unavailable', 'the key set answered 503 (its keys in the body all the same)', 'the provider\'s key set answered 503'],
    ['jwks-not-a-set', 'a key set whose keys are not a list', 'the provider\'s key set answered 200'],
    ['no-jwks-uri', 'no jwks_uri in the discovery document', 'the provider publishes no jwks_uri'],
    ['jwks-uri-https', 'a jwks_uri on another scheme than its issuer\'s', 'the provider\'s jwks_uri is not on its issuer\'s scheme'],
  ] as const)('%s (%s): #error=provider_error, nobody signed in, the reason logged; the next sign-in works once it answers', async (how, _what, reason) => {
    const gw = await freshGateway();
    oidc.idp.misbehave(how);
    const fetched = oidc.idp.jwksFetches();
    const refused = await signIn(gw);
    expect(refused.fragment).toEqual({ error: 'provider_error' });
    expect(await linksOf(refused.subject)).toEqual([]);
    expect(refusals(gw)).toEqual([{ code: 'provider_error', reason }]);
    // No jwks_uri, or one on another scheme: nothing fetched.
    expect(oidc.idp.jwksFetches() - fetched).toBe(how === 'jwks-unavailable' || how === 'jwks-not-a-set' ? 1 : 0);
    oidc.idp.misbehave('none');
    // A discovery document is kept for an hour: one without a usable jwks_uri stays until then.
    const after = how === 'no-jwks-uri' || how === 'jwks-uri-https' ? await freshGateway() : gw;
    const { fragment, subject } = await signIn(after);
    expect(fragment.login_code).toMatch(/^[\w-]{43}$/);
    expect(await linksOf(subject)).toHaveLength(1);
  });

  it('a key set that is not JSON: #error=provider_error, the parser\'s complaint logged', async () => {
    const gw = await freshGateway();
    oidc.idp.misbehave('jwks-not-json');
    expect((await signIn(gw)).fragment).toEqual({ error: 'provider_error' });
    expect(refusals(gw)).toEqual([{ code: 'provider_error', reason: expect.stringMatching(/^key set fetch failed: (?!SyntaxError).*JSON/) }]);
  });

  it('the key set is asked for JSON, and fetched once for concurrent sign-ins; discovery once for concurrent starts', async () => {
    const gw = await freshGateway();
    oidc.idp.misbehave('slow');
    const [discovered, fetched] = [oidc.idp.requests(DISCOVERY_PATH).length, oidc.idp.jwksFetches()];
    const starts = await Promise.all([start(gw), start(gw)]);
    expect(oidc.idp.requests(DISCOVERY_PATH).length - discovered).toBe(1);
    const backs: URL[] = [];
    for (const started of starts) {
      const subject = `sub-${randomUUID()}`;
      oidc.idp.users.set(subject, { email: newEmail('answers'), email_verified: true });
      backs.push(await signInAtProvider(started.location, subject));
    }
    // Both callbacks at once: each needs the key set, which answers 300 ms late.
    const fragments = await Promise.all(starts.map((started, i) => callback(gw, started, backs[i]!)));
    expect(fragments.map((f) => Object.keys(f))).toEqual([['login_code'], ['login_code']]);
    expect(oidc.idp.jwksFetches() - fetched).toBe(1);
    expect(oidc.idp.requests('/jwks').at(-1)!.accept).toBe('application/json');
    // Both kept: another sign-in fetches neither.
    expect((await signIn(gw)).fragment.login_code).toBeTruthy();
    expect([oidc.idp.requests(DISCOVERY_PATH).length - discovered, oidc.idp.jwksFetches() - fetched]).toEqual([1, 1]);
  });

  it('a provider whose discovery does not answer: after 10 s, #error=provider_error and no cookie', async () => {
    const gw = await freshGateway();
    oidc.idp.misbehave('discovery-hangs');
    const returnTo = encodeURIComponent(RETURN_TO);
    const since = Date.now();
    const res = await gw.get(`/api/v1/auth/oidc/testidp/start?return_to=${returnTo}&code_challenge=${s256(randomBytes(32).toString('base64url'))}`);
    expect([res.status, res.headers.location, res.headers['set-cookie']]).toEqual([302, `${RETURN_TO}#error=provider_error`, undefined]);
    // The provider's own answer would come at 15 s.
    expect(Date.now() - since).toBeGreaterThanOrEqual(9_500);
    expect(Date.now() - since).toBeLessThan(14_000);
    expect(gw.logs.join('')).toMatch(/"reason":"discovery failed: \w[^"]*","msg":"identity provider unavailable"/);
  });

  it('an https provider: signs in; its discovery naming an http:// token endpoint: #error=provider_error, the code never sent there', async () => {
    expect(secure.idp.issuer).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const linksAtSecure = (subject: string) => sql('SELECT user_id FROM user_identities WHERE issuer = $1 AND subject = $2', [secure.idp.issuer, subject]);
    const signedIn = await secure.signIn(await secure.gatewayWith({ trustEmail: true }));
    expect(signedIn.fragment.login_code).toMatch(/^[\w-]{43}$/);
    expect(await linksAtSecure(signedIn.subject)).toHaveLength(1);
    const gw = await secure.gatewayWith({ trustEmail: true });
    secure.idp.misbehave('token-endpoint-http');
    const exchanges = secure.idp.requests('/token').length;
    const refused = await secure.signIn(gw);
    expect(refused.fragment).toEqual({ error: 'provider_error' });
    expect(secure.idp.requests('/token').length - exchanges).toBe(0);
    expect(await linksAtSecure(refused.subject)).toEqual([]);
    expect(refusals(gw)).toEqual([{ code: 'provider_error', reason: expect.stringMatching(/^code exchange failed: .*HTTPS/) }]);
  });

  it('a provider that cannot be reached (connection refused): #error=provider_error, the cause logged', async () => {
    // Not port 1 (refusedPort): fetch refuses the ports the Fetch standard bars ("bad port") without connecting.
    const port = await sparePort();
    const gw = await oidc.gatewayWith({ trustEmail: true, issuer: `http://127.0.0.1:${port}` });
    const res = await gw.get(`/api/v1/auth/oidc/testidp/start?return_to=${encodeURIComponent(RETURN_TO)}&code_challenge=${s256(randomBytes(32).toString('base64url'))}`);
    expect([res.status, res.headers.location]).toEqual([302, `${RETURN_TO}#error=provider_error`]);
    const unavailable = gw.logs.flatMap((line) => line.split('\n')).filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((entry) => entry.msg === 'identity provider unavailable').map(({ provider, reason }) => ({ provider, reason }));
    expect(unavailable).toEqual([{ provider: 'testidp', reason: `discovery failed: fetch failed (connect ECONNREFUSED 127.0.0.1:${port})` }]);
  });

  it('a token response without token_type is the provider\'s fault (#error=provider_error), not the ID token\'s', async () => {
    const gw = await freshGateway();
    oidc.idp.misbehave('token-without-type');
    const refused = await signIn(gw);
    expect(refused.fragment).toEqual({ error: 'provider_error' });
    expect(await linksOf(refused.subject)).toEqual([]);
    expect(refusals(gw)).toEqual([{ code: 'provider_error', reason: expect.stringMatching(/^code exchange failed: \w/) }]);
  });

  it('UserInfo failing: #error=provider_error, nobody signed in', async () => {
    const gw = await freshGateway();
    oidc.idp.misbehave('userinfo-fails');
    const refused = await signIn(gw);
    expect(refused.fragment).toEqual({ error: 'provider_error' });
    expect(await linksOf(refused.subject)).toEqual([]);
    expect(refusals(gw)).toEqual([{ code: 'provider_error', reason: expect.stringMatching(/^userinfo failed: \w/) }]);
  });

  it('UserInfo is asked only when the ID token has no email: a provider without it signs in no one without an email', async () => {
    const gw = await freshGateway();
    const asked = oidc.idp.requests('/me').length;
    // The email in the ID token: taken from there, UserInfo not asked.
    oidc.idp.misbehave('email-in-id-token');
    const email = newEmail('in-token');
    const inToken = await signIn(gw, { email, email_verified: true });
    expect(inToken.fragment.login_code).toBeTruthy();
    expect(await sql('SELECT email_verified_at IS NOT NULL AS verified FROM users WHERE email = $1', [email])).toEqual([{ verified: true }]);
    expect(oidc.idp.requests('/me').length - asked).toBe(0);
    // As the provider answers by default, the email at UserInfo only: asked there, with the access token.
    oidc.idp.misbehave('none');
    expect((await signIn(gw)).fragment.login_code).toBeTruthy();
    expect(oidc.idp.requests('/me').length - asked).toBe(1);
    expect(oidc.idp.requests('/me').at(-1)!.authorization).toMatch(/^Bearer \S+$/);
    // An email that is not a string (a list) is no email: no account.
    const listed = await signIn(gw, { email: [newEmail('a'), newEmail('b')] as unknown as string, email_verified: true });
    expect(listed.fragment).toEqual({ error: 'email_unverified' });
    expect(await linksOf(listed.subject)).toEqual([]);
    // No UserInfo endpoint (on a gateway that discovers anew): no email, no account.
    const bare = await freshGateway();
    oidc.idp.misbehave('no-userinfo');
    const anonymous = await signIn(bare);
    expect(anonymous.fragment).toEqual({ error: 'email_unverified' });
    expect(await linksOf(anonymous.subject)).toEqual([]);
    expect(oidc.idp.requests('/me').length - asked).toBe(2);
  });
});
