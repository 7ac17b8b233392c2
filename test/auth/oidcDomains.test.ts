// Providers vouch only for their domains (CONTRACT §26; issue 45, break 8a: any configured provider
// vouched for any address, so a provider anyone can run or sign up to took over the account of
// any email by linking). Per provider: trustEmail (default true for Google only), emailDomains,
// allowSignUp; against a real provider on loopback (test/helpers/oidcProvider.ts), which is not
// Google. Google's `hd` claim is checked on the pure rule (domainAllowed), as the provider's
// settings hold it.
import { describe, expect, it } from 'vitest';
import { domainAllowed } from '../../src/auth/providers/configured.js';
import { configSchema } from '../../src/config/schema.js';
import { describeWithServices, makeUser, marker, newEmail, sql } from '../helpers/gateway.js';
import { withTestProvider } from '../helpers/oidcSignIn.js';

describeWithServices('providers vouch only for their domains', () => {
  const oidc = withTestProvider();
  const { gatewayWith, signIn } = oidc;
  const linksOf = (subject: string) => sql<{ user_id: number; vouched: boolean }>('SELECT user_id, vouched FROM user_identities WHERE issuer = $1 AND subject = $2', [oidc.idp.issuer, subject]);
  const userOf = (email: string) => sql<{ id: number; verified: boolean }>('SELECT id, email_verified_at IS NOT NULL AS verified FROM users WHERE email = $1', [email]);

  it('trustEmail defaults to false for a provider that is not Google: its "verified" links to no account (#error=account_exists) and verifies no new one', async () => {
    const gw = await gatewayWith({});
    const victim = await makeUser(gw);
    await sql('UPDATE users SET email_verified_at = now() WHERE id = $1', [victim.id]);
    const taker = await signIn(gw, { email: victim.email, email_verified: true });
    expect(taker.fragment).toEqual({ error: 'account_exists' });
    expect(await linksOf(taker.subject)).toEqual([]);
    // A new address: an account, but neither it nor the link is taken as vouched for.
    const email = newEmail('untrusted');
    const fresh = await signIn(gw, { email, email_verified: true });
    expect(fresh.fragment.login_code).toMatch(/^[\w-]{43}$/);
    const [user] = await userOf(email);
    expect(user).toEqual({ id: expect.any(Number), verified: false });
    expect(await linksOf(fresh.subject)).toEqual([{ user_id: user!.id, vouched: false }]);
  });

  it('emailDomains: only addresses of a listed domain (exact, any case) link or sign up; others go back with #error=account_not_allowed', async () => {
    const t = marker();
    const gw = await gatewayWith({ trustEmail: true, emailDomains: [`Corp-${t}.TEST`] });
    const allowed = `ada.${t}@corp-${t}.test`;
    expect((await signIn(gw, { email: allowed.toUpperCase(), email_verified: true })).fragment.login_code).toBeTruthy();
    expect(await userOf(allowed)).toEqual([{ id: expect.any(Number), verified: true }]);
    for (const email of [`eve.${t}@evil.test`, `eve.${t}@sub.corp-${t}.test`, `eve.${t}@corp-${t}.test.evil.test`, `eve.${t}@xcorp-${t}.test`]) {
      const { fragment, subject } = await signIn(gw, { email, email_verified: true });
      expect(fragment, email).toEqual({ error: 'account_not_allowed' });
      expect(await linksOf(subject)).toEqual([]);
    }
    expect(await sql('SELECT id FROM users WHERE email LIKE $1', [`eve.${t}@%`])).toEqual([]);
    // Linking too: a verified account of another domain is not the provider's to vouch for.
    const outsider = await makeUser(gw);
    await sql('UPDATE users SET email_verified_at = now() WHERE id = $1', [outsider.id]);
    const link = await signIn(gw, { email: outsider.email, email_verified: true });
    expect(link.fragment).toEqual({ error: 'account_not_allowed' });
    expect(await linksOf(link.subject)).toEqual([]);
  });

  it('allowSignUp: false creates no account (#error=account_not_allowed), and still links an existing one', async () => {
    const gw = await gatewayWith({ trustEmail: true, allowSignUp: false });
    const email = newEmail('nosignup');
    const refused = await signIn(gw, { email, email_verified: true });
    expect(refused.fragment).toEqual({ error: 'account_not_allowed' });
    expect(await userOf(email)).toEqual([]);
    const member = await makeUser(gw);
    await sql('UPDATE users SET email_verified_at = now() WHERE id = $1', [member.id]);
    const linked = await signIn(gw, { email: member.email, email_verified: true });
    expect(linked.fragment.login_code).toBeTruthy();
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
