// An IdP's metadata as a SAML connection takes it (CONTRACT §31; src/auth/providers/saml/idpMetadata.ts),
// as a pure function: what is read from it, and each refusal with the reason the gateway logs.
// Certificates other than the scripted IdP's (ECDSA, RSA 1024) are made by openssl.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { X509Certificate } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MetadataRefused, parseIdpMetadata } from '../../src/auth/providers/saml/idpMetadata.js';
import { newIdpKeys } from '../helpers/samlIdp.js';

const REDIRECT = 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect';
const POST = 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST';
const NOW = new Date();
const body = (pem: string) => pem.replace(/-----[^-]+-----/g, '').replace(/\s+/g, '');

interface Doc { entityId?: string; sso?: Array<[string, string]>; keys?: Array<[string | undefined, string]>; wantSigned?: string; descriptors?: number }
/** A metadata document: `keys` as [use, base64 certificate], `sso` as [binding, location]. */
function metadata({ entityId = 'https://idp.test/metadata', sso = [[REDIRECT, 'https://idp.test/sso']], keys = [], wantSigned, descriptors = 1 }: Doc): string {
  const keyXml = keys.map(([use, cert]) => `<md:KeyDescriptor${use === undefined ? '' : ` use="${use}"`}><ds:KeyInfo><ds:X509Data><ds:X509Certificate>${cert}`
    + '</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor>').join('');
  const services = sso.map(([binding, location]) => `<md:SingleSignOnService Binding="${binding}" Location="${location}"/>`).join('');
  const signed = wantSigned === undefined ? '' : ` WantAuthnRequestsSigned="${wantSigned}"`;
  const descriptor = `<md:IDPSSODescriptor${signed} protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">${keyXml}${services}</md:IDPSSODescriptor>`;
  return '<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" xmlns:ds="http://www.w3.org/2000/09/xmldsig#"'
    + `${entityId ? ` entityID="${entityId}"` : ''}>${descriptor.repeat(descriptors)}</md:EntityDescriptor>`;
}
/** The reason a document is refused, or 'accepted'. */
async function refusal(xml: string, now = NOW): Promise<string> {
  try {
    await parseIdpMetadata(xml, now);
    return 'accepted';
  } catch (err) {
    if (!(err instanceof MetadataRefused)) throw err;
    return err.message;
  }
}

