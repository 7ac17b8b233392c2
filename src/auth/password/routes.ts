// POST /api/v1/auth/register, /login, /refresh, /logout: exactly spec §4, each login starting a
// session (a refresh-token family) that its refreshes continue (CONTRACT §13).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { DEFAULT_STYLE, namedLanguage, sendDenial, sendError, successBody, supportedLanguage } from '../../errors/index.js';
import { textField } from '../../http.js';
import { isUnfitText } from '../../listener/inputs.js';
import { changeAccount } from '../../account/change.js';
import type { Audit } from '../../audit.js';
import type { Config } from '../../config/schema.js';
import type { Events } from '../../webhooks/emitter.js';
import type { Database } from '../../storage/database/index.js';
import { refreshTokens, users } from '../../storage/accounts/index.js';
import { newPasswordDenial, refuseCredentials } from '../credentials.js';
import { lookupForm, normalizeEmail, storable } from '../../credentials/emailAddress.js';
import { queueLinkMail, type LinkMailDeps } from '../links/links.js';
import { isTooLong, needsRehash, type Passwords } from './passwords.js';
import { clientOf, issueInSession, PASSWORD_AMR } from '../sessions.js';
import { answerOneFactorSignIn, signInByOneFactor } from '../signIn.js';
import { sha256Hex } from '../../credentials/digest.js';
import type { Tokens } from '../../credentials/tokens.js';
import { sendSsoRequired } from '../providers/saml/enforce.js';
import { credentials, errors, message, mfaChallenge, tokenPair, type EndpointSchema } from '../../openapi.js';

export interface AuthRoutesDeps extends LinkMailDeps {
  db: Database;
  tokens: Tokens;
  passwords: Passwords;
  clock: () => Date;
  events: Events;
  audit: Audit;
  auth: Pick<Config['auth'], 'passwordMinLength' | 'refreshReuse' | 'requireVerifiedEmail'>;
}

