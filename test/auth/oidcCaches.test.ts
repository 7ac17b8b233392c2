// One OpenID Connect provider as the sign-in routes use it (src/auth/providers/oidc.ts), against a
// real provider on loopback (test/helpers/oidcProvider.ts): how long its discovery document (an
// hour) and its key set (ten minutes) are kept, counted in the requests the provider receives,
// and what the sign-in asserts (Google's `hd`, which only a Google issuer's rule reads, so no
// sign-in through a gateway can show it). No gateway and no database here: the time is moved
// with vitest's fake Date, which nothing else in this file reads.
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { GitHubProvider } from '../../src/auth/providers/github.js';
import { SignInProviders } from '../../src/auth/providers/configured.js';
import { OidcProvider } from '../../src/auth/providers/oidc.js';
import { flowSecrets, type Assertion } from '../../src/auth/providers/signInProvider.js';
import { configSchema } from '../../src/config/schema.js';
import { DISCOVERY_PATH, signInAtProvider, startTestProvider, type TestProvider } from '../helpers/oidcProvider.js';

const PUBLIC_URL = 'http://localhost:9';
const REDIRECT_URI = `${PUBLIC_URL}/api/v1/auth/oidc/testidp/callback`;
const MINUTE = 60_000;

describe('an OpenID Connect provider\'s discovery, keys and assertion', () => {
  let idp: TestProvider;

  beforeAll(async () => {
    idp = await startTestProvider([REDIRECT_URI]);
  });
  afterAll(() => idp?.close());
  afterEach(() => {
    vi.useRealTimers();
    idp.misbehave('none');
  });

  /** A provider as the gateway makes it from its configuration, nothing fetched yet. */
  function provider(): OidcProvider {
    const settings = configSchema.parse({
      auth: { oidc: { publicUrl: PUBLIC_URL, returnTo: ['https://app.example.test/'], providers: { testidp: { issuer: idp.issuer, clientId: idp.clientId, clientSecret: idp.clientSecret, scopes: ['openid', 'email'] } } } },
    }).auth.oidc!.providers.testidp!;
    if (settings.kind !== 'oidc') throw new Error('an OpenID Connect provider was configured');
    return new OidcProvider('testidp', settings, REDIRECT_URI);
  }
  /** A sign-in of a fresh subject, the callback's query handed to the provider as the route does. */
  async function signIn(p: OidcProvider, user = { email: `${randomUUID()}@example.test`, email_verified: true }): Promise<Assertion & { sub: string }> {
    const secrets = flowSecrets(randomBytes(32).toString('base64url'));
    const sub = `sub-${randomUUID()}`;
    idp.users.set(sub, user);
    const back = await signInAtProvider(await p.authorizationUrl(secrets), sub);
    return { ...(await p.signIn({ via: 'query', params: back.searchParams }, secrets)), sub };
  }
  /** Time frozen at `at` ms after the test's start: Date alone is faked (timers run, so do the provider's sockets). */
  function frozenAt(t0: number, at: number): void {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(t0 + at);
  }

  it('each configured provider by its kind and name: GitHub\'s, an OpenID Connect one, none for another name', () => {
    const providers = new SignInProviders(configSchema.parse({
      auth: { oidc: { publicUrl: PUBLIC_URL, returnTo: ['https://app.example.test/'], providers: {
        gh: { kind: 'github', clientId: 'c', clientSecret: 's' }, testidp: { issuer: idp.issuer, clientId: 'c', clientSecret: 's' },
      } } },
    }).auth.oidc!);
    expect(providers.get('gh')).toBeInstanceOf(GitHubProvider);
    expect(providers.get('testidp')).toBeInstanceOf(OidcProvider);
    for (const name of ['other', '__proto__', 'constructor']) expect(providers.get(name), name).toBeUndefined();
    expect([providers.issuerOf('gh'), providers.issuerOf('testidp'), providers.issuerOf('other')]).toEqual(['https://github.com', idp.issuer, undefined]);
  });

  it('the discovery document is kept an hour: asked again at the hour, not a millisecond before', async () => {
    const p = provider();
    const t0 = Date.now();
    const discovered = () => idp.requests(DISCOVERY_PATH).length;
    const before = discovered();
    const secrets = flowSecrets(randomBytes(32).toString('base64url'));
    frozenAt(t0, 0);
    await p.authorizationUrl(secrets);
    await p.authorizationUrl(secrets);
    expect(discovered() - before).toBe(1);
    frozenAt(t0, 60 * MINUTE - 1);
    await p.authorizationUrl(secrets);
    expect(discovered() - before).toBe(1);
    frozenAt(t0, 60 * MINUTE);
    await p.authorizationUrl(secrets);
    expect(discovered() - before).toBe(2);
  });

  it('the key set is kept ten minutes: fetched again at the tenth, not a millisecond before', async () => {
    const p = provider();
    const t0 = Date.now();
    const fetched = idp.jwksFetches();
    frozenAt(t0, 0);
    await signIn(p);
    await signIn(p);
    expect(idp.jwksFetches() - fetched).toBe(1);
    frozenAt(t0, 10 * MINUTE - 1);
    await signIn(p);
    expect(idp.jwksFetches() - fetched).toBe(1);
    frozenAt(t0, 10 * MINUTE);
    await signIn(p);
    expect(idp.jwksFetches() - fetched).toBe(2);
  });

  it('the assertion: the configured issuer, the subject, the email as UserInfo gave it, and the ID token\'s hd when it has one', async () => {
    const p = provider();
    const email = `Ada.${randomUUID()}@Corp.test`;
    const plain = await signIn(p, { email, email_verified: true });
    expect(plain).toEqual({ issuer: idp.issuer, subject: plain.sub, email, emailVerified: true, hostedDomain: undefined, sub: plain.sub });
    idp.misbehave('hd');
    const hosted = await signIn(p, { email, email_verified: false });
    expect(hosted).toEqual({ issuer: idp.issuer, subject: hosted.sub, email, emailVerified: false, hostedDomain: 'corp.test', sub: hosted.sub });
    // An hd that is not a string is none.
    idp.misbehave('hd-not-a-string');
    expect((await signIn(p, { email, email_verified: true })).hostedDomain).toBeUndefined();
  });
});
