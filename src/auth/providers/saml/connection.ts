// A SAML connection as its owner writes it and as the gateway publishes it (CONTRACT §31): the PUT
// body's settings, the connection's view, its SP URLs (each connection its own entity ID and ACS
// URL, so that an Audience names one connection) and the SP metadata an IdP imports.
import { randomBytes } from 'node:crypto';
import { generateServiceProviderMetadata } from '@node-saml/node-saml';
import type { SamlConnection, SamlSettings } from '../../../storage/orgs/index.js';

export interface SpUrls {
  sp_entity_id: string;
  acs_url: string;
  metadata_url: string;
}

export function spUrls(publicUrl: string, connectionId: string): SpUrls {
  const base = `${publicUrl}/api/v1/auth/saml/${connectionId}`;
  return { sp_entity_id: `${base}/metadata`, acs_url: `${base}/acs`, metadata_url: `${base}/metadata` };
}

/** A connection's id: random, URL-safe, and nothing of the organization's. */
export function newConnectionId(): string {
  return `saml_${randomBytes(12).toString('base64url')}`;
}

const DEFAULTS: SamlSettings = {
  enforce: false, allowJit: true, allowIdpInitiated: false, idpInitiatedUrl: null, allowSha1: false,
  attributes: {}, roleMapping: {}, mfaContexts: [], encryptAssertions: false,
};

const isBool = (v: unknown): v is boolean => typeof v === 'boolean';
const isText = (v: unknown, max = 1024): v is string => typeof v === 'string' && v.length > 0 && v.length <= max;
const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * The settings a PUT body gives, over the connection's current ones (a field left out keeps its
 * value), or undefined when one is of the wrong shape. `idpInitiatedUrl` must be an entry of
 * auth.oidc.returnTo (`allowedReturnTo`), and is required with allowIdpInitiated.
 */
export function settingsOf(body: Record<string, unknown>, current: SamlSettings | undefined, allowedReturnTo: (url: string) => string | undefined): SamlSettings | undefined {
  const next: SamlSettings = { ...(current ?? DEFAULTS) };
  for (const key of ['enforce', 'allowJit', 'allowIdpInitiated', 'allowSha1', 'encryptAssertions'] as const) {
    if (body[key] === undefined) continue;
    if (!isBool(body[key])) return undefined;
    next[key] = body[key];
  }
  if (body.idpInitiatedUrl !== undefined) {
    if (body.idpInitiatedUrl !== null && !(isText(body.idpInitiatedUrl) && allowedReturnTo(body.idpInitiatedUrl))) return undefined;
    next.idpInitiatedUrl = body.idpInitiatedUrl;
  }
  if (body.attributes !== undefined) {
    const a = body.attributes;
    if (!isObject(a) || Object.keys(a).some((k) => k !== 'email' && k !== 'groups') || Object.values(a).some((v) => !isText(v, 256))) return undefined;
    next.attributes = a as SamlSettings['attributes'];
  }
  if (body.roleMapping !== undefined) {
    const m = body.roleMapping;
    // Never owner: owners are managed through the API (CONTRACT §31, "Roles").
    if (!isObject(m) || Object.keys(m).length > 100 || Object.entries(m).some(([k, v]) => !isText(k, 256) || (v !== 'admin' && v !== 'member'))) return undefined;
    next.roleMapping = m as SamlSettings['roleMapping'];
  }
  if (body.mfaContexts !== undefined) {
    const c = body.mfaContexts;
    if (!Array.isArray(c) || c.length > 20 || c.some((v) => !isText(v, 256))) return undefined;
    next.mfaContexts = c as string[];
  }
  if (next.allowIdpInitiated && !next.idpInitiatedUrl) return undefined;
  return next;
}

/** The connection as GET and PUT answer it: never a key, the IdP's certificates by fingerprint. */
export function connectionView(connection: SamlConnection, publicUrl: string): Record<string, unknown> {
  return {
    id: connection.id,
    org_id: connection.org_id,
    idp_entity_id: connection.idp_entity_id,
    idp_sso_url: connection.idp_sso_url,
    idp_certificates: connection.idp_certificates.map(({ sha256, not_after }) => ({ sha256, not_after })),
    ...spUrls(publicUrl, connection.id),
    ...connection.settings,
    created_at: connection.created_at,
    updated_at: connection.updated_at,
  };
}

/** The SP metadata an IdP imports: entity ID, ACS (HTTP-POST) and the connection's certificate for signing and encryption. */
export function spMetadataXml(connection: SamlConnection, publicUrl: string, privateKeyPem: string): string {
  const urls = spUrls(publicUrl, connection.id);
  return generateServiceProviderMetadata({
    issuer: urls.sp_entity_id,
    callbackUrl: urls.acs_url,
    decryptionPvk: privateKeyPem,
    decryptionCert: connection.sp_certificate,
    privateKey: privateKeyPem,
    publicCerts: connection.sp_certificate,
    // The Response, the Assertion or both may be signed (CONTRACT §31): nothing more is asked of the IdP.
    wantAssertionsSigned: false,
    generateUniqueId: () => `_${connection.id}`,
  });
}
