// Passkeys (CONTRACT §14), under /api/v1/auth, registered only with auth.passkeys (without it they
// answer 404): registering one (guard `factor`) and signing in with one, discoverable, user
// verification required. The ceremonies are @simplewebauthn/server's; what is ours is that each
// challenge is stored hashed and used up once across instances, and that a sign-in checks and
// moves the passkey's counter under a row lock, so a replayed or cloned answer is refused.
import {
  generateAuthenticationOptions, generateRegistrationOptions, verifyAuthenticationResponse, verifyRegistrationResponse,
  type AuthenticationResponseJSON, type RegistrationResponseJSON,
} from '@simplewebauthn/server';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { sendError } from '../../errors/index.js';
import { currentUser, type RequireUser } from '../../listener/requireUser.js';
import { textField } from '../../http.js';
import { byUser, changeAccount } from '../../account/change.js';
import type { Audit } from '../../audit.js';
import type { Config } from '../../config/schema.js';
import type { Events } from '../../webhooks/emitter.js';
import type { Database } from '../../storage/db.js';
import * as passkeys from '../../storage/passkeys.js';
import { factorGuard, type FactorGuardDeps } from '../mfa/factor.js';
import { clientOf, issueInSession } from '../sessions.js';
import { sha256Hex } from '../../credentials/digest.js';
import type { Tokens } from '../../credentials/tokens.js';

/** A passkey sign-in is two factors in itself: something held, verified by the user on it. */
export const PASSKEY_AMR: readonly string[] = ['hwk', 'user'];
/** How long a ceremony may take, from its options to its answer. */
const CHALLENGE_TTL_MS = 5 * 60_000;
const NAME_MAX = 100;
const DEFAULT_NAME = 'Clé d’accès';

/**
 * The WebAuthn user handle of a user: their id, which is no personal data. A sign-in's answer
 * carries it back, and must name the passkey's owner.
 */
const handleOf = (userId: number) => Buffer.from(String(userId));

/**
 * WebAuthn §7.2: the answer for a discoverable credential must carry a userHandle, and it must be
 * the credential's user's, byte for byte (the canonical base64url of handleOf, as browsers send
 * it). It is outside the signature: whoever relays an answer could drop it or name another account.
 */
const namesOwner = (handle: unknown, userId: number) => typeof handle === 'string' && handle === handleOf(userId).toString('base64url');

export interface PasskeyRoutesDeps extends FactorGuardDeps {
  db: Database;
  tokens: Tokens;
  events: Events;
  audit: Audit;
  requireUser: RequireUser;
  relyingParty: NonNullable<Config['auth']['passkeys']>;
}

