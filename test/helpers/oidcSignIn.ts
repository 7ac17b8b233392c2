// A describe's OpenID Connect provider on loopback (oidcProvider.ts) and the gateways that sign in
// with it as `testidp`: started before the describe's tests, closed after them. What a sign-in is
// from the browser's side (start, the provider's login, the callback) is written once here, for the
// tests that vary the provider's answers or the provider's settings.
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect } from 'vitest';
import { s256 } from '../../src/auth/providers/oidc.js';
import { closeSql, startTestGateway, testConfig, type TestGateway } from './gateway.js';
import { signInAtProvider, startTestProvider, type ProviderUser, type TestProvider } from './oidcProvider.js';

export const PUBLIC_URL = 'http://localhost:9';
export const RETURN_TO = 'https://app.example.test/signed-in';

/** A sign-in begun at the gateway: where the browser is sent, its cookie, and the application's PKCE verifier for the exchange. */
export interface StartedSignIn { location: string; cookie: string; verifier: string }

export interface ProviderSetup {
  /** The provider (after the describe's beforeAll). */
  readonly idp: TestProvider;
  /** A gateway of its own (nothing of the provider cached yet) whose one provider, testidp, has these settings. */
  gatewayWith(settings: Record<string, unknown>): Promise<TestGateway>;
  /** A start on `gw`, answered with a redirect to the provider. */
  start(gw: TestGateway): Promise<StartedSignIn>;
  /** The browser back at the callback from the provider (`back`, where it sent it): the fragment it is sent back to the application with. */
  callback(gw: TestGateway, started: StartedSignIn, back: URL): Promise<Record<string, string>>;
  /** A whole sign-in of a fresh subject with `user`'s claims. */
  signIn(gw: TestGateway, user?: ProviderUser): Promise<{ fragment: Record<string, string>; subject: string; verifier: string }>;
}

/**
 * Registers the describe's hooks: the provider before its tests; every gateway made, the provider and the SQL pool closed after.
 * `tls`, read in beforeAll (a certificate made by an earlier hook): the provider serves https with it.
 */
export function withTestProvider(options: { tls?: () => { cert: string; key: string } } = {}): ProviderSetup {
  let idp: TestProvider | undefined;
  const gateways: TestGateway[] = [];
  beforeAll(async () => {
    idp = await startTestProvider([`${PUBLIC_URL}/api/v1/auth/oidc/testidp/callback`], { tls: options.tls?.() });
  });
  afterAll(async () => {
    await Promise.all(gateways.map((gw) => gw.close()));
    await idp?.close();
    await closeSql();
  });
  const setup: ProviderSetup = {
    get idp() {
      if (!idp) throw new Error('the test provider starts in beforeAll');
      return idp;
    },
    async gatewayWith(settings) {
      const { issuer, clientId, clientSecret } = setup.idp;
      const testidp = { issuer, clientId, clientSecret, scopes: ['openid', 'email'], ...settings };
      const gw = await startTestGateway(testConfig({ auth: { oidc: { publicUrl: PUBLIC_URL, returnTo: [RETURN_TO], providers: { testidp } } } }));
      gateways.push(gw);
      return gw;
    },
    async start(gw) {
      const verifier = randomBytes(32).toString('base64url');
      const res = await gw.get(`/api/v1/auth/oidc/testidp/start?return_to=${encodeURIComponent(RETURN_TO)}&code_challenge=${s256(verifier)}`);
      expect(res.status, res.text).toBe(302);
      return { location: String(res.headers.location), cookie: String((res.headers['set-cookie'] as string[])[0]).split(';')[0]!, verifier };
    },
    async callback(gw, started, back) {
      const res = await gw.get(`${back.pathname}${back.search}`, { headers: { cookie: started.cookie } });
      expect(res.status, res.text).toBe(302);
      const url = new URL(String(res.headers.location));
      expect(url.origin + url.pathname).toBe(RETURN_TO);
      return Object.fromEntries(new URLSearchParams(url.hash.slice(1)));
    },
    async signIn(gw, user = { email: `oidc-${randomUUID()}@example.test`, email_verified: true }) {
      const subject = `sub-${randomUUID()}`;
      setup.idp.users.set(subject, user);
      const started = await setup.start(gw);
      return { fragment: await setup.callback(gw, started, await signInAtProvider(started.location, subject)), subject, verifier: started.verifier };
    },
  };
  return setup;
}
