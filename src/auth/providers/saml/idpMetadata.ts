// An IdP's metadata XML as a connection takes it (CONTRACT §31): pasted by an owner, never fetched
// by the gateway (a URL would let the request reach what the gateway reaches). One EntityDescriptor
// with an IDPSSODescriptor, an HTTP-Redirect SingleSignOnService over https (http on loopback),
// one or more signing certificates of RSA ≥ 2048 bits or ECDSA: the only keys an assertion is ever
// verified with (keys inside a message never are).
import { X509Certificate } from 'node:crypto';
import { attributeOf, parseXml, selectElements, type XmlElement } from './xml.js';
import type { IdpCertificate } from '../../../storage/orgs/index.js';

const REDIRECT_BINDING = 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect';
const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);

export interface IdpMetadata {
  entityId: string;
  ssoUrl: string;
  certificates: IdpCertificate[];
  wantRequestsSigned: boolean;
}

/** Why a metadata document is refused (the PUT answers `Requête invalide`; the reason is logged). */
export class MetadataRefused extends Error {}

/** The IdP's metadata, or MetadataRefused. */
export async function parseIdpMetadata(xml: string, now: Date): Promise<IdpMetadata> {
  const doc = await parseXml(xml).catch((err: unknown) => { throw new MetadataRefused(`not XML: ${(err as Error).message}`); });
  const root = doc.documentElement;
  if (root?.localName !== 'EntityDescriptor') throw new MetadataRefused('not one EntityDescriptor');
  const entityId = attributeOf(root, 'entityID') ?? '';
  if (!entityId) throw new MetadataRefused('no entityID');
  const descriptors = selectElements(root, "./*[local-name()='IDPSSODescriptor']");
  if (descriptors.length !== 1) throw new MetadataRefused('not one IDPSSODescriptor');
  const idp = descriptors[0]!;
  const ssoUrl = selectElements(idp, "./*[local-name()='SingleSignOnService']")
    .filter((service) => attributeOf(service, 'Binding') === REDIRECT_BINDING)
    .map((service) => attributeOf(service, 'Location') ?? '')
    .find(fitSsoUrl);
  if (!ssoUrl) throw new MetadataRefused('no HTTP-Redirect SingleSignOnService over https');
  const certificates = signingCertificates(idp, now);
  if (certificates.length === 0) throw new MetadataRefused('no signing certificate');
  return { entityId, ssoUrl, certificates, wantRequestsSigned: attributeOf(idp, 'WantAuthnRequestsSigned') === 'true' };
}

/** https, or http on a loopback address (local IdPs and tests), as §15 says of issuers. */
function fitSsoUrl(location: string): boolean {
  let url: URL;
  try {
    url = new URL(location);
  } catch {
    return false;
  }
  return url.protocol === 'https:' || (url.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname));
}

/** The KeyDescriptors for signing (use="signing" or no use), each certificate checked. */
function signingCertificates(idp: XmlElement, now: Date): IdpCertificate[] {
  const keys = selectElements(idp, "./*[local-name()='KeyDescriptor']").filter((key) => (attributeOf(key, 'use') ?? 'signing') === 'signing');
  const seen = new Map<string, IdpCertificate>();
  for (const key of keys) {
    for (const node of selectElements(key, ".//*[local-name()='X509Certificate']")) {
      const certificate = certificateOf(node.textContent ?? '', now);
      seen.set(certificate.sha256, certificate);
    }
  }
  return [...seen.values()];
}

function certificateOf(base64: string, now: Date): IdpCertificate {
  const body = base64.replace(/\s+/g, '');
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(Buffer.from(body, 'base64'));
  } catch {
    throw new MetadataRefused('a certificate that does not parse');
  }
  const key = cert.publicKey;
  const fit = key.asymmetricKeyType === 'ec' || (key.asymmetricKeyType === 'rsa' && (key.asymmetricKeyDetails?.modulusLength ?? 0) >= 2048);
  if (!fit) throw new MetadataRefused('a certificate whose key is neither RSA of at least 2048 bits nor ECDSA');
  const notAfter = new Date(cert.validTo);
  if (notAfter.getTime() <= now.getTime()) throw new MetadataRefused('an expired certificate');
  const pem = `-----BEGIN CERTIFICATE-----\n${body.match(/.{1,64}/g)!.join('\n')}\n-----END CERTIFICATE-----\n`;
  return { pem, sha256: cert.fingerprint256.replaceAll(':', '').toLowerCase(), not_after: notAfter.toISOString() };
}
