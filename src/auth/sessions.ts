// Sessions as the auth endpoints make them: a pair issued into a session (a refresh-token family,
// storage/accounts/sessions.ts), new at login, continued at each refresh.
import type { FastifyRequest } from 'fastify';
import { headerValue } from '../http.js';
import type { Queryable } from '../storage/database/index.js';
import { type Client, createSession, endOlderTokens, insertRefreshToken, isUsersSession, touchSession, type User } from '../storage/accounts/index.js';
import { sha256Hex } from '../credentials/digest.js';
import type { TokenPair, Tokens } from '../credentials/tokens.js';

export const PASSWORD_AMR: readonly string[] = ['pwd'];

declare module 'fastify' {
  interface FastifyInstance {
    /** portal.publicUrl with the portal on (app.ts), else undefined: whose pages' requests are marked via portal. */
    portalOrigin: string | undefined;
  }
}

/**
 * The client as the request shows it: user agent, and address (X-Forwarded-For only under
 * server.trustProxy); via 'portal' when the customer portal's pages sent it (CONTRACT §30: they
 * send X-Gateway-Portal: 1, which a browser sends only with a page's script, from publicUrl's
 * Origin), so the audit log tells portal actions from the API's.
 */
export function clientOf(request: FastifyRequest): Client {
  const client: Client = { userAgent: headerValue(request.headers, 'user-agent') || undefined, ip: request.ip };
  const portal = request.server.portalOrigin;
  if (portal !== undefined && request.headers['x-gateway-portal'] === '1' && request.headers.origin === portal) client.via = 'portal';
  return client;
}

/**
 * Issues a pair into `sessionId` (its last use and client updated), or into a new session when it
 * is undefined, with the sign-in's `amr` and the SAML connection it came through (CONTRACT §31).
 * Runs in the transaction that locked the user (account/change.ts).
 */
export async function issueInSession(
  tx: Queryable, tokens: Tokens, user: User, client: Client, now: Date, sessionId?: number, amr = PASSWORD_AMR, samlConnectionId?: string,
): Promise<TokenPair> {
  let id = sessionId;
  let assurance = { amr: [...amr], authTime: now };
  // A continued session keeps the assurance of the sign-in that started it (CONTRACT §14).
  if (id === undefined) id = await createSession(tx, user.id, client, now, amr, samlConnectionId);
  else assurance = await touchSession(tx, id, client, now);
  const { pair, refreshExpiresAt } = await tokens.issuePair(user, id, assurance);
  await insertRefreshToken(tx, user.id, sha256Hex(pair.refresh_token), refreshExpiresAt, id);
  return pair;
}

/** The caller's session (its token's `sid`) when it is one of the user's; else undefined. */
export async function ownSession(tx: Queryable, userId: number, sessionId: number | undefined): Promise<number | undefined> {
  return sessionId !== undefined && (await isUsersSession(tx, userId, sessionId)) ? sessionId : undefined;
}

/**
 * A credential change made from a session (CONTRACT §33), in its transaction, `user` the locked
 * row: every access token minted before it is refused from now on, this session's too, and the
 * session goes on with the pair answered here, minted under the new generation. `keep`: the
 * session (ownSession()); undefined starts one, as a sign-in would.
 */
export async function pairAfterChange(tx: Queryable, tokens: Tokens, user: User, client: Client, now: Date, keep: number | undefined): Promise<TokenPair> {
  await endOlderTokens(tx, user);
  return issueInSession(tx, tokens, user, client, now, keep);
}
