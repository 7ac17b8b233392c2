// What the SAML tests share: a gateway with organizations.sso, an organization whose owner made a
// SAML connection from a scripted IdP's metadata, a verified domain, and a sign-in walked to the ACS.
import { randomBytes, randomUUID } from 'node:crypto';
import { s256 } from '../../src/auth/providers/signInProvider.js';
import type { Config } from '../../src/config/schema.js';
import { bearer, makeUser, sql, testConfig, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { authnRequestOf, encode, idpMetadata, newIdpKeys, responseXml, signResponse, type IdpKeys, type ResponseSpec } from '../helpers/samlIdp.js';

export const PUBLIC_URL = 'http://127.0.0.1:9';
export const RETURN_TO = 'https://app.example.test/signed-in';
export const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

/** `sso`: organizations.sso's settings (trustIdpMfa); `more`: other blocks (upstreams, routes). */
export function ssoConfig(publicUrl = PUBLIC_URL, sso: Record<string, unknown> = {}, more: Record<string, unknown> = {}): Config {
  return testConfig({
    ...more,
    auth: { oidc: { publicUrl, returnTo: [RETURN_TO, 'https://app.example.test/sso-start'], providers: {} } },
    mail: { smtp: '', from: 'x@example.test', resetUrl: 'https://a.example/r?token={token}', verifyUrl: 'https://a.example/v?token={token}', invitationUrl: 'https://a.example/j?token={token}' },
    organizations: { enabled: true, sso },
    errors: { codes: true },
  });
}

export interface Connected {
  owner: TestUser;
  orgId: number;
  domain: string;
  keys: IdpKeys;
  entityId: string;
  connection: Record<string, unknown> & { id: string; acs_url: string; sp_entity_id: string };
}

/** `domain` (in its stored form) verified for the organization by SQL, as an operator would. */
export async function verifyDomain(orgId: number, domain: string): Promise<void> {
  await sql(`INSERT INTO org_domains (org_id, domain, status, txt_value, verified_by, verified_at, expires_at)
             VALUES ($1, $2, 'verified', 'x', 'operator', now(), now() + interval '7 days')`, [orgId, domain]);
}

/** A verified owner (email verified by SQL), an organization, a verified domain and a connection with `settings`. */
export async function connect(gw: TestGateway, settings: Record<string, unknown> = {}, keys = newIdpKeys()): Promise<Connected> {
  const owner = await makeUser(gw);
  await sql('UPDATE users SET email_verified_at = now() WHERE id = $1', [owner.id]);
  const created = await gw.post('/api/v1/orgs', { name: 'Corp' }, { headers: bearer(owner.access) });
  if (created.status !== 201) throw new Error(`org: ${created.status} ${created.text}`);
  const orgId = created.json.id as number;
  const domain = `corp-${randomUUID().slice(0, 8)}.test`;
  await verifyDomain(orgId, domain);
  const entityId = `https://idp-${randomUUID().slice(0, 8)}.example.test/metadata`;
  const put = await gw.request('PUT', `/api/v1/orgs/${orgId}/sso/saml`, {
    headers: bearer(owner.access), json: { metadata_xml: idpMetadata(entityId, 'https://idp.example.test/sso', [keys]), ...settings },
  });
  if (put.status !== 200) throw new Error(`put: ${put.status} ${put.text}`);
  return { owner, orgId, domain, keys, entityId, connection: put.json };
}

export interface Started {
  verifier: string;
  requestId: string;
  relayState: string;
}

/** GET /api/v1/auth/sso for the organization: the AuthnRequest the browser carries to the IdP. */
export async function startSignIn(gw: TestGateway, c: Connected): Promise<Started> {
  const verifier = randomBytes(32).toString('base64url');
  const res = await gw.get(`/api/v1/auth/sso?org=${c.orgId}&return_to=${encodeURIComponent(RETURN_TO)}&code_challenge=${s256(verifier)}`);
  if (res.status !== 302) throw new Error(`start: ${res.status} ${res.text}`);
  const request = authnRequestOf(String(res.headers.location));
  return { verifier, requestId: request.id, relayState: request.relayState };
}

/** The Response a well-behaved IdP writes for that request, with `overrides`. */
export function goodSpec(c: Connected, started: Started | undefined, overrides: Partial<ResponseSpec> = {}): ResponseSpec {
  return {
    issuer: c.entityId, destination: c.connection.acs_url, audience: c.connection.sp_entity_id, recipient: c.connection.acs_url,
    inResponseTo: started?.requestId, nameId: `user-${randomUUID().slice(0, 8)}@${c.domain}`, ...overrides,
  };
}

/** Posts the Response to the ACS as the browser would. */
export function postAcs(gw: TestGateway, c: Connected, xml: string, relayState?: string) {
  const form = new URLSearchParams({ SAMLResponse: encode(xml), ...(relayState ? { RelayState: relayState } : {}) }).toString();
  return gw.request('POST', new URL(c.connection.acs_url).pathname, { headers: FORM, body: form });
}

/** The fragment of a 302 to return_to, as the application reads it. */
export function fragmentOf(location: unknown): Record<string, string> {
  const url = new URL(String(location));
  return Object.fromEntries(new URLSearchParams(url.hash.slice(1)));
}

/** A whole happy sign-in: the signed Response posted; the ACS's answer. */
export async function signIn(gw: TestGateway, c: Connected, overrides: Partial<ResponseSpec> = {}) {
  const started = await startSignIn(gw, c);
  const spec = goodSpec(c, started, overrides);
  const res = await postAcs(gw, c, signResponse(responseXml(spec).xml, c.keys), started.relayState);
  return { started, spec, res };
}
