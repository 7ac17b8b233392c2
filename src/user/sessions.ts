// GET /api/v1/user/sessions, DELETE /api/v1/user/sessions/{id} (CONTRACT §13): one session per
// refresh-token family; DELETE /api/v1/user/sessions (§30, §33's "sign out everywhere"): all of
// them, the caller's included, and every access token minted before it refused within a second.
import type { FastifyInstance } from 'fastify';
import { byUser, changeAccount } from '../account/change.js';
import { sendError, successBody } from '../errors/index.js';
import { currentIdentity, type RequireUser } from '../listener/requireUser.js';
import type { Database } from '../storage/database/index.js';
import { activeSessions, endOlderTokens, isUsersSession, revokeAllForUser, revokeSession } from '../storage/accounts/index.js';
import type { Audit } from '../audit.js';
import { clientOf } from '../auth/index.js';
import type { Events } from '../webhooks/emitter.js';
import { bearer, errors, message, session, type EndpointSchema } from '../openapi.js';

export interface SessionsDeps {
  db: Database;
  clock: () => Date;
  events: Events;
  audit: Audit;
  requireUser: RequireUser;
}

/** Each route's OpenAPI fragment (documentation only: src/openapi.ts), by handler. */
const DOCS = {
  list: {
    tags: ['accounts'], summary: 'The active sessions (one per login), most recently used first', security: bearer,
    response: { 200: { type: 'object', properties: { sessions: { type: 'array', items: session } } }, ...errors('tokenInvalid', 'rateLimited') },
  },
  end: {
    tags: ['accounts'], summary: 'End one of the user\'s sessions', security: bearer, params: { type: 'object', required: ['id'], properties: { id: { type: 'string', pattern: '^[1-9][0-9]*$' } } },
    response: { 200: message, ...errors('sessionNotFound', 'tokenInvalid', 'rateLimited') },
  },
  endAll: {
    tags: ['accounts'], security: bearer,
    summary: 'Sign out everywhere: end every session of the user, this one included; every access token of the user issued before is refused within a second',
    response: {
      200: { type: 'object', required: ['message', 'revoked'], properties: { message: { type: 'string' }, revoked: { type: 'integer', description: 'sessions ended' } } },
      ...errors('tokenInvalid', 'rateLimited'),
    },
  },
} satisfies Record<string, EndpointSchema>;

export async function sessionRoutes(app: FastifyInstance, deps: SessionsDeps): Promise<void> {
  const { db, clock, requireUser } = deps;

  app.get('/sessions', { schema: DOCS.list, preHandler: requireUser() }, async (request) => {
    const { user, sessionId } = currentIdentity(request);
    const sessions = await activeSessions(db, user.id, clock());
    return {
      sessions: sessions.map((s) => ({
        id: s.id,
        created_at: s.created_at.toISOString(),
        last_used_at: s.last_used_at.toISOString(),
        user_agent: s.user_agent,
        ip: s.ip,
        current: s.id === sessionId,
      })),
    };
  });

  app.delete<{ Params: { id: string } }>('/sessions/:id', { schema: DOCS.end, preHandler: requireUser() }, async (request, reply) => {
    const { user, sessionId } = currentIdentity(request);
    const id = parseSessionId(request.params.id);
    const by = byUser(clientOf(request));
    const revoked = id === undefined ? undefined : await changeAccount(deps, { userId: user.id, mode: 'update', by }, async ({ tx, record, event }) => {
      // Someone else's session is "not found", never "forbidden": ids do not tell whose they are.
      if (!(await isUsersSession(tx, user.id, id))) return undefined;
      const ended = await revokeSession(tx, id);
      // Ending a session already ended is not an event.
      if (ended > 0) {
        await event('auth.session_revoked', { session_id: id, current: id === sessionId });
        await record('session.revoked', { session_id: id, current: id === sessionId });
      }
      return ended;
    });
    if (revoked === undefined) return sendError(reply, 'sessionNotFound');
    if (revoked > 0) request.log.info({ userId: user.id, sessionId: id }, 'session revoked');
    return successBody(reply, 'sessionRevoked');
  });

  app.delete('/sessions', { schema: DOCS.endAll, preHandler: requireUser() }, async function endAllSessions(request, reply) {
    const { user } = currentIdentity(request);
    const ended = await changeAccount(deps, { userId: user.id, mode: 'update', by: byUser(clientOf(request)) }, async ({ tx, user: locked, record, event }) => {
      const n = await revokeAllForUser(tx, locked.id, 'session');
      // The access tokens too (CONTRACT §33): a stolen one must not outlive its refresh token by its TTL.
      await endOlderTokens(tx, locked);
      await event('auth.session_revoked', { session_id: null, current: true, sessions: n });
      await record('session.revoked', { all: true, sessions: n });
      return n;
    });
    if (ended === undefined) return sendError(reply, 'tokenInvalid');
    request.log.info({ userId: user.id, ended }, 'every session revoked by its user');
    return successBody(reply, 'sessionsRevoked', { revoked: ended });
  });
}

const SESSION_ID = /^[1-9]\d{0,15}$/;

/** A session id from a URL, within what JSON numbers hold exactly; else undefined (a 404, like an unknown one). */
function parseSessionId(text: string): number | undefined {
  const n = SESSION_ID.test(text) ? Number(text) : NaN;
  return Number.isSafeInteger(n) ? n : undefined;
}
