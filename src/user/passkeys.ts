// GET /api/v1/user/passkeys and DELETE /api/v1/user/passkeys/{id} (CONTRACT §14), registered with
// the passkey endpoints (auth.passkeys). Removing one is guard `factor`, and ends every other
// session: whoever signed in with a lost passkey must sign in again.
import type { FastifyInstance } from 'fastify';
import { byUser, changeAccount } from '../account/change.js';
import { sendError, successBody } from '../errors/index.js';
import { currentIdentity, type RequireUser } from '../listener/requireUser.js';
import type { Audit } from '../audit.js';
import { clientOf, factorGuard, ownSession, pairAfterChange, type FactorGuardDeps } from '../auth/index.js';
import type { Tokens } from '../credentials/tokens.js';
import { parseIntegerId, type Database } from '../storage/database/index.js';
import { listPasskeys, removePasskey, revokeOtherSessions } from '../storage/accounts/index.js';
import type { Events } from '../webhooks/emitter.js';
import { bearer, bearerOnly, errors, message, passkey, withNewPair, type EndpointSchema } from '../openapi.js';

export interface PasskeysDeps extends FactorGuardDeps {
  db: Database;
  tokens: Tokens;
  events: Events;
  audit: Audit;
  requireUser: RequireUser;
}

/** Each route's OpenAPI fragment (documentation only: src/openapi.ts), by handler. */
const DOCS = {
  list: {
    tags: ['second factor'], summary: 'The user\'s passkeys (never a key or counter); only with auth.passkeys', security: bearer,
    response: { 200: { type: 'object', properties: { passkeys: { type: 'array', items: passkey } } }, ...errors('tokenInvalid', 'rateLimited') },
  },
  remove: {
    tags: ['second factor'], summary: 'Remove one of the user\'s passkeys; every other session ends', security: bearerOnly,
    params: { type: 'object', required: ['id'], properties: { id: { type: 'string', pattern: '^[1-9][0-9]*$' } } },
    response: { 200: withNewPair(message), ...errors('passkeyNotFound', 'recentAuthRequired', 'emailUnverified', 'tokenInvalid', 'rateLimited') },
  },
} satisfies Record<string, EndpointSchema>;

export async function passkeysRoutes(app: FastifyInstance, deps: PasskeysDeps): Promise<void> {
  const { db, requireUser } = deps;

  app.get('/passkeys', { schema: DOCS.list, preHandler: requireUser() }, async (request) => {
    const rows = await listPasskeys(db, currentIdentity(request).user.id);
    return { passkeys: rows.map((p) => ({ id: p.id, name: p.name, created_at: iso(p.created_at), last_used_at: iso(p.last_used_at) })) };
  });

  app.delete<{ Params: { id: string } }>('/passkeys/:id', { schema: DOCS.remove, preHandler: [requireUser(), factorGuard(deps)] }, async (request, reply) => {
    const { user: { id: userId }, sessionId } = currentIdentity(request);
    const id = parseIntegerId(request.params.id);
    const by = byUser(clientOf(request));
    const removed = id === undefined ? undefined : await changeAccount(deps, { userId, mode: 'update', by }, async ({ tx, user, now, record, event }) => {
      // Someone else's passkey is "not found", as an unknown one: ids do not tell whose they are.
      if (!(await removePasskey(tx, userId, id))) return undefined;
      const keep = await ownSession(tx, userId, sessionId);
      const n = await revokeOtherSessions(tx, userId, 'mfa', keep);
      await event('auth.mfa_removed', { method: 'passkey', revoked_sessions: n });
      await record('passkey.removed', { passkey_id: id, revoked_sessions: n });
      // Every access token of before it is refused (CONTRACT §33); this session goes on with a new pair.
      return { ended: n, pair: await pairAfterChange(tx, deps.tokens, user, clientOf(request), now, keep) };
    });
    if (removed === undefined) return sendError(reply, 'passkeyNotFound');
    request.log.info({ userId, passkeyId: id, revokedSessions: removed.ended }, 'passkey removed');
    return successBody(reply, 'passkeyDeleted', { ...removed.pair });
  });
}

const iso = (value: unknown) => (value instanceof Date ? value.toISOString() : null);
