// Providers vouch only for their domains (CONTRACT §26; issue 45, break 8a: any configured provider
// vouched for any address, so a provider anyone can run or sign up to took over the account of
// any email by linking). Per provider: trustEmail (default true for Google only), emailDomains,
// allowSignUp; against a real provider on loopback (test/helpers/oidcProvider.ts), which is not
// Google. Google's `hd` claim is checked on the pure rule (domainAllowed), as the provider's
// settings hold it.
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { domainAllowed, s256 } from '../../src/auth/providers/oidc.js';
import { configSchema } from '../../src/config/schema.js';
import { closeSql, describeWithServices, makeUser, marker, newEmail, sql, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';
import { signInAtProvider, startTestProvider, type ProviderUser, type TestProvider } from '../helpers/oidcProvider.js';

const PUBLIC_URL = 'http://localhost:9';
const RETURN_TO = 'https://app.example.test/signed-in';

describeWithServices('providers vouch only for their domains', () => {
  let idp: TestProvider;
  const gateways: TestGateway[] = [];

  beforeAll(async () => {
    idp = await startTestProvider([`${PUBLIC_URL}/api/v1/auth/oidc/testidp/callback`]);
  });
  afterAll(async () => {
    await Promise.all(gateways.map((gw) => gw.close()));
    await idp?.close();
    await closeSql();
  });

  /** A gateway whose one provider, testidp, has these settings. */
  async function gatewayWith(settings: Record<string, unknown>): Promise<TestGateway> {
    const testidp = { issuer: idp.issuer, clientId: idp.clientId, clientSecret: idp.clientSecret, scopes: ['openid', 'email'], ...settings };
    const gw = await startTestGateway(testConfig({ auth: { oidc: { publicUrl: PUBLIC_URL, returnTo: [RETURN_TO], providers: { testidp } } } }));
    gateways.push(gw);
    return gw;
  }

  /** A sign-in of a fresh subject with `user`'s claims, to the callback: the fragment it sends the browser back with. */
  async function signIn(gw: TestGateway, user: ProviderUser): Promise<{ fragment: URLSearchParams; subject: string }> {
    const subject = `sub-${randomUUID()}`;
    idp.users.set(subject, user);
    const started = await gw.get(`/api/v1/auth/oidc/testidp/start?return_to=${encodeURIComponent(RETURN_TO)}&code_challenge=${s256(randomBytes(32).toString('base64url'))}`);
    expect(started.status, started.text).toBe(302);
    const back = await signInAtProvider(String(started.headers.location), subject);
    const res = await gw.get(`${back.pathname}${back.search}`, { headers: { cookie: String((started.headers['set-cookie'] as string[])[0]).split(';')[0]! } });
    expect(res.status, res.text).toBe(302);
    const url = new URL(String(res.headers.location));
    expect(url.origin + url.pathname).toBe(RETURN_TO);
    return { fragment: new URLSearchParams(url.hash.slice(1)), subject };
  }
  const linksOf = (subject: string) => sql<{ user_id: number; vouched: boolean }>('SELECT user_id, vouched FROM user_identities WHERE issuer = $1 AND subject = $2', [idp.issuer, subject]);
  const userOf = (email: string) => sql<{ id: number; verified: boolean }>('SELECT id, email_verified_at IS NOT NULL AS verified FROM users WHERE email = $1', [email]);

  it('trustEmail defaults to false for a provider that is not Google: its "verified" links to no account (#error=account_exists) and verifies no new one', async () => {
    const gw = await gatewayWith({});
    const victim = await makeUser(gw);
    await sql('UPDATE users SET email_verified_at = now() WHERE id = $1', [victim.id]);
    const taker = await signIn(gw, { email: victim.email, email_verified: true });
    expect(Object.fromEntries(taker.fragment)).toEqual({ error: 'account_exists' });
    expect(await linksOf(taker.subject)).toEqual([]);
    // A new address: an account, but neither it nor the link is taken as vouched for.
    const email = newEmail('untrusted');
    const fresh = await signIn(gw, { email, email_verified: true });
    expect(fresh.fragment.get('login_code')).toMatch(/^[\w-]{43}$/);
    const [user] = await userOf(email);
    expect(user).toEqual({ id: expect.any(Number), verified: false });
    expect(await linksOf(fresh.subject)).toEqual([{ user_id: user!.id, vouched: false }]);
  });

  it('emailDomains: only addresses of a listed domain (exact, any case) link or sign up; others go back with #error=account_not_allowed', async () => {
    const t = marker();
    const gw = await gatewayWith({ trustEmail: true, emailDomains: [`Corp-${t}.TEST`] });
    const allowed = `ada.${t}@corp-${t}.test`;
    expect((await signIn(gw, { email: allowed.toUpperCase(), email_verified: true })).fragment.get('login_code')).toBeTruthy();
    expect(await userOf(allowed)).toEqual([{ id: expect.any(Number), verified: true }]);
    for (const email of [`eve.${t}@evil.test`, `eve.${t}@sub.corp-${t}.test`, `eve.${t}@corp-${t}.test.evil.test`, `eve.${t}@xcorp-${t}.test`]) {
      const { fragment, subject } = await signIn(gw, { email, email_verified: true });
      expect(Object.fromEntries(fragment), email).toEqual({ error: 'account_not_allowed' });
      expect(await linksOf(subject)).toEqual([]);
    }
    expect(await sql('SELECT id FROM users WHERE email LIKE $1', [`eve.${t}@%`])).toEqual([]);
    // Linking too: a verified account of another domain is not the provider's to vouch for.
    const outsider = await makeUser(gw);
    await sql('UPDATE users SET email_verified_at = now() WHERE id = $1', [outsider.id]);
    const link = await signIn(gw, { email: outsider.email, email_verified: true });
    expect(Object.fromEntries(link.fragment)).toEqual({ error: 'account_not_allowed' });
    expect(await linksOf(link.subject)).toEqual([]);
  });

  it('allowSignUp: false creates no account (#error=account_not_allowed), and still links an existing one', async () => {
    const gw = await gatewayWith({ trustEmail: true, allowSignUp: false });
    const email = newEmail('nosignup');
    const refused = await signIn(gw, { email, email_verified: true });
    expect(Object.fromEntries(refused.fragment)).toEqual({ error: 'account_not_allowed' });
    expect(await userOf(email)).toEqual([]);
    const member = await makeUser(gw);
    await sql('UPDATE users SET email_verified_at = now() WHERE id = $1', [member.id]);
    const linked = await signIn(gw, { email: member.email, email_verified: true });
    expect(linked.fragment.get('login_code')).toBeTruthy();
    expect(await linksOf(linked.subject)).toEqual([{ user_id: member.id, vouched: true }]);
  });
});

describe('the provider settings', () => {
  const provider = (settings: Record<string, unknown>) => configSchema.parse({
    auth: { oidc: { publicUrl: 'https://gw.example.test', returnTo: ['https://app.example.org/'], providers: { p: { clientId: 'c', clientSecret: 's', ...settings } } } },
  }).auth.oidc!.providers.p!;

  it('trustEmail is true by default for Google alone; allowSignUp true; emailDomains any', () => {
    const google = provider({ issuer: 'https://accounts.google.com' });
    expect([google.trustEmail, google.allowSignUp, google.emailDomains]).toEqual([true, true, undefined]);
    expect(provider({ issuer: 'https://accounts.google.com/' }).trustEmail).toBe(true);
    for (const issuer of ['https://login.microsoftonline.com/t/v2.0', 'https://accounts.google.com.evil.test', 'https://sso.example.com/realms/x']) {
      expect(provider({ issuer }).trustEmail, issuer).toBe(false);
    }
    expect(provider({ issuer: 'https://sso.example.com', trustEmail: true }).trustEmail).toBe(true);
    expect(provider({ issuer: 'https://accounts.google.com', trustEmail: false }).trustEmail).toBe(false);
  });

  it('for Google, a listed domain needs the ID token\'s hd to be the email\'s domain: a consumer account with a company address is refused', () => {
    const google = provider({ issuer: 'https://accounts.google.com', emailDomains: ['example.com'] });
    expect(domainAllowed(google, 'ada@example.com', 'example.com')).toBe(true);
    expect(domainAllowed(google, 'ada@Example.COM', 'EXAMPLE.com')).toBe(true);
    expect(domainAllowed(google, 'ada@example.com', undefined)).toBe(false);
    expect(domainAllowed(google, 'ada@example.com', 'other.com')).toBe(false);
    expect(domainAllowed(google, 'ada@other.com', 'other.com')).toBe(false);
    // Another provider has no hd to check; without emailDomains, any domain.
    expect(domainAllowed(provider({ issuer: 'https://sso.example.com', emailDomains: ['example.com'] }), 'ada@example.com', undefined)).toBe(true);
    expect(domainAllowed(provider({ issuer: 'https://accounts.google.com' }), 'ada@anything.test', undefined)).toBe(true);
  });
});
