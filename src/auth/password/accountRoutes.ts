// Accounts users manage themselves (CONTRACT §13): under /api/v1/auth (beside routes.ts), POST
// /password/change, /password/forgot, /password/reset, /email/verify, /email/resend. All under the
// auth rate limit (app.ts). The user's own resources under /api/v1/user are in src/user/.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { sendDenial, sendError, successBody } from '../../errors/index.js';
import { currentIdentity, currentUser, type RequireUser } from '../../listener/requireUser.js';
import { textField } from '../../http.js';
import { byUser, changeAccount } from '../../account/change.js';
import type { Audit } from '../../audit.js';
import type { Config } from '../../config/schema.js';
import type { Events } from '../../webhooks/emitter.js';
import type { Database } from '../../storage/database/index.js';
import { emailTokens, revokeAllForUser, users } from '../../storage/accounts/index.js';
import { newPasswordDenial, refuseCredentials } from '../credentials.js';
import { normalizeEmail } from '../../credentials/emailAddress.js';
import { mailboxTakesOver, queueLinkMail, useLink, type LinkMailDeps } from '../links/links.js';
import { passwordConfirmed } from '../mfa/factor.js';
import { isTooLong, type Passwords } from './passwords.js';
import { clientOf, ownSession, pairAfterChange } from '../sessions.js';
import { sha256Hex } from '../../credentials/digest.js';
import type { Tokens } from '../../credentials/tokens.js';
import { sendSsoRequired } from '../providers/saml/enforce.js';
import { bearer, credentials, errors, message, tokenPair, type EndpointSchema } from '../../openapi.js';

export interface AccountRoutesDeps extends LinkMailDeps {
  db: Database;
  tokens: Tokens;
  passwords: Passwords;
  events: Events;
  audit: Audit;
  requireUser: RequireUser;
  auth: Pick<Config['auth'], 'passwordMinLength'>;
}

