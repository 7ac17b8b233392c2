// An organization's SCIM tokens (CONTRACT §31): made by an owner with the `factor` guard (a recent
// sign-in, at aal2 when they have a second factor), listed and revoked by owners and admins. The
// token is shown once and kept as its SHA-256; it belongs to the organization, so it keeps working
// after its creator leaves and goes when the organization does (migration 048's CASCADE).
import type { FastifyInstance, FastifyReply, FastifyRequest, preHandlerAsyncHookHandler } from 'fastify';
import { clientOf } from '../auth/index.js';
import type { Audit } from '../audit.js';
import { randomToken, sha256Hex } from '../credentials/digest.js';
import { sendError, successBody, type ErrorCode } from '../errors/index.js';
import { currentUser } from '../listener/requireUser.js';
import { bearerOnly, errors, message } from '../openapi.js';
import { parseIntegerId, type Database } from '../storage/database/index.js';
import { deleteScimToken, insertScimToken, lockOrganization, type OrgRole, roleOf, scimTokensOf } from '../storage/orgs/index.js';

/** What a SCIM token starts with: recognisable in a leaked file or a secret scanner, never taken for an API key. */
export const SCIM_TOKEN_PREFIX = 'gwscim_';

export interface TokenRouteDeps {
  db: Database;
  audit: Pick<Audit, 'record'>;
  clock: () => Date;
  bearer: preHandlerAsyncHookHandler[];
  factor: preHandlerAsyncHookHandler;
}

const INT = { type: 'integer' };
const DATE = { type: 'string', format: 'date-time' };
const NULLABLE_DATE = { type: ['string', 'null'], format: 'date-time' };
const ids = (...names: string[]) => ({ type: 'object', required: names, properties: Object.fromEntries(names.map((n) => [n, { type: 'string', pattern: '^[1-9][0-9]{0,9}$' }])) });
const TOKEN = { type: 'object', properties: { id: INT, name: { type: 'string' }, created_at: DATE, expires_at: NULLABLE_DATE, last_used_at: NULLABLE_DATE } };
const tags = ['scim'];
const DOCS = {
  create: {
    tags, security: bearerOnly, params: ids('id'),
    summary: 'Create a SCIM token for the organization (owner, guard factor: a recent sign-in); the token is shown once',
    body: { type: 'object', required: ['name'], properties: { name: { type: 'string', minLength: 1, maxLength: 64 }, expires_at: NULLABLE_DATE } },
    response: {
      201: { type: 'object', properties: { id: INT, name: { type: 'string' }, token: { type: 'string' }, created_at: DATE, expires_at: NULLABLE_DATE } },
      ...errors('badRequest', 'orgNotFound', 'roleInsufficient', 'recentAuthRequired', 'emailUnverified', 'apiKeyNotAccepted', 'tokenInvalid'),
    },
  },
  list: {
    tags, security: bearerOnly, params: ids('id'), summary: 'The organization\'s SCIM tokens, with last_used_at, never the token (owner, admin)',
    response: { 200: { type: 'object', properties: { tokens: { type: 'array', items: TOKEN } } }, ...errors('orgNotFound', 'roleInsufficient', 'apiKeyNotAccepted', 'tokenInvalid') },
  },
  revoke: {
    tags, security: bearerOnly, params: ids('id', 'token_id'), summary: 'Revoke a SCIM token of the organization (owner, admin)',
    response: { 200: message, ...errors('orgNotFound', 'roleInsufficient', 'scimTokenNotFound', 'apiKeyNotAccepted', 'tokenInvalid') },
  },
};

const OWNERS: readonly OrgRole[] = ['owner'];
const MANAGERS: readonly OrgRole[] = ['owner', 'admin'];
// A name is shown in lists and the audit log: no control, bidi or line-break characters.
const UNFIT_IN_NAME = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/u;
const MAX_NAME = 64;

type Refusal = { code: ErrorCode; extra?: Record<string, unknown> };

/** The caller's role when it is one of `roles`; else the refusal (404 for a non-member: membership is not disclosed). */
function roleRefusal(role: OrgRole | undefined, roles: readonly OrgRole[]): Refusal | undefined {
  if (role === undefined) return { code: 'orgNotFound' };
  if (!roles.includes(role)) return { code: 'roleInsufficient', extra: { required_roles: roles, current_role: role } };
  return undefined;
}

