// A second factor (CONTRACT §14), under /api/v1/auth: TOTP enrolment, confirmation and removal
// (guard `factor`), and POST /mfa/verify, which turns a login's mfa_token and a code into the pair.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { sendDenial, sendError, successBody } from '../../errors/index.js';
import { currentIdentity, type RequireUser } from '../../listener/requireUser.js';
import { textField } from '../../http.js';
import { byUser, changeAccount, lockAccount } from '../../account/change.js';
import type { Audit } from '../../audit.js';
import type { Events } from '../../webhooks/emitter.js';
import type { Database, Queryable } from '../../storage/database/index.js';
import { type Client, mfa, revokeOtherSessions, users } from '../../storage/accounts/index.js';
import { refuseCredentials, type CredentialRefusal } from '../credentials.js';
import { factorGuard, passwordConfirmed, type FactorGuardDeps } from './factor.js';
import { isTooLong, type Passwords } from '../password/passwords.js';
import { clientOf, issueInSession, ownSession, pairAfterChange } from '../sessions.js';
import { sha256Hex } from '../../credentials/digest.js';
import type { TokenPair, Tokens } from '../../credentials/tokens.js';
import { newRecoveryCodes, recoveryCodeHash, type Totp } from './totp.js';
import { sendSsoRequired, type SsoGate, type SsoRequired } from '../providers/saml/enforce.js';
import { bearerOnly, credentials, errors, message, tokenPair, withNewPair, type EndpointSchema } from '../../openapi.js';

/** How many wrong codes kill an mfa_token. */
const MFA_TOKEN_MAX_FAILURES = 5;
// CONTRACT §14: 10 wrong codes for a user within 15 minutes lock code verification for 15 minutes
// (whatever mfa_tokens they came with: a password thief gets a new one per login).
const WRONG_CODES = { max: 10, windowMs: 15 * 60_000, lockMs: 15 * 60_000 };

/** Why a second-factor step was refused, and whose (the log line's). */
interface Refused {
  why: CredentialRefusal;
  userId?: number;
}

/** The answer while a user's code verification is locked. */
class CodesLocked {
  constructor(readonly until: Date, readonly now: Date) {}
}

/**
 * A factor added or removed leaves no session of before it elsewhere, nor any access token of
 * before it (CONTRACT §33): every session of the user but the caller's (`sessionId`, when it is the
 * user's) ends, and the caller's goes on with a new pair. Its refresh token of before stays valid,
 * so a client that knows only the answer's older fields keeps its session. After the user's row is
 * locked (account/change.ts).
 */
async function endOtherSessions(tx: Queryable, tokens: Tokens, user: users.User, sessionId: number | undefined, client: Client, now: Date): Promise<{ ended: number; pair: TokenPair }> {
  const keep = await ownSession(tx, user.id, sessionId);
  const ended = await revokeOtherSessions(tx, user.id, 'mfa', keep);
  return { ended, pair: await pairAfterChange(tx, tokens, user, client, now, keep) };
}

export interface MfaRoutesDeps extends FactorGuardDeps {
  db: Database;
  tokens: Tokens;
  passwords: Passwords;
  totp: Totp;
  clock: () => Date;
  events: Events;
  audit: Audit;
  requireUser: RequireUser;
  /** Enforcement (CONTRACT §31): absent, nothing is enforced. */
  sso?: SsoGate;
  issuer: string;
}

