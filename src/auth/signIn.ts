// The sign-in state machine (CONTRACT §14): a first factor (a password, a link, a provider, a
// passkey) gives the pair, or, for a user with a second factor, an mfa_token that POST
// /mfa/verify (mfa/routes.ts) turns into the pair with a code. Every way in goes through here, so
// no way in can skip the second factor.
import { randomBytes } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Audit } from '../audit.js';
import { sha256Hex } from '../credentials/digest.js';
import type { TokenPair, Tokens } from '../credentials/tokens.js';
import { sendError } from '../errors/index.js';
import type { Queryable } from '../storage/database/index.js';
import { type Client, mfa, type User } from '../storage/accounts/index.js';
import { issueInSession } from './sessions.js';

/** How long an mfa_token lives. */
const MFA_TOKEN_TTL_MS = 5 * 60_000;

export const MFA_METHODS = ['totp', 'recovery_code'] as const;

/** The 403 a login answers for a user with a second factor: an mfa_token instead of the pair (`samlConnectionId` kept for the session). */
export async function issueMfaToken(db: Queryable, userId: number, amr: readonly string[], now: Date, samlConnectionId?: string): Promise<string> {
  const token = randomBytes(32).toString('base64url');
  await mfa.createMfaToken(db, sha256Hex(token), userId, amr, new Date(now.getTime() + MFA_TOKEN_TTL_MS), samlConnectionId);
  return token;
}

/** What a sign-in by one factor gives: the pair, or an mfa_token when a second factor is owed. */
export type OneFactorSignIn = { pair: TokenPair } | { mfaToken: string };

/**
 * A sign-in by one factor (a link, a provider), in the transaction that locked the user: a user
 * with TOTP still owes a code (an mfa_token for POST /mfa/verify); any other gets the pair, and
 * login.succeeded is recorded with it. `via`: how a federated sign-in went (saml: the method
 * login.succeeded names, the connection the session keeps, CONTRACT §31).
 */
export async function signInByOneFactor(
  tx: Queryable, deps: { tokens: Tokens; audit: Audit }, user: User, client: Client, now: Date, amr: readonly string[],
  via: { method?: string; samlConnectionId?: string } = {},
): Promise<OneFactorSignIn> {
  if (await mfa.hasConfirmedTotp(tx, user.id)) return { mfaToken: await issueMfaToken(tx, user.id, amr, now, via.samlConnectionId) };
  await deps.audit.record({ type: 'login.succeeded', actor: 'user', userId: user.id, ...client, data: { amr, ...(via.method ? { method: via.method } : {}) } }, tx);
  return { pair: await issueInSession(tx, deps.tokens, user, client, now, undefined, amr, via.samlConnectionId) };
}

/** The answer to a one-factor sign-in (`how`: "magic link"): the pair, or the 403 that asks for the second factor. */
export function answerOneFactorSignIn(request: FastifyRequest, reply: FastifyReply, userId: number, signIn: OneFactorSignIn, how: string): TokenPair | FastifyReply {
  if ('mfaToken' in signIn) {
    request.log.info({ userId }, `${how}: second factor required`);
    return sendError(reply, 'mfaCodeRequired', { mfa_token: signIn.mfaToken, methods: MFA_METHODS });
  }
  request.log.info({ userId }, `login by ${how}`);
  return signIn.pair;
}