/** A handler of this file: the deps first, then what fastify passes. */
type Handler = (deps: PasskeyRoutesDeps, request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;

/** The endpoint map of passkeys, each route naming its handler, in the order they have always been registered. */
export async function passkeyRoutes(app: FastifyInstance, deps: PasskeyRoutesDeps): Promise<void> {
  const on = (handler: Handler) => (request: FastifyRequest, reply: FastifyReply) => handler(deps, request, reply);
  const guarded = { preHandler: [deps.requireUser(), factorGuard(deps)] };
  app.post('/passkeys/register/options', guarded, on(registerOptions));
  app.post('/passkeys/register/verify', guarded, on(registerVerify));
  app.post('/passkeys/login/options', on(loginOptions));
  app.post('/passkeys/login/verify', on(loginVerify));
}

const expires = (now: Date) => new Date(now.getTime() + CHALLENGE_TTL_MS);

async function registerOptions({ db, clock, relyingParty: { rpId, rpName } }: PasskeyRoutesDeps, request: FastifyRequest) {
  const user = currentUser(request);
  const now = clock();
  const options = await generateRegistrationOptions({
    rpName, rpID: rpId, userName: user.email, userID: handleOf(user.id),
    attestationType: 'none', timeout: CHALLENGE_TTL_MS,
    // Discoverable: a sign-in starts without an email, the authenticator names the account.
    authenticatorSelection: { residentKey: 'required', requireResidentKey: true, userVerification: 'required' },
    excludeCredentials: await passkeys.credentialIdsOf(db, user.id),
  });
  await passkeys.createChallenge(db, sha256Hex(options.challenge), 'register', user.id, now, expires(now));
  return options;
}

async function registerVerify(deps: PasskeyRoutesDeps, request: FastifyRequest, reply: FastifyReply) {
  const { db, clock, relyingParty: { rpId, origins } } = deps;
  const user = currentUser(request);
  const name = textField(request.body, 'name').trim().slice(0, NAME_MAX) || DEFAULT_NAME;
  const now = clock();
  const verified = await verifyRegistrationResponse({
    response: request.body as RegistrationResponseJSON,
    expectedChallenge: (challenge) => passkeys.useChallenge(db, sha256Hex(challenge), 'register', user.id, now),
    expectedOrigin: origins, expectedRPID: rpId, requireUserVerification: true,
  }).catch((err: unknown) => {
    request.log.info({ userId: user.id, reason: reasonOf(err) }, 'passkey registration refused');
    return undefined;
  });
  if (!verified?.verified) return sendError(reply, 'passkeyInvalid');
  const created = await changeAccount(deps, { userId: user.id, mode: 'update', by: byUser(clientOf(request)) }, async ({ tx, record, event }) => {
    const row = await passkeys.insertPasskey(tx, user.id, verified.registrationInfo.credential, name, now);
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
  const now = clock();
  // No allowCredentials: the authenticator offers the passkeys it holds for this rpId.
  const options = await generateAuthenticationOptions({ rpID: rpId, userVerification: 'required', timeout: CHALLENGE_TTL_MS });
  await passkeys.createChallenge(db, sha256Hex(options.challenge), 'login', null, now, expires(now));
  return options;
}

async function loginVerify(deps: PasskeyRoutesDeps, request: FastifyRequest, reply: FastifyReply) {
  const { db, tokens, relyingParty: { rpId, origins } } = deps;
  const response = request.body as AuthenticationResponseJSON;
  const credentialId = textField(request.body, 'id');
  const owner = credentialId ? await passkeys.findOwner(db, credentialId) : undefined;
  const client = clientOf(request);
  // The user's row, then the passkey's, whose counter is checked and moved.
  const pair = owner === undefined ? undefined : await changeAccount(deps, { userId: owner, mode: 'share', by: byUser(client) }, async ({ tx, user, now, record }) => {
    const passkey = await passkeys.lockByCredentialId(tx, credentialId);
    if (!passkey || passkey.user_id !== user.id) return undefined;
    const verified = await verifyAuthenticationResponse({
      response,
      // Used up here, whatever follows: the same answer sent again finds it gone.
      expectedChallenge: (challenge) => passkeys.useChallenge(tx, sha256Hex(challenge), 'login', null, now),
      expectedOrigin: origins, expectedRPID: rpId, requireUserVerification: true,
      credential: { id: passkey.credential_id, publicKey: passkey.public_key, counter: passkey.counter, transports: passkey.transports as never },
    }).catch((err: unknown) => {
      request.log.info({ userId: user.id, reason: reasonOf(err) }, 'passkey sign-in refused');
      return undefined;
    });
    if (!verified?.verified || !namesOwner(response.response?.userHandle, user.id) || user.is_active !== 1) return undefined;
    await passkeys.recordUse(tx, passkey.id, verified.authenticationInfo.newCounter, now);
    await record('login.succeeded', { amr: PASSKEY_AMR });
    return issueInSession(tx, tokens, user, client, now, undefined, PASSKEY_AMR);
  });
  if (!pair) return sendError(reply, 'invalidCredentials');
  request.log.info({ userId: owner }, 'login by passkey');
  return pair;
}

/** Why a ceremony was refused, for the log: the library's message, never the answer itself. */
function reasonOf(err: unknown): string {
  return err instanceof Error ? err.message.slice(0, 200) : 'unreadable answer';
}