describe('IdP metadata', () => {
  let dir: string;
  let rsa: string;
  let ec: string;
  let weak: string;
  let dsa: string;
  beforeAll(() => {
    rsa = body(newIdpKeys().certificatePem);
    dir = mkdtempSync(path.join(tmpdir(), 'gw-idp-certs-'));
    const made = (name: string, ...newkey: string[]) => {
      const files = ['-keyout', path.join(dir, `${name}.key`), '-out', path.join(dir, `${name}.pem`)];
      execFileSync('openssl', ['req', '-x509', '-nodes', '-days', '2', '-subj', '/CN=idp', ...newkey, ...files], { stdio: 'ignore' });
      return body(readFileSync(path.join(dir, `${name}.pem`), 'utf8'));
    };
    ec = made('ec', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256');
    execFileSync('openssl', ['dsaparam', '-out', path.join(dir, 'dsa.params'), '2048'], { stdio: 'ignore' });
    dsa = made('dsa', '-newkey', `dsa:${path.join(dir, 'dsa.params')}`);
    weak = made('weak', '-newkey', 'rsa:1024');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('reads the entity, the HTTP-Redirect service, the signing certificates (PEM in 64-character lines, SHA-256, expiry) and WantAuthnRequestsSigned', async () => {
    const read = await parseIdpMetadata(metadata({
      sso: [[POST, 'https://idp.test/post'], [REDIRECT, 'not a url'], [REDIRECT, 'http://idp.test/plain'], [REDIRECT, 'https://idp.test/sso']],
      keys: [['signing', rsa], [undefined, ec], ['encryption', weak], ['signing', `\n  ${rsa.slice(0, 100)}\n  ${rsa.slice(100)}\n`]], wantSigned: 'true',
    }), NOW);
    const pem = (b64: string) => `-----BEGIN CERTIFICATE-----\n${b64.match(/.{1,64}/g)!.join('\n')}\n-----END CERTIFICATE-----\n`;
    const described = (b64: string) => {
      const cert = new X509Certificate(pem(b64));
      return { pem: pem(b64), sha256: cert.fingerprint256.replaceAll(':', '').toLowerCase(), not_after: new Date(cert.validTo).toISOString() };
    };
    expect(read).toEqual({ entityId: 'https://idp.test/metadata', ssoUrl: 'https://idp.test/sso', certificates: [described(rsa), described(ec)], wantRequestsSigned: true });
    for (const wantSigned of [undefined, 'false', 'TRUE']) {
      expect((await parseIdpMetadata(metadata({ keys: [['signing', rsa]], wantSigned }), NOW)).wantRequestsSigned, String(wantSigned)).toBe(false);
    }
  });

  it('http only on a loopback address', async () => {
    for (const host of ['127.0.0.1:8080', '[::1]', 'localhost']) {
      expect((await parseIdpMetadata(metadata({ sso: [[REDIRECT, `http://${host}/sso`]], keys: [['signing', rsa]] }), NOW)).ssoUrl).toBe(`http://${host}/sso`);
    }
    for (const location of ['http://127.0.0.2/sso', 'ftp://127.0.0.1/sso', 'http://idp.test/sso', 'ftp://idp.test/sso', 'javascript:alert(1)']) {
      expect(await refusal(metadata({ sso: [[REDIRECT, location]], keys: [['signing', rsa]] })), location).toBe('no HTTP-Redirect SingleSignOnService over https');
    }
  });

  it('refuses each document that is not one IdP\'s, with its reason', async () => {
    expect(await refusal('not xml')).toMatch(/^not XML: /);
    expect(await refusal(`<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>${metadata({ keys: [['signing', rsa]] })}`)).toBe('not XML: a DOCTYPE');
    expect(await refusal('<md:EntitiesDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata"/>')).toBe('not one EntityDescriptor');
    expect(await refusal(metadata({ entityId: '', keys: [['signing', rsa]] }))).toBe('no entityID');
    expect(await refusal(metadata({ keys: [['signing', rsa]], descriptors: 0 }))).toBe('not one IDPSSODescriptor');
    expect(await refusal(metadata({ keys: [['signing', rsa]], descriptors: 2 }))).toBe('not one IDPSSODescriptor');
    expect(await refusal(metadata({ sso: [[POST, 'https://idp.test/post']], keys: [['signing', rsa]] }))).toBe('no HTTP-Redirect SingleSignOnService over https');
    expect(await refusal(metadata({ sso: [] as Array<[string, string]>, keys: [['signing', rsa]] }))).toBe('no HTTP-Redirect SingleSignOnService over https');
    expect(await refusal(metadata({ keys: [['encryption', rsa]] }))).toBe('no signing certificate');
  });

  it('refuses a certificate that does not parse, an RSA key under 2048 bits or a DSA one, an expired one (at its expiry already)', async () => {
    expect(await refusal(metadata({ keys: [['signing', 'bm90IGEgY2VydA==']] }))).toBe('a certificate that does not parse');
    for (const key of [weak, dsa]) expect(await refusal(metadata({ keys: [['signing', key]] }))).toBe('a certificate whose key is neither RSA of at least 2048 bits nor ECDSA');
    const expiry = new Date(new X509Certificate(Buffer.from(ec, 'base64')).validTo);
    expect(await refusal(metadata({ keys: [['signing', ec]] }), expiry)).toBe('an expired certificate');
    expect(await refusal(metadata({ keys: [['signing', ec]] }), new Date(expiry.getTime() - 1))).toBe('accepted');
  });
});
