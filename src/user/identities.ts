// GET /api/v1/user/identities and DELETE /api/v1/user/identities/{provider} (CONTRACT §15),
// registered with auth.oidc. Unlinking is guard `factor`, and never removes the last way to sign
// in: an account left with no password, no passkey and no other provider could never be entered again.
import type { FastifyInstance } from 'fastify';
import { byUser, changeAccount } from '../account/change.js';
import { sendError, successBody } from '../errors/index.js';
import { currentIdentity, type RequireUser } from '../listener/requireUser.js';
import type { Audit } from '../audit.js';
import { clientOf, factorGuard, type FactorGuardDeps } from '../auth/index.js';
import type { Database } from '../storage/database/index.js';
import { identities } from '../storage/accounts/index.js';
import { bearer, bearerOnly, errors, identity, message, type EndpointSchema } from '../openapi.js';

export interface IdentitiesDeps extends FactorGuardDeps {
  db: Database;
  audit: Audit;
  requireUser: RequireUser;
  /** The issuer of a configured provider's name (a renamed provider keeps its links by issuer). */
  issuerOf: (provider: string) => string | undefined;
}

/** Each route's OpenAPI fragment (documentation only: src/openapi.ts), by handler. */
const DOCS = {
  list: {
    tags: ['identity providers'], summary: 'The providers linked to the account; only with auth.oidc', security: bearer,
    response: { 200: { type: 'object', properties: { identities: { type: 'array', items: identity } } }, ...errors('tokenInvalid', 'rateLimited') },
  },
  unlink: {
    tags: ['identity providers'], summary: 'Unlink a provider, unless it is the last way to sign in', security: bearerOnly,
    params: { type: 'object', required: ['provider'], properties: { provider: { type: 'string', description: 'the provider\'s name in auth.oidc.providers' } } },
    response: { 200: message, ...errors('providerNotLinked', 'lastSignInMethod', 'recentAuthRequired', 'emailUnverified', 'tokenInvalid', 'rateLimited') },
  },
} satisfies Record<string, EndpointSchema>;

export async function identitiesRoutes(app: FastifyInstance, deps: IdentitiesDeps): Promise<void> {
  const { db, requireUser, issuerOf } = deps;

  app.get('/identities', { schema: DOCS.list, preHandler: requireUser() }, async (request) => {
    const links = await identities.listLinks(db, currentIdentity(request).user.id);
    return { identities: links.map((l) => ({ provider: l.provider, issuer: l.issuer, subject: l.subject, email: l.email, created_at: l.created_at.toISOString() })) };
  });

  app.delete<{ Params: { provider: string } }>('/identities/:provider', { schema: DOCS.unlink, preHandler: [requireUser(), factorGuard(deps)] }, async (request, reply) => {
    const { user: { id: userId } } = currentIdentity(request);
    const provider = request.params.provider;
    const issuer = issuerOf(provider);
    // Locked first: two unlinks at once cannot each count the other's provider and leave none.
    const by = byUser(clientOf(request));
    const outcome = await changeAccount(deps, { userId, mode: 'update', by }, async ({ tx, record }) => {
      if ((await identities.otherSignInMethods(tx, userId, { provider, issuer })) === 0) {
        return (await identities.listLinks(tx, userId)).some((l) => l.provider === provider || l.issuer === issuer) ? 'last' : 'none';
      }
      const removed = await identities.removeLinks(tx, userId, provider, issuer);
      for (const link of removed) await record('oidc.unlinked', { provider: link.provider, issuer: link.issuer });
      return removed.length ? 'removed' : 'none';
    }) ?? 'none'; // no such user any more: nothing of theirs is linked
    if (outcome === 'none') return sendError(reply, 'providerNotLinked');
    if (outcome === 'last') return sendError(reply, 'lastSignInMethod');
    request.log.info({ userId, provider }, 'identity provider unlinked');
    return successBody(reply, 'providerUnlinked');
  });
}