/** A handler of this file: the deps first, then what fastify passes. */
type Handler = (deps: MfaRoutesDeps, request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;

/** Each route's OpenAPI fragment (documentation only: src/openapi.ts), by handler. */
const DOCS = {
  enrollTotp: {
    tags: ['second factor'], summary: 'A new TOTP secret, active once confirmed', security: bearerOnly,
    response: {
      200: { type: 'object', properties: { secret: { type: 'string' }, otpauth_url: { type: 'string' } } },
      ...errors('codeInvalid', 'recentAuthRequired', 'emailUnverified', 'tokenInvalid', 'rateLimited'),
    },
  },
  confirmTotp: {
    tags: ['second factor'], summary: 'Confirm TOTP with a code: ten recovery codes, shown once; every other session ends', security: bearerOnly, body: credentials(['code']),
    response: {
      200: withNewPair({ properties: { recovery_codes: { type: 'array', items: { type: 'string' } } } }),
      ...errors('codeInvalid', 'recentAuthRequired', 'emailUnverified', 'tokenInvalid', 'rateLimited'),
    },
  },
  removeTotp: {
    tags: ['second factor'], summary: 'Remove TOTP and the recovery codes; every other session ends', security: bearerOnly, body: credentials(['password']),
    response: { 200: withNewPair(message), ...errors('invalidCredentials', 'recentAuthRequired', 'tokenInvalid', 'rateLimited') },
  },
  verifyCode: {
    tags: ['second factor'], summary: 'A login\'s mfa_token and a TOTP or recovery code: the token pair', body: credentials(['mfa_token', 'code']),
    response: { 200: tokenPair, ...errors('codeRefused', 'ssoRequired', 'rateLimited', 'storageUnavailable') },
  },
} satisfies Record<string, EndpointSchema>;

/** The endpoint map of the second factor, each route naming its handler, in the order they have always been registered. */
export async function mfaRoutes(app: FastifyInstance, deps: MfaRoutesDeps): Promise<void> {
  const on = (handler: Handler) => (request: FastifyRequest, reply: FastifyReply) => handler(deps, request, reply);
  const guarded = { preHandler: [deps.requireUser(), factorGuard(deps)] };
  app.post('/mfa/totp/enroll', { ...guarded, schema: DOCS.enrollTotp }, on(enrollTotp));
  app.post('/mfa/totp/confirm', { ...guarded, schema: DOCS.confirmTotp }, on(confirmTotp));
  app.delete('/mfa/totp', { ...guarded, schema: DOCS.removeTotp }, on(removeTotp));
  app.post('/mfa/verify', { schema: DOCS.verifyCode }, on(verifyCode));
}

async function enrollTotp({ db, totp, clock, issuer }: MfaRoutesDeps, request: FastifyRequest, reply: FastifyReply) {
  const { user } = currentIdentity(request);
  const secret = totp.newSecret();
  // A confirmed TOTP is replaced only by removing it first (DELETE /mfa/totp, with the password).
  if (!(await mfa.enrollTotp(db, user.id, totp.encrypt(secret), clock()))) return sendError(reply, 'codeInvalid');
  return { secret, otpauth_url: totp.otpauthUrl(issuer, user.email, secret) };
}

async function confirmTotp(deps: MfaRoutesDeps, request: FastifyRequest, reply: FastifyReply) {
  const { db, totp, clock, tokens } = deps;
  const { user, sessionId } = currentIdentity(request);
  const code = textField(request.body, 'code').trim();
  const codes = await db.transaction(async (tx) => {
    const row = await mfa.findTotp(tx, user.id);
    if (!row || row.confirmed_at) return undefined;
    const now = clock();
    const locked = await mfa.codesLockedUntil(tx, user.id, now);
    if (locked) return new CodesLocked(locked, now);
    const step = totp.stepOf(totp.decrypt(row.secret_encrypted), code, now);
    if (step === undefined || !(await mfa.useTotpStep(tx, user.id, step))) {
      await mfa.countWrongCode(tx, user.id, now, WRONG_CODES);
      return undefined;
    }
    const recovery = newRecoveryCodes();
    // After the TOTP row (mfa/verify's order), the user's: a refresh or a login racing this
    // waits for it, or it for them, and their session is ended below (CONTRACT §26).
    const account = await lockAccount(tx, deps, { userId: user.id, mode: 'update', by: byUser(clientOf(request)) });
    if (!account) return undefined; // deleted meanwhile: nothing to enrol
    await mfa.confirmTotp(tx, user.id, recovery.map(recoveryCodeHash), now);
    // As a password change does: whoever signed in elsewhere with the password alone (a thief
    // of it, say) must sign in again, now with a code. This session goes on.
    const { ended, pair } = await endOtherSessions(tx, tokens, account.user, sessionId, clientOf(request), now);
    await account.event('auth.mfa_enrolled', { method: 'totp' });
    await account.record('mfa.enrolled', { method: 'totp', revoked_sessions: ended });
    return { recovery, ended, pair };
  });
  if (codes instanceof CodesLocked) return refuseLocked(reply, codes);
  if (!codes) return sendError(reply, 'codeInvalid');
  request.log.info({ userId: user.id, revokedSessions: codes.ended }, 'totp enrolled');
  // The contract's field first; the session's new pair beside it (CONTRACT §33).
  return { recovery_codes: codes.recovery, ...codes.pair };
}

async function removeTotp(deps: MfaRoutesDeps, request: FastifyRequest, reply: FastifyReply) {
  const { db, passwords, clock } = deps;
  const identity = currentIdentity(request);
  const { user: { id }, sessionId } = identity;
  const password = textField(request.body, 'password');
  const user = isTooLong(password) ? undefined : await users.findByIdWithHash(db, id);
  if (!(await passwordConfirmed(passwords, user, password, identity, clock()))) return sendError(reply, 'invalidCredentials');
  const removed = await changeAccount(deps, { userId: id, mode: 'update', by: byUser(clientOf(request)) }, async ({ tx, user: locked, now, record, event }) => {
    if (!(await mfa.removeTotp(tx, id))) return undefined;
    // Whoever signed in elsewhere with the factor must sign in again: every other session ends.
    const { ended, pair } = await endOtherSessions(tx, deps.tokens, locked, sessionId, clientOf(request), now);
    await event('auth.mfa_removed', { method: 'totp', revoked_sessions: ended });
    await record('mfa.removed', { method: 'totp', revoked_sessions: ended });
    return { ended, pair };
  }); // undefined: no factor (or no such user any more) to remove, nothing changed
  request.log.info({ userId: id, revokedSessions: removed?.ended ?? 0 }, 'totp removed');
  return successBody(reply, 'mfaRemoved', removed?.pair && { ...removed.pair });
}

async function verifyCode(deps: MfaRoutesDeps, request: FastifyRequest, reply: FastifyReply) {
  const { db, tokens, totp, clock } = deps;
  const token = textField(request.body, 'mfa_token').trim();
  const code = textField(request.body, 'code').trim();
  if (!token || !code) return sendError(reply, 'codeRefused');
  const hash = sha256Hex(token);
  const outcome = await db.transaction(async (tx): Promise<TokenPair | CodesLocked | Refused | { sso: SsoRequired }> => {
    const now = clock();
    // Locked: two verifies of one mfa_token at once queue here, and the second finds it used.
    const live = await mfa.lockLiveMfaToken(tx, hash, now, MFA_TOKEN_MAX_FAILURES);
    if (!live) return { why: 'mfaTokenInvalid' };
    const locked = await mfa.codesLockedUntil(tx, live.userId, now);
    if (locked) return new CodesLocked(locked, now);
    const client = clientOf(request);
    // Deactivated since the password step: refused before a code is checked, so that none is used
    // up (a recovery code is one of ten) for a sign-in that cannot happen.
    const account = await lockAccount(tx, deps, { userId: live.userId, mode: 'share', by: byUser(client) });
    if (!account) return { why: 'userGone' };
    const { user, record } = account;
    // An mfa_token a password or a provider gave an enforced domain's address before enforce was
    // turned on: refused before its code is checked, as the first step would be now (CONTRACT §31).
    const sso = await deps.sso?.requiredFor(user.email);
    if (sso && live.samlConnectionId !== sso.connectionId) return { sso };
    if (user.is_active !== 1) {
      await record('login.failed', { reason: 'inactive' });
      return { why: 'inactive', userId: user.id };
    }
    const amr = await secondFactor(totp, tx, live.userId, code, now);
    if (!amr) {
      await mfa.failMfaToken(tx, hash);
      const lockedNow = await mfa.countWrongCode(tx, live.userId, now, WRONG_CODES);
      if (lockedNow) request.log.warn({ userId: live.userId, until: lockedNow.toISOString() }, 'second-factor codes locked: too many wrong codes');
      await record('login.failed', { reason: 'mfa_failed' });
      return { why: 'mfaFailed', userId: live.userId };
    }
    await mfa.useMfaToken(tx, hash, now);
    // Once each: an IdP's trusted MFA (`fed mfa`, CONTRACT §31) and a code both say `mfa`.
    const signIn = [...new Set([...live.amr, ...amr])];
    // A recovery code adds `mfa` alone (a TOTP code `otp` too): one fewer left.
    if (!amr.includes('otp')) await record('mfa.recovery_code_used');
    // A SAML sign-in's step is still a SAML sign-in (CONTRACT §31: login.succeeded's data.method).
    await record('login.succeeded', { amr: signIn, ...(live.samlConnectionId ? { method: 'saml' } : {}) });
    return issueInSession(tx, tokens, user, client, now, undefined, signIn, live.samlConnectionId);
  });
  if (outcome instanceof CodesLocked) return refuseLocked(reply, outcome);
  if ('sso' in outcome) return sendSsoRequired(reply, outcome.sso);
  // A failed login is one log line too (CONTRACT §17), with the same answer whatever the reason.
  if ('why' in outcome) return refuseCredentials(request, reply, outcome.why, outcome.userId, 'codeRefused');
  return outcome;
}

/** 429 while the lock holds, saying when to try again. */
function refuseLocked(reply: FastifyReply, { until, now }: CodesLocked) {
  return sendDenial(reply, { code: 'rateLimited', headers: { 'retry-after': String(Math.max(1, Math.ceil((until.getTime() - now.getTime()) / 1000))) } });
}

/** The `amr` a code adds, once: a TOTP step or a recovery code is used up by the UPDATE that accepts it. */
async function secondFactor(totp: Totp, tx: Queryable, userId: number, code: string, now: Date): Promise<string[] | undefined> {
  const row = await mfa.findTotp(tx, userId);
  if (!row?.confirmed_at) return undefined;
  const step = totp.stepOf(totp.decrypt(row.secret_encrypted), code, now);
  if (step !== undefined) return (await mfa.useTotpStep(tx, userId, step)) ? ['otp', 'mfa'] : undefined;
  return (await mfa.useRecoveryCode(tx, userId, recoveryCodeHash(code), now)) ? ['mfa'] : undefined;
}
