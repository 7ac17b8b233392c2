// SAML sign-in for organizations (CONTRACT §31), beside the identity providers' routes and ending
// as theirs do, in a one-time login code for §15's exchange (amr ["fed"]):
//   GET  /api/v1/auth/sso?email=|org=&return_to&code_challenge  302 to the IdP with an AuthnRequest (HTTP-Redirect)
//   POST /api/v1/auth/saml/{connection}/acs                     the IdP's Response (HTTP-POST, a form), no cookie needed
//   GET  /api/v1/auth/saml/{connection}/metadata                the SP metadata an IdP imports
// The AuthnRequest's ID is stored with the connection, return_to and the application's challenge
// (10 minutes, used once on any instance); RelayState is a random reference to it, never a URL.
// Neither route is under the auth rate limit (the exchange is), as §15's callback.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Audit } from '../../../audit.js';
import { normalizeEmail } from '../../../credentials/emailAddress.js';
import { emailDomain } from '../../../domains/index.js';
import { randomToken, sha256Hex } from '../../../credentials/digest.js';
import { sendError } from '../../../errors/index.js';
import { mediaType } from '../../../http.js';
import { errors, type EndpointSchema } from '../../../openapi.js';
import { type Database, parseIntegerId } from '../../../storage/database/index.js';
import { samlConnections as saml } from '../../../storage/orgs/index.js';
import type { Totp } from '../../mfa/totp.js';
import type { SignInProviders } from '../configured.js';
import { backToApplication, FEDERATED_AMR, handOver, S256_CHALLENGE } from '../routes.js';
import { accountRequest, type SamlAccounts } from './account.js';
import { clientOf } from '../../sessions.js';
import { spMetadataXml } from './connection.js';
import { checkResponseDocument, readEnvelope, ResponseRefused, samlOf, type Accepted, type Envelope } from './response.js';

const REQUEST_TTL_MS = 10 * 60_000;
const FORM = 'application/x-www-form-urlencoded';

export interface SamlRoutesDeps {
  db: Database;
  audit: Audit;
  clock: () => Date;
  providers: SignInProviders;
  totp: Pick<Totp, 'decrypt'>;
  /** organizations.sso.publicUrl, else auth.oidc.publicUrl. */
  publicUrl: string;
  /** The gw_oidc cookie's path, as the providers' (`/` with the portal: its exchange is under portal.path). */
  cookiePath?: string;
  /** The organizations' managed accounts (orgs/managedAccounts.ts), handed in by the listener's builder. */
  accounts: SamlAccounts;
  /** organizations.sso.trustIdpMfa: a connection's mfaContexts may give aal2. */
  trustIdpMfa: boolean;
}

const CONNECTION = { type: 'object', required: ['connection'], properties: { connection: { type: 'string', description: 'the connection\'s id' } } } as const;
const tags = ['enterprise sign-in'];
const DOCS = {
  start: {
    tags, summary: 'Leave for the organization\'s IdP (302, SAML HTTP-Redirect) by the email\'s verified domain or the organization\'s id',
    querystring: {
      type: 'object', required: ['return_to', 'code_challenge'],
      properties: { email: { type: 'string' }, org: { type: 'string' }, return_to: { type: 'string', format: 'uri' }, code_challenge: { type: 'string' } },
    },
    response: { 302: { description: 'to the IdP\'s SingleSignOnService with SAMLRequest and RelayState' }, ...errors('redirectNotAllowed', 'badRequest', 'ssoConnectionNotFound') },
  },
  acs: {
    tags, summary: 'The IdP posts its Response here (form: SAMLResponse, RelayState); 302 to return_to with #login_code= or #error=', params: CONNECTION,
    response: {
      302: { description: 'return_to#login_code=…, or return_to#error= access_denied, saml_invalid or account_not_allowed; idpInitiatedUrl#sso_org= for an allowed unsolicited Response' },
      ...errors('badRequest'),
    },
  },
  metadata: {
    tags, summary: 'The connection\'s SP metadata (entity ID, ACS URL, its certificate)', params: CONNECTION,
    response: { 200: { description: 'application/samlmetadata+xml' }, ...errors('ssoConnectionNotFound') },
  },
} satisfies Record<string, EndpointSchema>;