/** A handler of this file: the deps first, then what fastify passes. */
type Handler = (deps: AuthRoutesDeps, request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;

/** Each route's OpenAPI fragment (documentation only: src/openapi.ts), by handler. */
const DOCS = {
  register: {
    tags: ['auth'], summary: 'Create an account (plan free); an optional locale (else Accept-Language) sets the language of its mails', body: credentials(['email', 'password', 'locale']),
    response: {
      201: { type: 'object', properties: { message: { type: 'string' }, user_id: { type: 'integer' } } },
      ...errors('emailInvalid', 'passwordTooShort', 'passwordTooLong', 'emailTaken', 'ssoRequired', 'rateLimited', 'storageUnavailable'),
    },
  },
  login: {
    tags: ['auth'], summary: 'Log in: a new token pair, or an mfa_token for POST /api/v1/auth/mfa/verify', body: credentials(['email', 'password']),
    response: { 200: tokenPair, ...errors('loginFieldsRequired', 'invalidCredentials', 'rateLimited', 'storageUnavailable'), 403: mfaChallenge('emailNotVerified', 'ssoRequired') },
  },
  refresh: {
    tags: ['auth'], summary: 'Rotate a refresh token: a new pair, the old token revoked', body: credentials(['refresh_token']),
    response: { 200: tokenPair, ...errors('refreshTokenMissing', 'refreshTokenUndecodable', 'refreshTokenInactive', 'userNotFound', 'rateLimited') },
  },
  logout: { tags: ['auth'], summary: 'Revoke a refresh token (always 200)', body: credentials(['refresh_token']), response: { 200: message } },
} satisfies Record<string, EndpointSchema>;

/** The endpoint map of the password sign-in, each route naming its handler, in the order they have always been registered. */
export async function authRoutes(app: FastifyInstance, deps: AuthRoutesDeps): Promise<void> {
  const on = (handler: Handler) => (request: FastifyRequest, reply: FastifyReply) => handler(deps, request, reply);
  app.post('/register', { schema: DOCS.register }, on(register));
  app.post('/login', { schema: DOCS.login }, on(login));
  app.post('/refresh', { schema: DOCS.refresh }, on(refresh));
  app.post('/logout', { schema: DOCS.logout }, on(logout));
}

const sendVerification = (deps: AuthRoutesDeps, request: FastifyRequest, user: { id: number; email: string; is_active: number }) =>
  queueLinkMail(deps, 'verify', user.id, async () => user, request.headers);

/**
 * The new user's language for mails (CONTRACT §20): the `locale` field when the gateway has texts
 * for it, else the language Accept-Language names among those; none: null. A locale it cannot use
 * is ignored, never refused: register's answers stay the spec's.
 */
function registeredLocale(request: FastifyRequest): string | null {
  const { languages } = request.server.errorStyle ?? DEFAULT_STYLE;
  const header = request.headers['accept-language'];
  return supportedLanguage(textField(request.body, 'locale'), languages) ?? namedLanguage(typeof header === 'string' ? header : undefined, languages) ?? null;
}

async function register(deps: AuthRoutesDeps, request: FastifyRequest, reply: FastifyReply) {
  const { db, passwords, audit } = deps;
  const minLength = deps.auth.passwordMinLength;
  const email = normalizeEmail(textField(request.body, 'email'));
  const password = textField(request.body, 'password');
  if (!email) return sendError(reply, 'emailInvalid');
  const sso = await deps.sso?.requiredFor(email);
  if (sso) return sendSsoRequired(reply, sso);
  // A control character or a lone surrogate is present but invalid (CONTRACT §26): no one could
  // type it again at login, and a lone surrogate would be hashed as U+FFFD, another password.
  if (isUnfitText(password)) return sendError(reply, 'badRequest');
  const denial = newPasswordDenial(password, minLength);
  if (denial) return sendDenial(reply, denial);
  // A cheap check first spares a hash for the common duplicate; the INSERT still decides races.
  if (await users.emailExists(db, email)) return sendError(reply, 'emailTaken');
  const locale = registeredLocale(request);
  const id = await users.createUser(db, email, await passwords.hash(password), async (tx, userId) => {
    await audit.record({ type: 'user.registered', actor: 'user', userId, ...clientOf(request) }, tx);
    if (locale) await users.setLocale(tx, userId, locale);
  });
  if (id === null) return sendError(reply, 'emailTaken');
  request.log.info({ userId: id }, 'user registered');
  sendVerification(deps, request, { id, email, is_active: 1 });
  return reply.code(201).send(successBody(reply, 'userCreated', { user_id: id }));
}

async function login(deps: AuthRoutesDeps, request: FastifyRequest, reply: FastifyReply) {
  const { db, passwords, audit } = deps;
  const email = lookupForm(textField(request.body, 'email'));
  const password = textField(request.body, 'password');
  if (!email || !password) return sendError(reply, 'loginFieldsRequired');
  // Before anything typed is checked, the same for a known account or not (CONTRACT §31).
  const sso = await deps.sso?.requiredFor(email);
  if (sso) return sendSsoRequired(reply, sso);
  // No stored password is this long: refuse without hashing, so it cannot be used to burn CPU.
  // A failed login is one audit row too; for an unknown email, nothing of what was typed (a
  // password typed into the email field must not be kept).
  const failed = (reason: 'unknown_email' | 'wrong_password' | 'inactive', userId?: number) => audit.note({ type: 'login.failed', actor: 'user', userId, ...clientOf(request), data: { reason } });
  // A password with a control character or a lone surrogate is refused as a wrong one, unhashed
  // (CONTRACT §26): register refuses them, and one set before the rule can be reset.
  if (isTooLong(password) || isUnfitText(password)) {
    await failed('wrong_password');
    return refuseCredentials(request, reply, isTooLong(password) ? 'passwordTooLong' : 'unfitPassword');
  }
  const user = storable(email) ? await users.findByEmailWithHash(db, email) : undefined;
  if (!user || user.is_active !== 1) {
    await passwords.burnVerification(password);
    await failed(user ? 'inactive' : 'unknown_email', user?.id);
    return refuseCredentials(request, reply, user ? 'inactive' : 'unknownEmail', user?.id);
  }
  // An account without a password (made by an identity provider) is refused as a wrong password
  // is, after as long a hash.
  const hash = user.password_hash;
  if (hash === null ? (await passwords.burnVerification(password), true) : !(await passwords.verify(hash, password))) {
    await failed('wrong_password', user.id);
    return refuseCredentials(request, reply, 'wrongPassword', user.id);
  }
  // An imported hash (CONTRACT §27) or older parameters: the gateway's argon2id from now on, in
  // this request. A parallel login that already replaced it wins; this one goes on all the same.
  if (hash !== null && needsRehash(hash)) await users.replacePasswordHash(db, user.id, hash, await passwords.hash(password));
  // Said only to whoever knows the password. A new link goes out (at most one a minute), so an
  // account whose first link was lost or expired is never stuck.
  if (deps.auth.requireVerifiedEmail && !user.email_verified_at) {
    sendVerification(deps, request, user);
    request.log.info({ userId: user.id }, 'login refused: email not verified');
    return sendError(reply, 'emailNotVerified');
  }
  // Changed, deactivated or deleted since the password was checked: a session of the old
  // password must not start after the change has ended all the others.
  const signIn = await changeAccount(deps, { userId: user.id, mode: 'share' }, async ({ tx, user: locked, now }) => {
    if (locked.is_active !== 1 || !users.samePassword(user, locked)) return undefined;
    // A second factor: no pair, an mfa_token for POST /mfa/verify (a client that knows only the
    // spec fails closed on the 403). Read under the lock: a TOTP confirmed meanwhile, which ended
    // every other session (CONTRACT §26), is seen here, so none of the password alone starts after.
    return signInByOneFactor(tx, deps, locked, clientOf(request), now, PASSWORD_AMR);
  });
  if (!signIn) {
    await failed('wrong_password', user.id);
    return refuseCredentials(request, reply, 'changedMeanwhile', user.id);
  }
  return answerOneFactorSignIn(request, reply, user.id, signIn, 'password');
}

async function refresh(deps: AuthRoutesDeps, request: FastifyRequest, reply: FastifyReply) {
  const { tokens } = deps;
  const token = textField(request.body, 'refresh_token').trim();
  if (!token) return sendError(reply, 'refreshTokenMissing');
  const userId = await tokens.verifyRefresh(token);
  if (userId === null) return refuseCredentials(request, reply, 'undecodable', undefined, 'refreshTokenUndecodable');
  const hash = sha256Hex(token);
  // The user's row first (account/change.ts: a password change or a session's end waits for this
  // rotation, or this one for it). Then the conditional UPDATE is the lock on the token: of
  // concurrent rotations of one token, on any instance, exactly one sees revoked = 0 and wins.
  // No such user any more: their tokens went with them, so the token is as inactive as any.
  const result = await changeAccount(deps, { userId, mode: 'share' }, async ({ tx, user, now }) => {
    const rotated = await refreshTokens.revokeActive(tx, hash, userId, now);
    if (!rotated) return { outcome: 'inactive' as const };
    if (user.is_active !== 1) throw new UserInactive(); // rolls back: the token stays active for its user
    // A token from before sessions existed starts one now.
    const pair = await issueInSession(tx, tokens, user, clientOf(request), now, rotated.sessionId ?? undefined);
    return { outcome: 'rotated' as const, pair };
  }).then((rotation) => rotation ?? { outcome: 'inactive' as const }, (err: unknown) => {
    if (err instanceof UserInactive) return { outcome: 'user-gone' as const };
    throw err;
  });
  if (result.outcome === 'user-gone') return refuseCredentials(request, reply, 'userGone', userId, 'userInactive');
  if (result.outcome === 'inactive') {
    await onReuse(deps, userId, hash, request);
    return refuseCredentials(request, reply, 'inactiveToken', userId, 'refreshTokenInactive');
  }
  return result.pair;
}

async function logout({ db, audit }: AuthRoutesDeps, request: FastifyRequest, reply: FastifyReply) {
  const token = textField(request.body, 'refresh_token').trim();
  if (token) {
    // The session's owner, told by the token's row: logout needs no access token (spec §4).
    await db.transaction(async (tx) => {
      const ended = await refreshTokens.revokeByHash(tx, sha256Hex(token));
      if (ended) await audit.record({ type: 'logout', actor: 'user', userId: ended.userId, ...clientOf(request) }, tx);
    });
  }
  return reply.send(successBody(reply, 'loggedOut'));
}

/** A rotated-away token presented again means it was copied: say so, and under revoke-all, end every session. */
async function onReuse(deps: AuthRoutesDeps, userId: number, hash: string, request: FastifyRequest): Promise<void> {
  if (!(await refreshTokens.wasRotated(deps.db, hash, userId))) return;
  const revokeAll = deps.auth.refreshReuse === 'revoke-all';
  // The gateway's finding (whoever presented the token may not be the user), and its sessions ended by its rule.
  const by = { actor: 'system' as const, ...clientOf(request) };
  // The alert is stored with the revocation it reports, before the 401 is answered. Held FOR
  // SHARE when nothing of the account changes (the outbox row's foreign key holds it so anyway).
  const revoked = await changeAccount(deps, { userId, mode: revokeAll ? 'update' : 'share', by }, async ({ tx, record, event }) => {
    const n = revokeAll ? await refreshTokens.revokeAllForUser(tx, userId, 'reuse') : 0;
    await event('auth.refresh_token_reused', { revoked_sessions: n });
    await record('refresh.reuse_detected', { revoked_sessions: n });
    return n;
  });
  request.log.warn({ userId, revokedSessions: revoked }, 'refresh token reused');
}

/** The account exists, deactivated (user_inactive); one that does not has no active token to rotate. */
class UserInactive extends Error {
  constructor() {
    super('user inactive');
  }
}
