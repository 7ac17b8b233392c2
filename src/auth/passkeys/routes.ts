// Passkeys (CONTRACT §14), under /api/v1/auth, registered only with auth.passkeys (without it they
// answer 404): registering one (guard `factor`) and signing in with one, discoverable, user
// verification required. The ceremonies themselves are ceremony.ts's, shared with the operators'.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { sendError } from '../../errors/index.js';
import { currentUser, type RequireUser } from '../../listener/requireUser.js';
import { textField } from '../../http.js';
import { byUser, changeAccount } from '../../account/change.js';
import type { Audit } from '../../audit.js';
import type { Config } from '../../config/schema.js';
import type { Events } from '../../webhooks/emitter.js';
import type { Database } from '../../storage/database/index.js';
import { passkeys } from '../../storage/accounts/index.js';
import { factorGuard, type FactorGuardDeps } from '../mfa/factor.js';
import { clientOf, issueInSession } from '../sessions.js';
import type { Tokens } from '../../credentials/tokens.js';
import { authenticationOptions, claimedOwner, registrationOptions, verifyAuthentication, verifyRegistration, type PasskeyOwners } from './ceremony.js';
import { sendSsoRequired, type SsoGate } from '../providers/saml/enforce.js';
import { bearerOnly, errors, passkey, tokenPair, type EndpointSchema } from '../../openapi.js';

/** A passkey sign-in is two factors in itself: something held, verified by the user on it. */
export const PASSKEY_AMR: readonly string[] = ['hwk', 'user'];
const NAME_MAX = 100;
const DEFAULT_NAME = 'Clé d’accès';

/** The users' passkeys; a user's WebAuthn user handle is their id, which is no personal data. */
const USERS: PasskeyOwners = { tables: passkeys.USER_PASSKEYS, handleOf: (userId) => String(userId) };

/** A passkey's name as given, trimmed and cut, or the default one. */
export const passkeyName = (body: unknown) => textField(body, 'name').trim().slice(0, NAME_MAX) || DEFAULT_NAME;

export interface PasskeyRoutesDeps extends FactorGuardDeps {
  db: Database;
  tokens: Tokens;
  events: Events;
  audit: Audit;
  requireUser: RequireUser;
  relyingParty: NonNullable<Config['auth']['passkeys']>;
  /** Enforcement (CONTRACT §31): absent, nothing is enforced. */
  sso?: SsoGate;
}