/** The connection the start names: by `org`, or by the verified domain of `email`. */
async function connectionToStart(db: Database, query: URLSearchParams): Promise<saml.SamlConnection | undefined> {
  const org = query.get('org');
  if (org !== null) {
    const id = parseIntegerId(org);
    return id === undefined ? undefined : saml.connectionOfOrg(db, id);
  }
  // The domain in its stored form (an IDN as its A-label), as enforcement reads it.
  const email = normalizeEmail(query.get('email') ?? '');
  const domain = email && emailDomain(email);
  return domain ? saml.connectionOfDomain(db, domain) : undefined;
}

export async function samlRoutes(app: FastifyInstance, deps: SamlRoutesDeps): Promise<void> {
  const { db, clock } = deps;
  const keyOf = (connection: saml.SamlConnection) => deps.totp.decrypt(connection.sp_key_encrypted);

  app.get('/sso', { schema: DOCS.start }, async function ssoStart(request, reply) {
    const query = new URLSearchParams(request.context.query ?? '');
    const returnTo = deps.providers.allowedReturnTo(query.get('return_to') ?? '');
    if (!returnTo) return sendError(reply, 'redirectNotAllowed');
    const challenge = query.get('code_challenge') ?? '';
    if (!S256_CHALLENGE.test(challenge) || (query.get('code_challenge_method') ?? 'S256') !== 'S256') return sendError(reply, 'badRequest');
    const connection = await connectionToStart(db, query);
    if (!connection) return sendError(reply, 'ssoConnectionNotFound');
    const requestId = `_${randomToken(20)}`;
    const relay = randomToken(32);
    const now = clock();
    const stored = { request_id: requestId, connection_id: connection.id, return_to: returnTo, app_challenge: challenge };
    await saml.createRequest(db, sha256Hex(relay), stored, now, new Date(now.getTime() + REQUEST_TTL_MS));
    const location = await samlOf(connection, deps.publicUrl, keyOf(connection), requestId).getAuthorizeUrlAsync(relay, undefined, {});
    reply.header('cache-control', 'no-store');
    return reply.redirect(location, 302);
  });

  app.get<{ Params: { connection: string } }>('/saml/:connection/metadata', { schema: DOCS.metadata }, async function spMetadata(request, reply) {
    const connection = await saml.findConnection(db, request.params.connection);
    if (!connection) return sendError(reply, 'ssoConnectionNotFound');
    return reply.type('application/samlmetadata+xml').send(spMetadataXml(connection, deps.publicUrl, keyOf(connection)));
  });

  // Fields as strings, so that the unfit-input check (listener/inputs.ts) reads each of them.
  app.addContentTypeParser(FORM, { parseAs: 'string' }, (_request, body, done) => done(null, Object.fromEntries(new URLSearchParams(body as string))));
  app.post<{ Params: { connection: string } }>('/saml/:connection/acs', { schema: DOCS.acs }, async function acs(request, reply) {
    const connection = await saml.findConnection(db, request.params.connection);
    const form = mediaType(request.headers['content-type']) === FORM ? request.body as Record<string, unknown> : {};
    const posted = typeof form.SAMLResponse === 'string' ? form.SAMLResponse : '';
    const relay = typeof form.RelayState === 'string' ? form.RelayState : '';
    if (!connection || !posted) return sendError(reply, 'badRequest');
    return answerAcs(deps, request, reply, connection, posted, relay, keyOf(connection));
  });
}

