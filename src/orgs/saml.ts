// An organization's SAML connection (CONTRACT §31): PUT from the IdP's metadata XML (owner, guard
// factor), GET (owner, admin), DELETE (owner, factor). The connection's id and SP key pair are made
// once, with the first PUT, and kept by later ones (the IdP has imported the SP metadata); the
// private key is stored encrypted as TOTP secrets are. Every change is audited in its transaction.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import {
  connectionView, MetadataRefused, newConnectionId, newSpKeyPair, parseIdpMetadata, settingsOf, type SamlSettings, type Totp,
} from '../auth/index.js';
import { sendError, successBody } from '../errors/index.js';
import { bearerOnly, errors, message } from '../openapi.js';
import { samlConnections as saml, verifiedDomainsOf } from '../storage/orgs/index.js';
import { revokeForDomains } from '../storage/accounts/index.js';
import { orgChange, orgRead, refuse, requireRole, type OrgWriters } from './change.js';
import { actorOf, answer, ids, MANAGERS, object, OWNERS, pathId, STR, TAGS } from './common.js';
import type { OrgRoutesDeps } from './orgs.js';

export interface SamlRoutesDeps extends Pick<OrgRoutesDeps, 'db' | 'audit' | 'clock' | 'memberships' | 'bearer' | 'factor'> {
  totp: Pick<Totp, 'encrypt'>;
  /** organizations.sso.publicUrl, else auth.oidc.publicUrl. */
  publicUrl: string;
  allowedReturnTo(url: string): string | undefined;
}

const MAX_METADATA = 256 * 1024;
const tags = [...TAGS, 'enterprise sign-in'];
const connection = { type: 'object', description: 'the connection: id, org_id, idp_entity_id, idp_certificates [{sha256, not_after}], sp_entity_id, acs_url, metadata_url and its settings' };

export const DOCS = {
  put: {
    tags, security: bearerOnly, params: ids('id'),
    summary: 'Create or replace the organization\'s SAML connection from the IdP\'s metadata XML (owner, guard factor); never fetched by URL',
    body: object({
      metadata_xml: { type: 'string', minLength: 1, maxLength: MAX_METADATA },
      enforce: { type: 'boolean' }, allowJit: { type: 'boolean' }, allowIdpInitiated: { type: 'boolean' }, idpInitiatedUrl: STR,
      allowSha1: { type: 'boolean' }, attributes: { type: 'object' }, roleMapping: { type: 'object' }, mfaContexts: { type: 'array', items: STR }, encryptAssertions: { type: 'boolean' },
    }, ['metadata_xml']),
    response: { 200: connection, ...errors('badRequest', 'orgNotFound', 'roleInsufficient', 'recentAuthRequired', 'emailUnverified', 'apiKeyNotAccepted', 'tokenInvalid') },
  },
  get: {
    tags, security: bearerOnly, params: ids('id'), summary: 'The organization\'s SAML connection (owner, admin)',
    response: { 200: connection, ...errors('orgNotFound', 'roleInsufficient', 'ssoConnectionNotFound', 'apiKeyNotAccepted', 'tokenInvalid') },
  },
  remove: {
    tags, security: bearerOnly, params: ids('id'), summary: 'Remove the organization\'s SAML connection (owner, guard factor); linked identities stay, enforce ends',
    response: { 200: message, ...errors('orgNotFound', 'roleInsufficient', 'ssoConnectionNotFound', 'recentAuthRequired', 'emailUnverified', 'apiKeyNotAccepted', 'tokenInvalid') },
  },
};

// The route schemas document; the code checks. A body that is no object has none of the fields.
const bodyOf = (request: FastifyRequest) => (request.body ?? {}) as Record<string, unknown>;

/** The connection the PUT writes: its metadata read, its settings over the current ones, a key pair when it is new. */
async function connectionWrite(deps: SamlRoutesDeps, w: OrgWriters, input: Record<string, unknown>): Promise<saml.ConnectionWrite> {
  const xml = input.metadata_xml;
  if (typeof xml !== 'string' || xml.length === 0 || xml.length > MAX_METADATA) refuse('badRequest');
  const current = await saml.connectionOfOrg(w.tx, w.org.id);
  const settings = settingsOf(input, current?.settings, deps.allowedReturnTo) ?? refuse('badRequest');
  const metadata = await parseIdpMetadata(xml, w.now).catch((err: unknown) => {
    if (err instanceof MetadataRefused) refuse('badRequest', undefined, err.message);
    throw err;
  });
  const id = current?.id ?? newConnectionId();
  const keys = current ? { sp_key_encrypted: current.sp_key_encrypted, sp_certificate: current.sp_certificate } : (() => {
    const pair = newSpKeyPair(`auth-gateway SAML ${id}`, w.now);
    return { sp_key_encrypted: deps.totp.encrypt(pair.privateKeyPem), sp_certificate: pair.certificatePem };
  })();
  return {
    id, org_id: w.org.id, metadata_xml: xml, idp_entity_id: metadata.entityId, idp_sso_url: metadata.ssoUrl,
    idp_certificates: metadata.certificates, want_requests_signed: metadata.wantRequestsSigned, settings, ...keys,
  };
}

