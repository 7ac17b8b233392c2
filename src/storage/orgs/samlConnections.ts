// SAML connections, sign-ins under way and accepted assertions (migrations 045 and 046, CONTRACT
// §31). Requests and assertions are shared by every instance: a request is used up by one
// conditional UPDATE and an assertion's ID recorded under its primary key, so of two instances
// handed the same post exactly one goes on.
import type { Queryable } from '../database/db.js';

/** The connection's settings from its PUT body (CONTRACT §31), stored as they were accepted. */
export interface SamlSettings {
  enforce: boolean;
  allowJit: boolean;
  allowIdpInitiated: boolean;
  idpInitiatedUrl: string | null;
  allowSha1: boolean;
  attributes: { email?: string; groups?: string };
  roleMapping: Record<string, 'admin' | 'member'>;
  mfaContexts: string[];
  encryptAssertions: boolean;
}

export interface IdpCertificate {
  pem: string;
  sha256: string;
  not_after: string;
}

export interface SamlConnection {
  id: string;
  org_id: number;
  metadata_xml: string;
  idp_entity_id: string;
  idp_sso_url: string;
  idp_certificates: IdpCertificate[];
  want_requests_signed: boolean;
  settings: SamlSettings;
  sp_key_encrypted: string;
  sp_certificate: string;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = 'id, org_id, metadata_xml, idp_entity_id, idp_sso_url, idp_certificates, want_requests_signed, settings, sp_key_encrypted, sp_certificate, created_at, updated_at';

export async function connectionOfOrg(q: Queryable, orgId: number): Promise<SamlConnection | undefined> {
  return (await q.query<SamlConnection>(`SELECT ${COLUMNS} FROM saml_connections WHERE org_id = $1`, [orgId]))[0];
}

export async function findConnection(q: Queryable, id: string): Promise<SamlConnection | undefined> {
  return (await q.query<SamlConnection>(`SELECT ${COLUMNS} FROM saml_connections WHERE id = $1`, [id]))[0];
}

/** What a PUT writes; the id and the SP key pair are kept when the connection exists (the IdP knows them). */
export type ConnectionWrite = Omit<SamlConnection, 'created_at' | 'updated_at'>;

/** Creates the organization's connection, or replaces its metadata and settings (id and SP key pair stay). */
export async function upsertConnection(tx: Queryable, row: ConnectionWrite, now: Date): Promise<SamlConnection> {
  return (await tx.query<SamlConnection>(
    `INSERT INTO saml_connections (${COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)
     ON CONFLICT (org_id) DO UPDATE SET metadata_xml = EXCLUDED.metadata_xml, idp_entity_id = EXCLUDED.idp_entity_id,
       idp_sso_url = EXCLUDED.idp_sso_url, idp_certificates = EXCLUDED.idp_certificates,
       want_requests_signed = EXCLUDED.want_requests_signed, settings = EXCLUDED.settings, updated_at = EXCLUDED.updated_at
     RETURNING ${COLUMNS}`,
    [row.id, row.org_id, row.metadata_xml, row.idp_entity_id, row.idp_sso_url, JSON.stringify(row.idp_certificates), row.want_requests_signed,
      JSON.stringify(row.settings), row.sp_key_encrypted, row.sp_certificate, now],
  ))[0]!;
}

export async function setEnforce(tx: Queryable, orgId: number, enforce: boolean, now: Date): Promise<SamlConnection | undefined> {
  return (await tx.query<SamlConnection>(
    `UPDATE saml_connections SET settings = jsonb_set(settings, '{enforce}', to_jsonb($2::boolean)), updated_at = $3 WHERE org_id = $1 RETURNING ${COLUMNS}`,
    [orgId, enforce, now],
  ))[0];
}

export async function deleteConnection(tx: Queryable, orgId: number): Promise<SamlConnection | undefined> {
  return (await tx.query<SamlConnection>(`DELETE FROM saml_connections WHERE org_id = $1 RETURNING ${COLUMNS}`, [orgId]))[0];
}

/** The connection of the organization that verified `domain`, if it has one. */
export async function connectionOfDomain(q: Queryable, domain: string): Promise<SamlConnection | undefined> {
  return (await q.query<SamlConnection>(
    `SELECT ${COLUMNS.split(', ').map((c) => `c.${c}`).join(', ')} FROM saml_connections c
     JOIN org_domains d ON d.org_id = c.org_id AND d.status = 'verified' WHERE d.domain = $1`,
    [domain],
  ))[0];
}

export interface SamlRequest {
  request_id: string;
  connection_id: string;
  return_to: string;
  app_challenge: string;
}

export async function createRequest(q: Queryable, relayHash: string, request: SamlRequest, now: Date, expiresAt: Date): Promise<void> {
  await q.query('DELETE FROM saml_requests WHERE expires_at < $1', [now]);
  await q.query(
    'INSERT INTO saml_requests (relay_hash, request_id, connection_id, return_to, app_challenge, expires_at) VALUES ($1, $2, $3, $4, $5, $6)',
    [relayHash, request.request_id, request.connection_id, request.return_to, request.app_challenge, expiresAt],
  );
}

/** The live, unused request the RelayState names, read without using it up (where a refusal sends the browser). */
export async function findRequest(q: Queryable, relayHash: string, now: Date): Promise<SamlRequest | undefined> {
  return (await q.query<SamlRequest>(
    'SELECT request_id, connection_id, return_to, app_challenge FROM saml_requests WHERE relay_hash = $1 AND used_at IS NULL AND expires_at > $2',
    [relayHash, now],
  ))[0];
}

/** Uses the request up: true for the one caller, on any instance, that did. */
export async function useRequest(q: Queryable, relayHash: string, requestId: string, now: Date): Promise<boolean> {
  return (await q.query(
    'UPDATE saml_requests SET used_at = $3 WHERE relay_hash = $1 AND request_id = $2 AND used_at IS NULL AND expires_at > $3 RETURNING relay_hash',
    [relayHash, requestId, now],
  )).length === 1;
}

/** Records an accepted assertion's ID: false when any instance accepted it before (a replay). */
export async function firstSighting(q: Queryable, connectionId: string, assertionId: string, now: Date, expiresAt: Date): Promise<boolean> {
  await q.query('DELETE FROM saml_seen_assertions WHERE expires_at < $1', [now]);
  return (await q.query(
    'INSERT INTO saml_seen_assertions (connection_id, assertion_id, expires_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING assertion_id',
    [connectionId, assertionId, expiresAt],
  )).length === 1;
}