/** A handler of this file: the deps first, then what fastify passes. */
type Handler = (deps: PasskeyRoutesDeps, request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;

/** Each route's OpenAPI fragment (documentation only: src/openapi.ts), by handler. */
const DOCS = {
  registerOptions: {
    tags: ['second factor'], summary: 'WebAuthn creation options for a new passkey (discoverable, user verification required); only with auth.passkeys', security: bearerOnly,
    response: { 200: { type: 'object', description: 'PublicKeyCredentialCreationOptionsJSON' }, ...errors('recentAuthRequired', 'emailUnverified', 'tokenInvalid', 'rateLimited') },
  },
  registerVerify: {
    tags: ['second factor'], summary: 'Register the passkey the authenticator made (RegistrationResponseJSON, optional name)', security: bearerOnly,
    body: { type: 'object', description: 'RegistrationResponseJSON, plus an optional name' },
    response: { 201: passkey, ...errors('passkeyInvalid', 'recentAuthRequired', 'emailUnverified', 'tokenInvalid', 'rateLimited') },
  },
  loginOptions: {
    tags: ['second factor'], summary: 'WebAuthn request options for a passkey sign-in (discoverable: no email)',
    response: { 200: { type: 'object', description: 'PublicKeyCredentialRequestOptionsJSON' }, ...errors('rateLimited') },
  },
  loginVerify: {
    tags: ['second factor'], summary: 'Sign in with a passkey (AuthenticationResponseJSON): the token pair, amr ["hwk","user"], aal2',
    body: { type: 'object', description: 'AuthenticationResponseJSON' }, response: { 200: tokenPair, ...errors('invalidCredentials', 'ssoRequired', 'rateLimited', 'storageUnavailable') },
  },
} satisfies Record<string, EndpointSchema>;

/** The endpoint map of passkeys, each route naming its handler, in the order they have always been registered. */
export async function passkeyRoutes(app: FastifyInstance, deps: PasskeyRoutesDeps): Promise<void> {
  const on = (handler: Handler) => (request: FastifyRequest, reply: FastifyReply) => handler(deps, request, reply);
  const guarded = { preHandler: [deps.requireUser(), factorGuard(deps)] };
  app.post('/passkeys/register/options', { ...guarded, schema: DOCS.registerOptions }, on(registerOptions));
  app.post('/passkeys/register/verify', { ...guarded, schema: DOCS.registerVerify }, on(registerVerify));
  app.post('/passkeys/login/options', { schema: DOCS.loginOptions }, on(loginOptions));
  app.post('/passkeys/login/verify', { schema: DOCS.loginVerify }, on(loginVerify));
}

async function registerOptions({ db, clock, relyingParty }: PasskeyRoutesDeps, request: FastifyRequest) {
  const user = currentUser(request);
  return registrationOptions(db, USERS, relyingParty, { id: user.id, name: user.email }, clock());
}

async function registerVerify(deps: PasskeyRoutesDeps, request: FastifyRequest, reply: FastifyReply) {
  const { db, clock, relyingParty } = deps;
  const user = currentUser(request);
  const name = passkeyName(request.body);
  const now = clock();
  const credential = await verifyRegistration(db, USERS, relyingParty, user.id, request.body, now, request.log);
  if (!credential) return sendError(reply, 'passkeyInvalid');
  const created = await changeAccount(deps, { userId: user.id, mode: 'update', by: byUser(clientOf(request)) }, async ({ tx, record, event }) => {
    const row = await passkeys.insertPasskey(tx, user.id, credential, name, now);
    if (!row) return undefined; // that credential is registered already
    await event('auth.mfa_enrolled', { method: 'passkey' });
    await record('passkey.added', { passkey_id: row.id });
    return row;
  });
  if (!created) return sendError(reply, 'passkeyInvalid');
  request.log.info({ userId: user.id, passkeyId: created.id }, 'passkey registered');
  return reply.code(201).send({ id: created.id, name: created.name, created_at: created.created_at.toISOString() });
}

async function loginOptions({ db, clock, relyingParty: { rpId } }: PasskeyRoutesDeps) {
  return authenticationOptions(db, USERS, rpId, clock());
}

async function loginVerify(deps: PasskeyRoutesDeps, request: FastifyRequest, reply: FastifyReply) {
  const { db, tokens, relyingParty } = deps;
  const owner = await claimedOwner(db, USERS, request.body);
  const client = clientOf(request);
  // The user's row (account/change.ts), then the passkey's, whose counter is checked and moved.
  const pair = owner === undefined ? undefined : await changeAccount(deps, { userId: owner, mode: 'share', by: byUser(client) }, async ({ tx, user, now, record }) => {
    if (user.is_active !== 1) return undefined;
    if (!(await verifyAuthentication(tx, USERS, relyingParty, user.id, request.body, now, request.log))) return undefined;
    // The account is known once its passkey verified: one of an enforced domain signs in through its organization (CONTRACT §31).
    const sso = await deps.sso?.requiredFor(user.email);
    if (sso) return { sso };
    await record('login.succeeded', { amr: PASSKEY_AMR });
    return issueInSession(tx, tokens, user, client, now, undefined, PASSKEY_AMR);
  });
  if (!pair) return sendError(reply, 'invalidCredentials');
  if ('sso' in pair) return sendSsoRequired(reply, pair.sso);
  request.log.info({ userId: owner }, 'login by passkey');
  return pair;
}