/** The refusal: audited with its rule, then 302 #error= when a stored request says where, else 400 JSON. */
async function refused(
  deps: SamlRoutesDeps, request: FastifyRequest, reply: FastifyReply, connection: saml.SamlConnection,
  err: ResponseRefused | { code: 'account_not_allowed'; rule: string }, returnTo?: string,
): Promise<FastifyReply> {
  await deps.audit.record({ type: 'sso.login_failed', actor: 'system', data: { org_id: connection.org_id, connection_id: connection.id, code: err.code, rule: err.rule } });
  request.log.info({ connection: connection.id, code: err.code, rule: err.rule }, 'SAML sign-in refused');
  return returnTo ? backToApplication(reply, returnTo, { error: err.code }) : sendError(reply, 'badRequest');
}

async function answerAcs(
  deps: SamlRoutesDeps, request: FastifyRequest, reply: FastifyReply, connection: saml.SamlConnection, posted: string, relay: string, privateKeyPem: string,
): Promise<FastifyReply> {
  const { db, clock } = deps;
  let envelope: Envelope;
  try {
    envelope = await readEnvelope(posted);
  } catch (err) {
    if (!(err instanceof ResponseRefused)) throw err;
    return refused(deps, request, reply, connection, err);
  }
  const relayHash = sha256Hex(relay);
  const stored = relay ? await saml.findRequest(db, relayHash, clock()) : undefined;
  const named = stored && stored.connection_id === connection.id && envelope.inResponseTo === stored.request_id ? stored : undefined;
  if (!named && (relay || envelope.inResponseTo || !connection.settings.allowIdpInitiated)) {
    return refused(deps, request, reply, connection, new ResponseRefused('saml_invalid', relay || envelope.inResponseTo ? 'unknown_request' : 'unsolicited'));
  }
  // Used up before anything else is checked: one post per request, on any instance.
  if (named && !(await saml.useRequest(db, relayHash, named.request_id, clock()))) {
    return refused(deps, request, reply, connection, new ResponseRefused('saml_invalid', 'request_used'), named.return_to);
  }
  let accepted: Accepted;
  try {
    const now = clock();
    accepted = await checkResponseDocument(envelope, posted, { connection, publicUrl: deps.publicUrl, privateKeyPem, requestId: named?.request_id, now });
    if (!(await saml.firstSighting(db, connection.id, accepted.assertionId, now, accepted.notOnOrAfter))) throw new ResponseRefused('saml_invalid', 'replay');
  } catch (err) {
    if (!(err instanceof ResponseRefused)) throw err;
    return refused(deps, request, reply, connection, err, named?.return_to);
  }
  // IdP-initiated: signs nobody in; the application starts an SP-initiated sign-in from there.
  if (!named) return backToApplication(reply, connection.settings.idpInitiatedUrl!, { sso_org: String(connection.org_id) });
  const asked = accountRequest(connection, accepted, clientOf(request));
  const account = asked ? await deps.accounts(asked) : { refused: 'no_email' };
  if ('refused' in account) return refused(deps, request, reply, connection, { code: 'account_not_allowed', rule: account.refused }, named.return_to);
  const origin = { method: 'saml', amr: samlAmr(deps.trustIdpMfa, connection, accepted), samlConnectionId: connection.id };
  return handOver(deps, reply, { returnTo: named.return_to, userId: account.ok.userId, challenge: named.app_challenge, origin });
}

/**
 * The sign-in's amr (CONTRACT §31, "Assurance"): `fed`, and `mfa` (aal2) only when the operator
 * trusts IdPs' MFA and the assertion's AuthnContextClassRef is one of the connection's
 * mfaContexts: an organization's own setting never meets an operator's `mfa: required` alone.
 */
export function samlAmr(trustIdpMfa: boolean, connection: saml.SamlConnection, accepted: Accepted): readonly string[] {
  const asserted = accepted.authnContext;
  return trustIdpMfa && asserted !== undefined && connection.settings.mfaContexts.includes(asserted) ? [...FEDERATED_AMR, 'mfa'] : FEDERATED_AMR;
}