/** The body's name and expiry, or undefined when either is not one (400). */
function tokenRequest(body: unknown, now: Date): { name: string; expiresAt: Date | null } | undefined {
  // A body that is no object has none of the fields.
  const fields = (body ?? {}) as Record<string, unknown>;
  const name = typeof fields.name === 'string' ? fields.name.trim() : '';
  if (!name || [...name].length > MAX_NAME || UNFIT_IN_NAME.test(name)) return undefined;
  if (fields.expires_at === undefined || fields.expires_at === null) return { name, expiresAt: null };
  const expiresAt = typeof fields.expires_at === 'string' ? new Date(fields.expires_at) : new Date(NaN);
  return Number.isNaN(expiresAt.getTime()) || expiresAt <= now ? undefined : { name, expiresAt };
}

/**
 * A path's id; 0, no row's, for one past what an id can be (the schema's pattern lets ten digits
 * through): refused as any id of nothing is, by the statement that finds nothing.
 */
const pathIdOf = (request: FastifyRequest, name: string) => parseIntegerId((request.params as Record<string, unknown>)[name]) ?? 0;

async function createToken(deps: TokenRouteDeps, request: FastifyRequest, reply: FastifyReply) {
  const orgId = pathIdOf(request, 'id');
  const user = currentUser(request);
  const now = deps.clock();
  const token = `${SCIM_TOKEN_PREFIX}${randomToken(32)}`;
  const outcome = await deps.db.transaction(async (tx): Promise<Refusal | { created: Awaited<ReturnType<typeof insertScimToken>> }> => {
    // The organization's row locked: a deletion running at once either goes first (no organization) or waits.
    if (!(await lockOrganization(tx, orgId))) return { code: 'orgNotFound' };
    const refused = roleRefusal(await roleOf(tx, orgId, user.id), OWNERS);
    if (refused) return refused;
    const wanted = tokenRequest(request.body, now);
    if (!wanted) return { code: 'badRequest' };
    const created = await insertScimToken(tx, { orgId, name: wanted.name, hash: sha256Hex(token), createdBy: user.id, expiresAt: wanted.expiresAt }, now);
    await deps.audit.record({ type: 'scim.token_created', actor: 'user', userId: user.id, ...clientOf(request), data: { org_id: orgId, id: created.id, name: created.name } }, tx);
    return { created };
  });
  if ('code' in outcome) return sendError(reply, outcome.code, outcome.extra);
  const { id, name, created_at, expires_at } = outcome.created;
  return reply.code(201).send({ id, name, token, created_at, expires_at });
}

export async function scimTokenRoutes(app: FastifyInstance, deps: TokenRouteDeps): Promise<void> {
  app.post('/:id/scim/tokens', { schema: DOCS.create, preHandler: [...deps.bearer, deps.factor] }, (request, reply) => createToken(deps, request, reply));

  app.get('/:id/scim/tokens', { schema: DOCS.list, preHandler: deps.bearer }, async (request, reply) => {
    const orgId = pathIdOf(request, 'id');
    const refused = roleRefusal(await roleOf(deps.db, orgId, currentUser(request).id), MANAGERS);
    if (refused) return sendError(reply, refused.code, refused.extra);
    return { tokens: await scimTokensOf(deps.db, orgId) };
  });

  app.delete('/:id/scim/tokens/:token_id', { schema: DOCS.revoke, preHandler: deps.bearer }, async (request, reply) => {
    const [orgId, tokenId] = [pathIdOf(request, 'id'), pathIdOf(request, 'token_id')];
    const user = currentUser(request);
    const refusal = await deps.db.transaction(async (tx): Promise<Refusal | undefined> => {
      const refused = roleRefusal(await roleOf(tx, orgId, user.id), MANAGERS);
      if (refused) return refused;
      if (!(await deleteScimToken(tx, orgId, tokenId))) return { code: 'scimTokenNotFound' };
      await deps.audit.record({ type: 'scim.token_revoked', actor: 'user', userId: user.id, ...clientOf(request), data: { org_id: orgId, id: tokenId } }, tx);
      return undefined;
    });
    if (refusal) return sendError(reply, refusal.code, refusal.extra);
    return successBody(reply, 'scimTokenRevoked');
  });
}
