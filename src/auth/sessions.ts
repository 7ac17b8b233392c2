// Sessions as the auth endpoints make them: a pair issued into a session (a refresh-token family,
// storage/sessions.ts), new at login, continued at each refresh.
import type { FastifyRequest } from 'fastify';
import { headerValue } from '../http.js';
import type { Queryable } from '../storage/db.js';
import { insertRefreshToken } from '../storage/refreshTokens.js';
import { createSession, touchSession, type Client } from '../storage/sessions.js';
import type { User } from '../storage/users.js';
import { sha256Hex } from '../credentials/digest.js';
import type { TokenPair, Tokens } from '../credentials/tokens.js';

export const PASSWORD_AMR: readonly string[] = ['pwd'];

/** The client as the request shows it: user agent, and address (X-Forwarded-For only under server.trustProxy). */
export function clientOf(request: FastifyRequest): Client {
  return { userAgent: headerValue(request.headers, 'user-agent') || undefined, ip: request.ip };
}

/**
 * Issues a pair into `sessionId` (its last use and client updated), or into a new session when it
 * is undefined, with the sign-in's `amr`. Runs in the transaction that locked the user (account/change.ts).
 */
export async function issueInSession(tx: Queryable, tokens: Tokens, user: User, client: Client, now: Date, sessionId?: number, amr = PASSWORD_AMR): Promise<TokenPair> {
  let id = sessionId;
  let assurance = { amr: [...amr], authTime: now };
  // A continued session keeps the assurance of the sign-in that started it (CONTRACT §14).
  if (id === undefined) id = await createSession(tx, user.id, client, now, amr);
  else assurance = await touchSession(tx, id, client, now);
  const { pair, refreshExpiresAt } = await tokens.issuePair(user, id, assurance);
  await insertRefreshToken(tx, user.id, sha256Hex(pair.refresh_token), refreshExpiresAt, id);
  return pair;
}
