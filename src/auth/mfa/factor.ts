// Guard `factor` (CONTRACT §14), for adding, confirming or removing a way to sign in: a bearer
// access token (never an API key) from a sign-in at most 5 minutes old, at aal2 when the user
// already has a second factor, and, with mail configured, an account whose email is verified (so
// nobody pre-installs a factor on an address they do not own). Runs after requireUser().
import type { FastifyReply, FastifyRequest, preHandlerAsyncHookHandler } from 'fastify';
import { sendError, type ErrorCode } from '../../errors/index.js';
import { currentIdentity } from '../../listener/requireUser.js';
import type { Identity } from '../../pipeline/index.js';
import type { Queryable } from '../../storage/database/index.js';
import { hasSecondFactor, type UserWithHash } from '../../storage/accounts/index.js';
import type { Passwords } from '../password/passwords.js';

/** A factor is added or removed only from a sign-in this recent. */
export const RECENT_SIGN_IN_S = 5 * 60;

export interface FactorGuardDeps {
  db: Queryable;
  clock: () => Date;
  /** With mail configured, a factor is added only to an account whose email is verified. */
  mailConfigured: boolean;
}

export function factorGuard({ db, clock, mailConfigured }: FactorGuardDeps): preHandlerAsyncHookHandler {
  async function denial(request: FastifyRequest): Promise<ErrorCode | undefined> {
    const identity = currentIdentity(request);
    const { user, acr } = identity;
    if (!isRecentSignIn(identity, clock())) return 'recentAuthRequired';
    // A passkey counts: whoever has only the password of a user with one must not add another.
    if (acr !== 'aal2' && (await hasSecondFactor(db, user.id))) return 'recentAuthRequired';
    if (mailConfigured && !user.email_verified_at) return 'emailUnverified';
    return undefined;
  }
  return async function factor(request: FastifyRequest, reply: FastifyReply) {
    const code = await denial(request);
    if (code) return sendError(reply, code);
  };
}

/** A bearer access token (never an API key) from a sign-in at most 5 minutes old. */
export function isRecentSignIn({ method, authTime }: Identity, now: Date): boolean {
  return method === 'bearer' && now.getTime() / 1000 - (authTime ?? 0) <= RECENT_SIGN_IN_S;
}

/**
 * CONTRACT §13 amended (§30): deleting the account of a user with a second factor (TOTP confirmed,
 * or a passkey) also takes a sign-in at aal2 at most 5 minutes old: the password alone, or a
 * session a thief kept open, must not be enough to erase an account its owner protected with a
 * second factor. Always true for a user without one.
 */
export async function secondFactorFresh(db: Queryable, identity: Identity, now: Date): Promise<boolean> {
  if (identity.acr === 'aal2' && isRecentSignIn(identity, now)) return true;
  return !(await hasSecondFactor(db, identity.user.id));
}

/**
 * Where an endpoint asks for the password (CONTRACT §14): the password, or, for a user who has
 * none (made by an identity provider), a recent sign-in in its place.
 */
export async function passwordConfirmed(passwords: Passwords, user: UserWithHash | undefined, password: string, identity: Identity, now: Date): Promise<boolean> {
  if (!user) return false;
  if (user.password_hash === null) return isRecentSignIn(identity, now);
  return passwords.verify(user.password_hash, password);
}