/**
 * Audit rows of a connection written: updated, and enforce_changed when enforce moved. Turned on,
 * the sessions of the domains' accounts that did not start through the connection end, but the
 * changer's (CONTRACT §31), in the same transaction.
 */
async function recordWrite(deps: SamlRoutesDeps, w: OrgWriters, userId: number, before: SamlSettings | undefined, after: saml.SamlConnection): Promise<void> {
  const data = { org_id: w.org.id, connection_id: after.id };
  await deps.audit.record({ type: 'sso.connection_updated', actor: 'user', userId, data: { ...data, idp_entity_id: after.idp_entity_id } }, w.tx);
  if ((before?.enforce ?? false) !== after.settings.enforce) {
    const revoked = after.settings.enforce ? await enforcementBegins(w.tx, after, userId) : 0;
    await deps.audit.record({ type: 'sso.enforce_changed', actor: 'user', userId, data: { ...data, enforce: after.settings.enforce, revoked_sessions: revoked } }, w.tx);
  }
}

/**
 * Enforcement turned on: the sessions of the accounts of the organization's verified domains end,
 * but those that started through the connection and every one of `changer`'s; how many.
 */
export async function enforcementBegins(tx: OrgWriters['tx'], connection: saml.SamlConnection, changer: number | undefined): Promise<number> {
  return revokeForDomains(tx, await verifiedDomainsOf(tx, connection.org_id), 'sso_enforce', changer, connection.id);
}

export async function samlConnectionRoutes(app: FastifyInstance, deps: SamlRoutesDeps): Promise<void> {
  const guarded = { preHandler: [...deps.bearer, deps.factor] };

  app.put('/:id/sso/saml', { schema: DOCS.put, ...guarded }, async function putSaml(request, reply) {
    const id = pathId(request, 'id');
    if (id === undefined) return sendError(reply, 'orgNotFound');
    const actor = actorOf(request);
    const outcome = await orgChange(deps, actor, id, async (w) => {
      requireRole(w.role, OWNERS);
      const before = (await saml.connectionOfOrg(w.tx, w.org.id))?.settings;
      const written = await saml.upsertConnection(w.tx, await connectionWrite(deps, w, bodyOf(request)), w.now);
      await recordWrite(deps, w, actor.userId, before, written);
      return connectionView(written, deps.publicUrl);
    });
    if ('refused' in outcome && outcome.refused.reason) request.log.info({ org: id, reason: outcome.refused.reason }, 'SAML metadata refused');
    return answer(reply, outcome);
  });

  app.get('/:id/sso/saml', { schema: DOCS.get, preHandler: deps.bearer }, async function getSaml(request, reply) {
    const orgId = pathId(request, 'id');
    return answer(reply, await orgRead(deps.db, actorOf(request).userId, orgId, MANAGERS, async () => {
      const found = await saml.connectionOfOrg(deps.db, orgId!);
      return found ? connectionView(found, deps.publicUrl) : refuse('ssoConnectionNotFound');
    }));
  });

  app.delete('/:id/sso/saml', { schema: DOCS.remove, ...guarded }, async function deleteSaml(request, reply) {
    const id = pathId(request, 'id');
    if (id === undefined) return sendError(reply, 'orgNotFound');
    const actor = actorOf(request);
    const outcome = await orgChange(deps, actor, id, async (w) => {
      requireRole(w.role, OWNERS);
      const removed = (await saml.deleteConnection(w.tx, w.org.id)) ?? refuse('ssoConnectionNotFound');
      await deps.audit.record({ type: 'sso.connection_deleted', actor: 'user', userId: actor.userId, data: { org_id: w.org.id, connection_id: removed.id } }, w.tx);
    });
    if ('refused' in outcome) return answer(reply, outcome);
    return successBody(reply, 'ssoConnectionDeleted');
  });
}
