// A scripted SAML identity provider for tests (CONTRACT §31): its own key pair and certificate,
// its metadata XML, and Responses it writes and signs the way the test asks (the Response, the
// Assertion, both or neither; SHA-1; another key), signed with xml-crypto through
// @node-saml/node-saml's signXml (test-side only: src never signs a Response), and encrypted with
// xml-encryption (the library node-saml decrypts with).
import { randomBytes } from 'node:crypto';
import { inflateRawSync } from 'node:zlib';
import { signXml } from '@node-saml/node-saml/lib/xml.js';
import xmlenc from 'xml-encryption';
import { newSpKeyPair } from '../../src/auth/providers/saml/spKeys.js';

export interface IdpKeys {
  privateKeyPem: string;
  certificatePem: string;
}

export const newIdpKeys = (): IdpKeys => newSpKeyPair('scripted IdP', new Date(Date.now() - 3600_000));
const certBody = (pem: string) => pem.replace(/-----[^-]+-----/g, '').replace(/\s+/g, '');

export function idpMetadata(entityId: string, ssoUrl: string, keys: IdpKeys[]): string {
  const keyDescriptors = keys.map((k) => '<md:KeyDescriptor use="signing"><ds:KeyInfo><ds:X509Data>'
    + `<ds:X509Certificate>${certBody(k.certificatePem)}</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor>`).join('');
  return `<?xml version="1.0"?><md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" xmlns:ds="http://www.w3.org/2000/09/xmldsig#" entityID="${entityId}">`
    + `<md:IDPSSODescriptor protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">${keyDescriptors}`
    + '<md:NameIDFormat>urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress</md:NameIDFormat>'
    + `<md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect" Location="${ssoUrl}"/></md:IDPSSODescriptor></md:EntityDescriptor>`;
}

/** The AuthnRequest a start redirected to: its ID and the RelayState. */
export function authnRequestOf(location: string): { id: string; relayState: string; xml: string } {
  const url = new URL(location);
  const xml = inflateRawSync(Buffer.from(url.searchParams.get('SAMLRequest') ?? '', 'base64')).toString('utf8');
  return { id: /\sID="([^"]+)"/.exec(xml)?.[1] ?? '', relayState: url.searchParams.get('RelayState') ?? '', xml };
}

export interface ResponseSpec {
  issuer: string;
  destination: string;
  audience: string;
  recipient: string;
  inResponseTo?: string;
  nameId: string;
  nameIdFormat?: string;
  attributes?: Record<string, string[]>;
  status?: string;
  /** Shift of every time, in ms (negative: in the past). */
  shiftMs?: number;
  lifetimeMs?: number;
  assertionId?: string;
  /** The AuthnStatement's AuthnContextClassRef; default PasswordProtectedTransport. */
  authnContext?: string;
}

const EMAIL_FORMAT = 'urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress';
const PASSWORD_CONTEXT = 'urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport';
const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
export const newId = () => `_${randomBytes(16).toString('hex')}`;

