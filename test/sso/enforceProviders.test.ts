// SAML enforcement (CONTRACT §31) on an identity provider's sign-in: an address of an enforced
// domain comes back to the application with #error=sso_required, whether the provider would have
// made a new account or signed in to one it is linked to; a login code the provider gave before
// enforcement is refused at the exchange; another domain signs in as ever.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bearer, describeWithServices, sql, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';
import { signInAtProvider } from '../helpers/oidcProvider.js';
import { PUBLIC_URL, RETURN_TO, withTestProvider } from '../helpers/oidcSignIn.js';
import { connect } from './samlHelpers.js';

describeWithServices('SAML enforcement on provider sign-ins', () => {
  const setup = withTestProvider();
  let gw: TestGateway;
  beforeAll(async () => {
    const { issuer, clientId, clientSecret } = setup.idp;
    const testidp = { issuer, clientId, clientSecret, scopes: ['openid', 'email'], trustEmail: true };
    gw = await startTestGateway(testConfig({
      auth: { oidc: { publicUrl: PUBLIC_URL, returnTo: [RETURN_TO], providers: { testidp } } },
      mail: { smtp: '', from: 'x@example.test', resetUrl: 'https://a.example/r?token={token}', verifyUrl: 'https://a.example/v?token={token}', invitationUrl: 'https://a.example/j?token={token}' },
      organizations: { enabled: true, sso: {} },
    }));
  });
  // Before withTestProvider's own (hooks run as a stack): the SQL pool is still open.
  afterAll(async () => { await gw?.close(); });

  it('refuses a new and a linked address of the domain with #error=sso_required, and a code given before, and makes no account; another domain signs in', async () => {
    const c = await connect(gw);
    const linked = { email: `linked-${randomUUID().slice(0, 8)}@${c.domain}`, email_verified: true };
    // Linked before enforcement: the provider made the account.
    const first = await setup.signIn(gw, linked);
    expect(Object.keys(first.fragment)).toEqual(['login_code']);
    const [stored] = await sql<{ metadata_xml: string }>('SELECT metadata_xml FROM saml_connections WHERE org_id = $1', [c.orgId]);
    const on = await gw.request('PUT', `/api/v1/orgs/${c.orgId}/sso/saml`, { headers: bearer(c.owner.access), json: { metadata_xml: stored!.metadata_xml, enforce: true } });
    expect(on.status, on.text).toBe(200);
    // The code the provider gave before enforcement: refused at the exchange as every other way in.
    const late = await gw.post('/api/v1/auth/oidc/exchange', { login_code: first.fragment.login_code, code_verifier: first.verifier });
    expect([late.status, late.json]).toEqual([403, { error: 'Connexion par l\'organisation requise', sso_url: `${PUBLIC_URL}/api/v1/auth/sso?org=${c.orgId}` }]);
    // The same subject again (linked), and a new address of the domain.
    setup.idp.users.set(first.subject, linked);
    const started = await setup.start(gw);
    expect(await setup.callback(gw, started, await signInAtProvider(started.location, first.subject))).toEqual({ error: 'sso_required' });
    const newcomer = `new-${randomUUID().slice(0, 8)}@${c.domain}`;
    expect((await setup.signIn(gw, { email: newcomer, email_verified: true })).fragment).toEqual({ error: 'sso_required' });
    expect(await sql('SELECT id FROM users WHERE email = $1', [newcomer])).toEqual([]);
    expect(Object.keys((await setup.signIn(gw)).fragment)).toEqual(['login_code']);
  });
});
