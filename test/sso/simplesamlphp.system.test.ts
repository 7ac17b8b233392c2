// SAML sign-in against a real identity provider (CONTRACT §31, its last paragraph): Debian's
// SimpleSAMLphp 1.19 under `php -S` with a configuration of this file's own, and a gateway whose
// publicUrl is its own address, so that SimpleSAMLphp's Response form posts to the real ACS. A
// client walks it as a browser would (the gateway's /auth/sso, SimpleSAMLphp's login form, the
// auto-posted Response) for a signed Response, a signed Assertion and an encrypted Assertion; each
// ends with a login code traded at the exchange (amr ["fed"]) and an admin of the organization,
// the role mapped from SimpleSAMLphp's `groups` attribute.
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { s256 } from '../../src/auth/providers/signInProvider.js';
import { bearer, claims, closeSql, describeWithServices, makeUser, sql, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sparePort } from '../helpers/ports.js';
import { browseSignIn, startSimpleSamlPhp, type SimpleSamlPhp } from '../helpers/simpleSamlPhp.js';
import { fragmentOf, RETURN_TO, ssoConfig } from './samlHelpers.js';

/** A gateway listening where its publicUrl says (what SimpleSAMLphp's form posts to). */
async function gatewayAtItsPublicUrl(): Promise<TestGateway> {
  for (let attempt = 1; ; attempt++) {
    const port = await sparePort();
    const config = ssoConfig(`http://127.0.0.1:${port}`);
    try {
      return await startTestGateway({ ...config, server: { ...config.server, port } });
    } catch (err) {
      if (attempt >= 3 || (err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    }
  }
}

interface Case {
  name: string;
  signResponse: boolean;
  signAssertion: boolean;
  encryptAssertion: boolean;
  /** What the posted Response must show: where SimpleSAMLphp put its signature, or the encryption. */
  shape: (xml: string) => void;
}

const responseSignature = /<samlp:Response\b[^>]*>\s*<saml:Issuer>[^<]*<\/saml:Issuer>\s*<ds:Signature\b/;
const assertionSignature = /<saml:Assertion\b[^>]*>\s*<saml:Issuer>[^<]*<\/saml:Issuer>\s*<ds:Signature\b/;

const CASES: Case[] = [
  {
    name: 'a signed Response (saml20.sign.response, the Assertion unsigned)', signResponse: true, signAssertion: false, encryptAssertion: false,
    shape: (xml) => { expect(xml).toMatch(responseSignature); expect(xml).not.toMatch(assertionSignature); },
  },
  {
    name: 'a signed Assertion (the Response unsigned)', signResponse: false, signAssertion: true, encryptAssertion: false,
    shape: (xml) => { expect(xml).not.toMatch(responseSignature); expect(xml).toMatch(assertionSignature); },
  },
  {
    name: 'an encrypted (signed) Assertion, SimpleSAMLphp\'s default algorithms, to the connection\'s certificate', signResponse: false, signAssertion: true, encryptAssertion: true,
    shape: (xml) => {
      expect(xml).toContain('<saml:EncryptedAssertion>');
      expect(xml).not.toContain('<saml:Assertion');
      // SimpleSAMLphp 1.19's defaults: AES-128-CBC content, its key by RSA-OAEP (MGF1, SHA-1).
      expect(xml).toContain('Algorithm="http://www.w3.org/2001/04/xmlenc#aes128-cbc"');
      expect(xml).toContain('Algorithm="http://www.w3.org/2001/04/xmlenc#rsa-oaep-mgf1p"');
    },
  },
];

describeWithServices('SAML sign-in through SimpleSAMLphp', () => {
  let idp: SimpleSamlPhp;
  let gw: TestGateway;
  beforeAll(async () => {
    idp = await startSimpleSamlPhp();
    gw = await gatewayAtItsPublicUrl();
  });
  afterAll(async () => {
    await gw?.close();
    await idp?.stop();
    await closeSql();
  });

  /** An organization with a verified domain and a connection made from SimpleSAMLphp's published metadata, known to SimpleSAMLphp as an SP. */
  async function organization(c: Case) {
    const owner = await makeUser(gw);
    await sql('UPDATE users SET email_verified_at = now() WHERE id = $1', [owner.id]);
    const created = await gw.post('/api/v1/orgs', { name: 'Corp' }, { headers: bearer(owner.access) });
    expect(created.status, created.text).toBe(201);
    const orgId = created.json.id as number;
    const domain = `corp-${randomUUID().slice(0, 8)}.test`;
    await sql(`INSERT INTO org_domains (org_id, domain, status, txt_value, verified_by, verified_at, expires_at)
               VALUES ($1, $2, 'verified', 'x', 'operator', now(), now() + interval '7 days')`, [orgId, domain]);
    const metadata = await fetch(idp.metadataUrl);
    expect(metadata.status).toBe(200);
    const put = await gw.request('PUT', `/api/v1/orgs/${orgId}/sso/saml`, {
      headers: bearer(owner.access),
      json: { metadata_xml: await metadata.text(), attributes: { groups: 'groups' }, roleMapping: { staff: 'member', admins: 'admin' }, encryptAssertions: c.encryptAssertion },
    });
    expect(put.status, put.text).toBe(200);
    expect(put.json.idp_entity_id).toBe(idp.entityId);
    // SimpleSAMLphp learns the SP from the gateway's SP metadata: its entity ID, ACS and certificate.
    const sp = await gw.get(`/api/v1/auth/saml/${put.json.id}/metadata`);
    expect(sp.status).toBe(200);
    const certificate = /<(?:ds:)?X509Certificate>([^<]+)</.exec(sp.text)?.[1];
    expect(certificate).toBeDefined();
    idp.addSp({
      entityId: put.json.sp_entity_id, acsUrl: put.json.acs_url, certificatePem: `-----BEGIN CERTIFICATE-----\n${certificate}\n-----END CERTIFICATE-----\n`,
      signResponse: c.signResponse, signAssertion: c.signAssertion, encryptAssertion: c.encryptAssertion,
    });
    return { orgId, domain };
  }

  for (const c of CASES) {
    it(`${c.name} signs a SimpleSAMLphp user in: login code, amr ["fed"], admin through roleMapping`, async () => {
      const { orgId, domain } = await organization(c);
      const email = `ada-${randomUUID().slice(0, 8)}@${domain}`;
      const username = `ada-${randomBytes(4).toString('hex')}`;
      const password = randomBytes(9).toString('base64url');
      idp.addUser(username, password, { mail: [email], groups: ['staff', 'admins', 'unmapped'] });
      const verifier = randomBytes(32).toString('base64url');
      const start = `${gw.url}/api/v1/auth/sso?org=${orgId}&return_to=${encodeURIComponent(RETURN_TO)}&code_challenge=${s256(verifier)}`;
      const walked = await browseSignIn(start, username, password, RETURN_TO).catch((err: Error) => {
        throw new Error(`${err.message}\n--- SimpleSAMLphp:\n${idp.logs.join('').slice(-4000)}\n--- gateway:\n${gw.logs.slice(-20).join('')}`);
      });
      c.shape(walked.samlResponse);
      expect(walked.location.startsWith(`${RETURN_TO}#`), walked.location).toBe(true);
      const fragment = fragmentOf(walked.location);
      expect(Object.keys(fragment)).toEqual(['login_code']);
      const pair = await gw.post('/api/v1/auth/oidc/exchange', { login_code: fragment.login_code, code_verifier: verifier });
      expect(pair.status, pair.text).toBe(200);
      expect(claims(pair.json.access_token)).toMatchObject({ amr: ['fed'] });
      const [user] = await sql<{ id: number; verified: boolean }>('SELECT id, email_verified_at IS NOT NULL AS verified FROM users WHERE email = $1', [email]);
      expect(user).toMatchObject({ verified: true });
      expect(await sql('SELECT role FROM memberships WHERE org_id = $1 AND user_id = $2', [orgId, user!.id])).toEqual([{ role: 'admin' }]);
      const login = await sql<{ data: Record<string, unknown> }>("SELECT data FROM audit_events WHERE user_id = $1 AND type = 'login.succeeded'", [user!.id]);
      expect(login.map((e) => e.data.method)).toEqual(['saml']);
    });
  }
});