/** A handler of this file: the deps first, then what fastify passes. */
type Handler = (deps: AccountRoutesDeps, request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;

/** Each route's OpenAPI fragment (documentation only: src/openapi.ts), by handler. */
const DOCS = {
  changePassword: {
    tags: ['accounts'], summary: 'Change the password: a new pair; every other session ends', security: bearer, body: credentials(['current_password', 'new_password']),
    response: { 200: tokenPair, ...errors('passwordTooShort', 'passwordTooLong', 'invalidCredentials', 'emailUnverified', 'tokenInvalid', 'rateLimited', 'storageUnavailable') },
  },
  forgotPassword: {
    tags: ['accounts'], summary: 'Mail a reset link if the account exists (the same answer whatever the address)', body: credentials(['email']),
    response: { 202: message, ...errors('emailInvalid', 'rateLimited', 'mailUnavailable') },
  },
  resetPassword: {
    tags: ['accounts'], summary: 'Set a new password with a reset link\'s token; every session ends', body: credentials(['token', 'new_password']),
    response: { 200: message, ...errors('linkInvalid', 'passwordTooShort', 'passwordTooLong', 'ssoRequired', 'rateLimited', 'storageUnavailable') },
  },
  verifyEmail: {
    tags: ['accounts'], summary: 'Verify the email with a verification link\'s token', body: credentials(['token']), response: { 200: message, ...errors('linkInvalid', 'rateLimited') },
  },
  resendVerification: {
    tags: ['accounts'], summary: 'Mail a new verification link (none when already verified)', security: bearer, response: { 202: message, ...errors('tokenInvalid', 'rateLimited', 'mailUnavailable') },
  },
} satisfies Record<string, EndpointSchema>;

/** The endpoint map of the accounts users manage, each route naming its handler, in the order they have always been registered. */
export async function accountRoutes(app: FastifyInstance, deps: AccountRoutesDeps): Promise<void> {
  const on = (handler: Handler) => (request: FastifyRequest, reply: FastifyReply) => handler(deps, request, reply);
  app.post('/password/change', { schema: DOCS.changePassword, preHandler: deps.requireUser() }, on(changePassword));
  app.post('/password/forgot', { schema: DOCS.forgotPassword }, on(forgotPassword));
  app.post('/password/reset', { schema: DOCS.resetPassword }, on(resetPassword));
  app.post('/email/verify', { schema: DOCS.verifyEmail }, on(verifyEmail));
  app.post('/email/resend', { schema: DOCS.resendVerification, preHandler: deps.requireUser() }, on(resendVerification));
}

async function changePassword(deps: AccountRoutesDeps, request: FastifyRequest, reply: FastifyReply) {
  const { db, tokens, passwords, clock, mailer } = deps;
  const minLength = deps.auth.passwordMinLength;
  const identity = currentIdentity(request);
  const { user: { id }, sessionId } = identity;
  const current = textField(request.body, 'current_password');
  const next = textField(request.body, 'new_password');
  const denial = newPasswordDenial(next, minLength);
  if (denial) return sendDenial(reply, denial);
  // A user without a password sets a first one from a recent sign-in, without current_password.
  const user = isTooLong(current) ? undefined : await users.findByIdWithHash(db, id);
  if (!user || !(await passwordConfirmed(passwords, user, current, identity, clock()))) return refuseCredentials(request, reply, user ? 'wrongPassword' : 'passwordTooLong', id);
  // A first password is a way in added, as a factor is (factor.ts): with mail, only to an address
  // proven to be the user's, so nobody who took an address first keeps one past its owner.
  if (user.password_hash === null && mailer.enabled && !user.email_verified_at) return sendError(reply, 'emailUnverified');
  const hash = await passwords.hash(next);
  const changed = await changeAccount(deps, { userId: id, mode: 'update', by: byUser(clientOf(request)) }, async ({ tx, user: locked, now, record, event }) => {
    // Changed by someone else since it was checked: current_password is no longer the password.
    if (locked.is_active !== 1 || !users.samePassword(user, locked)) return undefined;
    await users.setPassword(tx, id, hash, now);
    // Every session ends, this one included (its refresh token is of the old password); this one
    // goes on with the new pair. Reset links sent before are void.
    const keep = await ownSession(tx, id, sessionId);
    const ended = await revokeAllForUser(tx, id, 'password', keep);
    await emailTokens.useUpAll(tx, id, 'reset', now);
    // The alert is stored with the change it reports, before the answer.
    await event('auth.password_changed', { method: 'change', revoked_sessions: ended });
    await record('password.changed', { revoked_sessions: ended });
    return { pair: await pairAfterChange(tx, tokens, locked, clientOf(request), now, keep), ended };
  });
  if (!changed) return refuseCredentials(request, reply, 'changedMeanwhile', id);
  request.log.info({ userId: id, revokedSessions: changed.ended }, 'password changed');
  return changed.pair;
}

async function forgotPassword(deps: AccountRoutesDeps, request: FastifyRequest, reply: FastifyReply) {
  const { db, mailer } = deps;
  if (!mailer.enabled) return sendError(reply, 'mailUnavailable');
  const email = normalizeEmail(textField(request.body, 'email'));
  if (!email) return sendError(reply, 'emailInvalid');
  // Same answer, same work on this path for every address (the lookup is queued with the mail):
  // neither the body nor the time tells whether the account exists.
  queueLinkMail(deps, 'reset', undefined, () => users.findByEmail(db, email), request.headers);
  return reply.code(202).send(successBody(reply, 'resetLinkSent'));
}

async function resetPassword({ db, passwords, clock, events, audit, auth, sso: gate }: AccountRoutesDeps, request: FastifyRequest, reply: FastifyReply) {
  const minLength = auth.passwordMinLength;
  const token = textField(request.body, 'token').trim();
  const next = textField(request.body, 'new_password');
  // Checked before any hashing: a made-up token costs one indexed lookup.
  const holder = token ? await emailTokens.findUsable(db, sha256Hex(token), 'reset', clock()) : undefined;
  if (!holder) return sendError(reply, 'linkInvalid');
  // An operator's invitation is such a link: redeeming it is a way in that enforcement closes (CONTRACT §31).
  const sso = await gate?.requiredFor(holder.email);
  if (sso) return sendSsoRequired(reply, sso);
  const denial = newPasswordDenial(next, minLength);
  if (denial) return sendDenial(reply, denial);
  const hash = await passwords.hash(next);
  const ended = await useLink(db, clock, token, 'reset', holder.user_id, async (tx, user, now) => {
    await users.setPassword(tx, user.id, hash, now);
    // No session makes a reset: every access token of before it is refused (CONTRACT §33).
    await users.endOlderTokens(tx, user);
    await emailTokens.useUpAll(tx, user.id, 'reset', now);
    const revoked = await revokeAllForUser(tx, user.id, 'password');
    await events.emit(user.id, 'auth.password_changed', { method: 'reset', revoked_sessions: revoked }, tx);
    await audit.record({ type: 'password.reset', actor: 'user', userId: user.id, ...clientOf(request), data: { revoked_sessions: revoked } }, tx);
    // The link went to this address and came back: the account is the mailbox's.
    await mailboxTakesOver(tx, user, now, { audit, client: clientOf(request), setsPassword: true });
    return revoked;
  });
  if (ended === undefined) return sendError(reply, 'linkInvalid');
  request.log.info({ userId: holder.user_id, revokedSessions: ended }, 'password reset');
  return successBody(reply, 'passwordReset');
}

async function verifyEmail({ db, clock, audit }: AccountRoutesDeps, request: FastifyRequest, reply: FastifyReply) {
  const token = textField(request.body, 'token').trim();
  const holder = token ? await emailTokens.findUsable(db, sha256Hex(token), 'verify', clock()) : undefined;
  const verified = holder && await useLink(db, clock, token, 'verify', holder.user_id, async (tx, user, now) => {
    const marked = await users.markEmailVerified(tx, user.id, user.email, now);
    if (marked) await audit.record({ type: 'email.verified', actor: 'user', userId: user.id, ...clientOf(request) }, tx);
    return marked;
  });
  if (!verified) return sendError(reply, 'linkInvalid');
  request.log.info({ userId: holder.user_id }, 'email verified');
  return successBody(reply, 'emailVerified');
}

async function resendVerification(deps: AccountRoutesDeps, request: FastifyRequest, reply: FastifyReply) {
  const { db, mailer } = deps;
  if (!mailer.enabled) return sendError(reply, 'mailUnavailable');
  // Read now, not from the cache: a verification made a moment ago on another instance counts.
  const user = (await users.findById(db, currentUser(request).id)) ?? currentUser(request);
  if (user.email_verified_at) return reply.code(202).send(successBody(reply, 'emailAlreadyVerified'));
  queueLinkMail(deps, 'verify', user.id, async () => user, request.headers);
  return reply.code(202).send(successBody(reply, 'verificationLinkSent'));
}
