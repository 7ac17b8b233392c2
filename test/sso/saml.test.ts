// SAML connections and sign-in (CONTRACT §31) against a scripted IdP: the connection's endpoints,
// a signed Response and a signed Assertion signing a user in to the organization with its mapped
// role, through §15's exchange (amr ["fed"], login.succeeded with data.method "saml"). The gateway
// trusts IdPs' MFA (organizations.sso.trustIdpMfa): a listed AuthnContextClassRef gives aal2.
import { X509Certificate } from 'node:crypto';
import { domainToASCII } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bearer, claims, closeSql, describeWithServices, loggedLines, makeUser, sql, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { idpMetadata, responseXml, signAssertion } from '../helpers/samlIdp.js';
import { authenticator } from '../helpers/totp.js';
import { connect, fragmentOf, goodSpec, postAcs, RETURN_TO, signIn, ssoConfig, startSignIn, verifyDomain } from './samlHelpers.js';

describeWithServices('SAML connections and sign-in', () => {
  let gw: TestGateway;
  beforeAll(async () => { gw = await startTestGateway(ssoConfig(undefined, { trustIdpMfa: true })); });
  afterAll(async () => {
    await gw?.close();
    await closeSql();
  });

  it('PUT makes the connection from the metadata: its own id, SP URLs under publicUrl, the IdP certificate by fingerprint; GET and the SP metadata read it', async () => {
    const c = await connect(gw, { roleMapping: { admins: 'admin' }, attributes: { groups: 'groups' } });
    const fingerprint = new X509Certificate(c.keys.certificatePem).fingerprint256.replaceAll(':', '').toLowerCase();
    expect(c.connection).toMatchObject({
      org_id: c.orgId, idp_entity_id: c.entityId, idp_certificates: [{ sha256: fingerprint }],
      sp_entity_id: `http://127.0.0.1:9/api/v1/auth/saml/${c.connection.id}/metadata`, acs_url: `http://127.0.0.1:9/api/v1/auth/saml/${c.connection.id}/acs`,
      metadata_url: `http://127.0.0.1:9/api/v1/auth/saml/${c.connection.id}/metadata`,
      enforce: false, allowJit: true, roleMapping: { admins: 'admin' },
    });
    expect(c.connection.id).toMatch(/^saml_[A-Za-z0-9_-]{16}$/);
    const read = await gw.get(`/api/v1/orgs/${c.orgId}/sso/saml`, { headers: bearer(c.owner.access) });
    expect([read.status, read.json.id]).toEqual([200, c.connection.id]);
    const metadata = await gw.get(`/api/v1/auth/saml/${c.connection.id}/metadata`);
    expect(metadata.status).toBe(200);
    expect(metadata.headers['content-type']).toContain('application/samlmetadata+xml');
    expect(metadata.text).toContain(`entityID="${c.connection.sp_entity_id}"`);
    expect(metadata.text).toContain(`Location="${c.connection.acs_url}"`);
    // The private key is stored encrypted, never as PEM.
    const [row] = await sql<{ sp_key_encrypted: string }>('SELECT sp_key_encrypted FROM saml_connections WHERE id = $1', [c.connection.id]);
    expect(row!.sp_key_encrypted).not.toContain('PRIVATE KEY');
    // The SP's certificate names the connection it is for.
    const [sp] = await sql<{ sp_certificate: string }>('SELECT sp_certificate FROM saml_connections WHERE id = $1', [c.connection.id]);
    expect(new X509Certificate(sp!.sp_certificate).subject).toBe(`CN=auth-gateway SAML ${c.connection.id}`);
    // A second PUT keeps the id (the IdP imported the SP metadata).
    const again = await gw.request('PUT', `/api/v1/orgs/${c.orgId}/sso/saml`, { headers: bearer(c.owner.access), json: { metadata_xml: idpMetadata(c.entityId, 'https://idp.example.test/sso', [c.keys]), allowJit: false } });
    expect([again.status, again.json.id, again.json.allowJit, again.json.roleMapping]).toEqual([200, c.connection.id, false, { admins: 'admin' }]);
  });

  it('PUT refuses metadata that is no IdP\'s, a DOCTYPE, an http SSO off loopback, no signing certificate, a NUL; takes it indented; a member may not read it; no connection is 404', async () => {
    const c = await connect(gw);
    const put = (metadata_xml: string) => gw.request('PUT', `/api/v1/orgs/${c.orgId}/sso/saml`, { headers: bearer(c.owner.access), json: { metadata_xml } });
    const good = idpMetadata(c.entityId, 'https://idp.example.test/sso', [c.keys]);
    for (const bad of ['not xml', `<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>${good}`, good.replace('https://idp.example.test/sso', 'http://idp.example.test/sso'),
      good.replace(/<md:KeyDescriptor[\s\S]*<\/md:KeyDescriptor>/, '')]) {
      const res = await put(bad);
      expect([res.status, res.json.code]).toEqual([400, 'bad_request']);
    }
    // A KeyDescriptor without `use` is for signing and encryption both (SAML metadata §2.4.1.1).
    const noUse = await put(good.replace('<md:KeyDescriptor use="signing">', '<md:KeyDescriptor>'));
    expect([noUse.status, noUse.json.idp_certificates?.length]).toEqual([200, 1]);
    // Metadata as IdPs publish it, indented over lines (CRLF from a Windows download): accepted; a NUL is not.
    const pretty = good.replaceAll('><', '>\r\n\t<');
    expect((await put(pretty)).status).toBe(200);
    const nul = await put(pretty.replace('<md:NameIDFormat>', '<md:NameIDFormat>\u0000'));
    expect([nul.status, nul.json.code]).toEqual([400, 'bad_request']);
    const stranger = await makeUser(gw);
    expect((await gw.get(`/api/v1/orgs/${c.orgId}/sso/saml`, { headers: bearer(stranger.access) })).status).toBe(404);
    const deleted = await gw.request('DELETE', `/api/v1/orgs/${c.orgId}/sso/saml`, { headers: bearer(c.owner.access) });
    expect(deleted.status).toBe(200);
    const gone = await gw.get(`/api/v1/orgs/${c.orgId}/sso/saml`, { headers: bearer(c.owner.access) });
    expect([gone.status, gone.json.code]).toEqual([404, 'sso_connection_not_found']);
    const events = await sql<{ type: string }>("SELECT type FROM audit_events WHERE data->>'org_id' = $1 AND type LIKE 'sso.%' ORDER BY id", [String(c.orgId)]);
    expect(events.map((e) => e.type)).toEqual(['sso.connection_updated', 'sso.connection_updated', 'sso.connection_updated', 'sso.connection_deleted']);
  });

  it('PUT and DELETE are the owner\'s alone (an admin reads); metadata of 1 to 262,144 characters; a refusal logged with its reason; ids that are none are 404', async () => {
    const c = await connect(gw);
    const url = `/api/v1/orgs/${c.orgId}/sso/saml`;
    const admin = await makeUser(gw);
    await sql('UPDATE users SET email_verified_at = now() WHERE id = $1', [admin.id]);
    await sql("INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'admin')", [c.orgId, admin.id]);
    const good = idpMetadata(c.entityId, 'https://idp.example.test/sso', [c.keys]);
    const asAdmin = { headers: bearer(admin.access) };
    expect((await gw.get(url, asAdmin)).json.id).toBe(c.connection.id);
    const replaced = await gw.request('PUT', url, { ...asAdmin, json: { metadata_xml: good, enforce: true } });
    expect([replaced.status, replaced.json.code]).toEqual([403, 'role_insufficient']);
    const removed = await gw.request('DELETE', url, asAdmin);
    expect([removed.status, removed.json.code]).toEqual([403, 'role_insufficient']);
    expect(await sql("SELECT settings->>'enforce' AS enforce FROM saml_connections WHERE org_id = $1", [c.orgId])).toEqual([{ enforce: 'false' }]);

    // The metadata's size: up to 256 KiB (whitespace after the root is XML's), not one more, never empty.
    const put = (metadata_xml: string) => gw.request('PUT', url, { headers: bearer(c.owner.access), json: { metadata_xml } });
    const largest = good + ' '.repeat(256 * 1024 - good.length);
    expect((await put(largest)).status).toBe(200);
    for (const bad of [`${largest} `, '']) expect([(await put(bad)).status, bad.length]).toEqual([400, bad.length]);
    // A body that is no object, metadata that is no string: 400 before anything is read.
    for (const json of [null, [good], good, { metadata_xml: 5 }, { metadata_xml: [good] }]) {
      const res = await gw.request('PUT', url, { headers: bearer(c.owner.access), json });
      expect([res.status, res.json.code], JSON.stringify(json).slice(0, 40)).toEqual([400, 'bad_request']);
    }
    // Metadata refused: 400, and the reason in the log line, never in the answer (a size or a
    // shape refused above is said by the 400 alone: no metadata was read).
    const refusal = await put(good.replace(/<md:KeyDescriptor[\s\S]*<\/md:KeyDescriptor>/, ''));
    expect([refusal.status, refusal.json]).toEqual([400, { error: 'Requête invalide', code: 'bad_request' }]);
    expect(loggedLines(gw, 'SAML metadata refused').filter((line) => line.org === c.orgId).map((line) => line.reason)).toEqual(['no signing certificate']);
    // Settings the PUT cannot take (an owner's role mapped from a group): 400, nothing written.
    const owners = await gw.request('PUT', url, { headers: bearer(c.owner.access), json: { metadata_xml: good, roleMapping: { bosses: 'owner' } } });
    expect([owners.status, owners.json.code]).toEqual([400, 'bad_request']);
    expect(await sql("SELECT settings->'roleMapping' AS mapping FROM saml_connections WHERE org_id = $1", [c.orgId])).toEqual([{ mapping: {} }]);

    // The owner's DELETE answers its message; a second finds none.
    const deleted = await gw.request('DELETE', url, { headers: bearer(c.owner.access) });
    expect([deleted.status, deleted.json]).toEqual([200, { message: 'Connexion d\'organisation supprimée' }]);
    const again = await gw.request('DELETE', url, { headers: bearer(c.owner.access) });
    expect([again.status, again.json.code]).toEqual([404, 'sso_connection_not_found']);
    // An id past what an organization's can be: 404 org_not_found, as an organization of another's.
    for (const method of ['PUT', 'DELETE']) {
      const none = await gw.request(method, '/api/v1/orgs/9999999999/sso/saml', { headers: bearer(c.owner.access), ...(method === 'PUT' ? { json: { metadata_xml: good } } : {}) });
      expect([none.status, none.json.code], method).toEqual([404, 'org_not_found']);
    }
  });

  it('a signed Response signs a new user in: JIT account with the email verified, member of the organization, a login code traded for tokens with amr ["fed"]', async () => {
    const c = await connect(gw);
    const { started, spec, res } = await signIn(gw, c);
    expect(res.status, res.text).toBe(302);
    expect(String(res.headers.location).startsWith(`${RETURN_TO}#`)).toBe(true);
    const fragment = fragmentOf(res.headers.location);
    expect(Object.keys(fragment)).toEqual(['login_code']);
    const pair = await gw.post('/api/v1/auth/oidc/exchange', { login_code: fragment.login_code, code_verifier: started.verifier });
    expect(pair.status, pair.text).toBe(200);
    expect(claims(pair.json.access_token)).toMatchObject({ amr: ['fed'], acr: 'aal1' });
    const [user] = await sql<{ id: number; verified: boolean; password_hash: string | null }>(
      'SELECT id, email_verified_at IS NOT NULL AS verified, password_hash FROM users WHERE email = $1', [spec.nameId]);
    expect(user).toMatchObject({ verified: true, password_hash: null });
    expect(await sql('SELECT role FROM memberships WHERE org_id = $1 AND user_id = $2', [c.orgId, user!.id])).toEqual([{ role: 'member' }]);
    const login = await sql<{ data: Record<string, unknown> }>("SELECT data FROM audit_events WHERE user_id = $1 AND type = 'login.succeeded'", [user!.id]);
    expect(login.map((e) => e.data.method)).toEqual(['saml']);
  });

  it('trustIdpMfa on: an AuthnContextClassRef of the connection\'s mfaContexts gives aal2 (amr fed, mfa), another aal1; a gateway TOTP still asks its step; sessions keep the connection', async () => {
    const mfaContext = 'https://refeds.org/profile/mfa';
    const c = await connect(gw, { mfaContexts: [mfaContext] });
    const exchange = async (overrides: Parameters<typeof signIn>[2]) => {
      const { started, spec, res } = await signIn(gw, c, overrides);
      expect(res.status, res.text).toBe(302);
      const pair = await gw.post('/api/v1/auth/oidc/exchange', { login_code: fragmentOf(res.headers.location).login_code, code_verifier: started.verifier });
      return { email: spec.nameId, pair };
    };
    const strong = await exchange({ authnContext: mfaContext });
    expect(claims(strong.pair.json.access_token)).toMatchObject({ amr: ['fed', 'mfa'], acr: 'aal2' });
    const weak = await exchange({ authnContext: 'urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport' });
    expect(claims(weak.pair.json.access_token)).toMatchObject({ amr: ['fed'], acr: 'aal1' });
    // A user with the gateway's own TOTP gets §14's step at the exchange, the IdP's MFA or not.
    const token = weak.pair.json.access_token as string;
    const { secret } = (await gw.post('/api/v1/auth/mfa/totp/enroll', {}, { headers: bearer(token) })).json as { secret: string };
    expect((await gw.post('/api/v1/auth/mfa/totp/confirm', { code: authenticator.generate(secret) }, { headers: bearer(token) })).status).toBe(200);
    const stepped = await exchange({ nameId: weak.email, authnContext: mfaContext });
    expect([stepped.pair.status, stepped.pair.json.code]).toEqual([403, 'mfa_code_required']);
    const code = authenticator.clone({ epoch: Date.now() + 30_000 }).generate(secret);
    const verified = await gw.post('/api/v1/auth/mfa/verify', { mfa_token: stepped.pair.json.mfa_token, code });
    expect(verified.status, verified.text).toBe(200);
    expect(claims(verified.json.access_token)).toMatchObject({ amr: ['fed', 'mfa', 'otp'], acr: 'aal2' });
    const logins = await sql<{ amr: string[]; method: string }>(
      "SELECT e.data->'amr' AS amr, e.data->>'method' AS method FROM audit_events e JOIN users u ON u.id = e.user_id WHERE u.email = ANY($1) AND e.type = 'login.succeeded' ORDER BY e.id",
      [[strong.email, weak.email]]);
    expect(logins.map((e) => [e.amr, e.method])).toEqual([
      [['fed', 'mfa'], 'saml'], [['fed'], 'saml'], [['fed', 'mfa', 'otp'], 'saml'],
    ]);
    // Every session, the stepped one too, started through the connection (enforcement keeps them).
    const sessions = await sql<{ saml_connection_id: string }>(
      'SELECT s.saml_connection_id FROM sessions s JOIN users u ON u.id = s.user_id WHERE u.email = ANY($1)', [[strong.email, weak.email]]);
    expect(sessions).toEqual(Array(3).fill({ saml_connection_id: c.connection.id }));
  });

  it('a signed Assertion (Response unsigned) signs an existing verified account in, with the highest mapped role; an owner keeps owner', async () => {
    const c = await connect(gw, { attributes: { groups: 'groups' }, roleMapping: { staff: 'member', admins: 'admin' } });
    const started = await startSignIn(gw, c);
    const spec = goodSpec(c, started, { attributes: { groups: ['staff', 'admins', 'unmapped'] } });
    const res = await postAcs(gw, c, signAssertion(responseXml(spec).xml, c.keys), started.relayState);
    expect(res.status, res.text).toBe(302);
    expect(Object.keys(fragmentOf(res.headers.location))).toEqual(['login_code']);
    const [user] = await sql<{ id: number }>('SELECT id FROM users WHERE email = $1', [spec.nameId]);
    expect(await sql('SELECT role FROM memberships WHERE org_id = $1 AND user_id = $2', [c.orgId, user!.id])).toEqual([{ role: 'admin' }]);
    // The owner, by email in the domain: linked, and still owner whatever maps.
    const ownerEmail = `boss@${c.domain}`;
    await sql('UPDATE users SET email = $2 WHERE id = $1', [c.owner.id, ownerEmail]);
    const again = await signIn(gw, c, { nameId: ownerEmail, attributes: { groups: ['admins'] } });
    expect(again.res.status).toBe(302);
    expect(Object.keys(fragmentOf(again.res.headers.location))).toEqual(['login_code']);
    expect(await sql('SELECT role FROM memberships WHERE org_id = $1 AND user_id = $2', [c.orgId, c.owner.id])).toEqual([{ role: 'owner' }]);
    // The owner's account linked to the connection: the IdP vouched for the address, and the link is in the audit log.
    expect(await sql('SELECT provider, issuer, subject, email, vouched FROM user_identities WHERE user_id = $1', [c.owner.id]))
      .toEqual([{ provider: 'saml', issuer: `saml:${c.connection.id}`, subject: ownerEmail, email: ownerEmail, vouched: true }]);
    expect(await sql("SELECT actor, data FROM audit_events WHERE user_id = $1 AND type = 'oidc.linked'", [c.owner.id]))
      .toEqual([{ actor: 'system', data: { provider: 'saml', issuer: `saml:${c.connection.id}`, org_id: c.orgId, via: 'saml' } }]);
  });

  it('GET /sso by email finds the connection of the email\'s verified domain; an unknown domain is 404, a return_to not allowed 400', async () => {
    const c = await connect(gw);
    const challenge = 'a'.repeat(43);
    const byEmail = await gw.get(`/api/v1/auth/sso?email=someone@${c.domain}&return_to=${encodeURIComponent(RETURN_TO)}&code_challenge=${challenge}`);
    expect(byEmail.status).toBe(302);
    expect(String(byEmail.headers.location)).toMatch(/^https:\/\/idp\.example\.test\/sso\?SAMLRequest=/);
    // An internationalized domain, verified in its A-label form, found by a Unicode address too.
    const unicode = `bücher-${c.orgId}.test`;
    await verifyDomain(c.orgId, domainToASCII(unicode));
    const byUnicode = await gw.get(`/api/v1/auth/sso?email=${encodeURIComponent(`someone@${unicode}`)}&return_to=${encodeURIComponent(RETURN_TO)}&code_challenge=${challenge}`);
    expect([byUnicode.status, byUnicode.text]).toEqual([302, '']);
    const unknown = await gw.get(`/api/v1/auth/sso?email=someone@nowhere.test&return_to=${encodeURIComponent(RETURN_TO)}&code_challenge=${challenge}`);
    expect([unknown.status, unknown.json]).toEqual([404, { error: 'Aucune connexion d\'organisation', code: 'sso_connection_not_found' }]);
    const elsewhere = await gw.get(`/api/v1/auth/sso?org=${c.orgId}&return_to=${encodeURIComponent('https://evil.test/')}&code_challenge=${challenge}`);
    expect([elsewhere.status, elsewhere.json.code]).toEqual([400, 'redirect_not_allowed']);
  });
});
