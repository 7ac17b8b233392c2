// What a new password must be, wherever one comes in (register, change, reset), and how a refused
// credential is answered and logged. What an email must be: credentials/emailAddress.ts.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { passwordTooShortParams, sendError, telemetryName, type Denial, type ErrorCode } from '../errors/index.js';
import { isTooLong } from './password/passwords.js';

/** Why a new password is refused, or undefined. Counted in characters (code points), as a person counts them. */
export function newPasswordDenial(password: string, minLength: number): Denial | undefined {
  if ([...password].length < minLength) return { code: 'passwordTooShort', params: passwordTooShortParams(minLength) };
  if (isTooLong(password)) return { code: 'passwordTooLong' };
  return undefined;
}

/** Why a password or refresh token was refused: the log says, the client never learns. */
export type CredentialRefusal =
  | 'unknownEmail' | 'inactive' | 'wrongPassword' | 'passwordTooLong' | 'unfitPassword' | 'changedMeanwhile' | 'undecodable' | 'inactiveToken' | 'userGone' | 'mfaFailed'
  | 'mfaTokenInvalid';

/**
 * A refused credential: one `request denied` line with the reason and, when known, the account
 * (never what was sent: neither the password nor the token), then the one answer every such
 * refusal gets, so the client cannot tell an unknown email from a wrong password.
 */
export function refuseCredentials(request: FastifyRequest, reply: FastifyReply, why: CredentialRefusal, userId?: number, code: ErrorCode = 'invalidCredentials'): FastifyReply {
  request.log.info({ reason: telemetryName(code), why, userId }, 'request denied');
  return sendError(reply, code);
}