/** The Response's XML, unsigned. */
export function responseXml(spec: ResponseSpec): { xml: string; responseId: string; assertionId: string } {
  const now = Date.now() + (spec.shiftMs ?? 0);
  const life = spec.lifetimeMs ?? 5 * 60_000;
  const responseId = newId();
  const assertionId = spec.assertionId ?? newId();
  const irt = spec.inResponseTo ? ` InResponseTo="${spec.inResponseTo}"` : '';
  const attributes = Object.entries(spec.attributes ?? {}).map(([name, values]) =>
    `<saml:Attribute Name="${name}">${values.map((v) => `<saml:AttributeValue>${v}</saml:AttributeValue>`).join('')}</saml:Attribute>`).join('');
  const assertion = `<saml:Assertion xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ID="${assertionId}" Version="2.0" IssueInstant="${iso(now)}">`
    + `<saml:Issuer>${spec.issuer}</saml:Issuer>`
    + `<saml:Subject><saml:NameID Format="${spec.nameIdFormat ?? EMAIL_FORMAT}">${spec.nameId}</saml:NameID>`
    + '<saml:SubjectConfirmation Method="urn:oasis:names:tc:SAML:2.0:cm:bearer">'
    + `<saml:SubjectConfirmationData${irt} NotOnOrAfter="${iso(now + life)}" Recipient="${spec.recipient}"/></saml:SubjectConfirmation></saml:Subject>`
    + `<saml:Conditions NotBefore="${iso(now - 30_000)}" NotOnOrAfter="${iso(now + life)}">`
    + `<saml:AudienceRestriction><saml:Audience>${spec.audience}</saml:Audience></saml:AudienceRestriction></saml:Conditions>`
    + `<saml:AuthnStatement AuthnInstant="${iso(now)}" SessionIndex="${newId()}"><saml:AuthnContext>`
    + `<saml:AuthnContextClassRef>${spec.authnContext ?? PASSWORD_CONTEXT}</saml:AuthnContextClassRef></saml:AuthnContext></saml:AuthnStatement>`
    + (attributes ? `<saml:AttributeStatement>${attributes}</saml:AttributeStatement>` : '')
    + '</saml:Assertion>';
  const xml = '<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" '
    + `ID="${responseId}" Version="2.0" IssueInstant="${iso(now)}" Destination="${spec.destination}"${irt}>`
    + `<saml:Issuer>${spec.issuer}</saml:Issuer><samlp:Status><samlp:StatusCode Value="${spec.status ?? 'urn:oasis:names:tc:SAML:2.0:status:Success'}"/></samlp:Status>`
    + `${assertion}</samlp:Response>`;
  return { xml, responseId, assertionId };
}

export type Algorithm = 'sha256' | 'sha1';

/** Signs the Response element (after its Issuer). */
export function signResponse(xml: string, keys: IdpKeys, algorithm: Algorithm = 'sha256'): string {
  return signXml(xml, "/*[local-name()='Response']", { reference: "/*[local-name()='Response']/*[local-name()='Issuer']", action: 'after' },
    { privateKey: keys.privateKeyPem, publicCert: keys.certificatePem, signatureAlgorithm: algorithm, digestAlgorithm: algorithm });
}

/** Signs the Assertion element (after its Issuer). */
export function signAssertion(xml: string, keys: IdpKeys, algorithm: Algorithm = 'sha256'): string {
  return signXml(xml, "//*[local-name()='Assertion']", { reference: "//*[local-name()='Assertion']/*[local-name()='Issuer']", action: 'after' },
    { privateKey: keys.privateKeyPem, publicCert: keys.certificatePem, signatureAlgorithm: algorithm, digestAlgorithm: algorithm });
}

export const encode = (xml: string) => Buffer.from(xml, 'utf8').toString('base64');

/**
 * The Response's Assertion (signed or not, as given) encrypted to the SP's certificate, as an IdP
 * with assertion encryption on sends it: AES-256-GCM, its key under RSA-OAEP (xml-encryption, the
 * library node-saml decrypts with).
 */
export async function encryptAssertion(xml: string, spCertificatePem: string): Promise<string> {
  const assertion = /<saml:Assertion[\s\S]*<\/saml:Assertion>/.exec(xml)![0];
  const encrypted = await new Promise<string>((resolve, reject) => xmlenc.encrypt(assertion, {
    rsa_pub: spCertificatePem, pem: spCertificatePem,
    encryptionAlgorithm: 'http://www.w3.org/2009/xmlenc11#aes256-gcm', keyEncryptionAlgorithm: 'http://www.w3.org/2001/04/xmlenc#rsa-oaep-mgf1p',
  }, (err, result) => (err ? reject(err) : resolve(result))));
  return xml.replace(assertion, `<saml:EncryptedAssertion>${encrypted}</saml:EncryptedAssertion>`);
}
