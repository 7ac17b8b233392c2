// /api/v1/orgs and /api/v1/orgs/{id} (CONTRACT §22): an organization itself. Its creator is its
// first owner; a user owns at most organizations.maxOwnedPerUser, counted under the user's row lock
// (change.ts), so parallel creations on several instances never pass it. Each route carries its
// OpenAPI fragment (DOCS) beside its handler.
import type { FastifyInstance, preHandlerAsyncHookHandler } from 'fastify';
import { sendError, successBody } from '../errors/index.js';
import { currentUser } from '../listener/requireUser.js';
import { bearerOnly, errors, message } from '../openapi.js';
import { organizations as orgs } from '../storage/orgs/index.js';
import { orgChange, orgRead, refuse, requireRole, userChange, type OrgChangeDeps } from './change.js';
import { actorOf, answer, DATE, ids, INT, MANAGERS, object, OWNERS, pathId, requiredOrgName, ROLE, STR, TAGS } from './common.js';

export interface OrgRoutesDeps extends OrgChangeDeps {
  maxOwnedPerUser: number;
  /** requireBearer(): the bearer sign-in every endpoint here takes (CONTRACT §21). */
  bearer: preHandlerAsyncHookHandler[];
  /** The `factor` guard (auth/mfa/factor.ts), for the deletion. */
  factor: preHandlerAsyncHookHandler;
  /** With billing (CONTRACT §23): the organization's running subscriptions set to cancel at period end; false when Stripe could not be told. */
  cancelSubscriptions?: (owner: { type: 'org'; id: number }) => Promise<boolean>;
}

const NAME = object({ name: { type: 'string', minLength: 1, maxLength: 64, description: 'a name: no control, bidi or line-break characters, no `://`, `www.` or `@` (else 400 org_name_invalid)' } }, ['name']);
const organization = object({ id: INT, name: STR, plan: STR, created_at: DATE });
const member = object({ user_id: INT, email: STR, role: ROLE, joined_at: DATE });
const tags = TAGS;

export const DOCS = {
  create: {
    tags, security: bearerOnly, body: NAME,
    summary: 'Create an organization; its creator is its owner (a verified email; organizations.maxOwnedPerUser)',
    response: {
      201: object({ ...organization.properties, role: { const: 'owner' } }),
      ...errors('badRequest', 'orgNameInvalid', 'emailUnverified', 'orgLimitReached', 'apiKeyNotAccepted', 'tokenInvalid', 'rateLimited'),
    },
  },
  list: {
    tags, summary: 'The caller\'s organizations and role in each', security: bearerOnly,
    response: {
      200: object({ orgs: { type: 'array', items: object({ id: INT, name: STR, plan: STR, role: ROLE }) } }),
      ...errors('apiKeyNotAccepted', 'tokenInvalid'),
    },
  },
  read: {
    tags, summary: 'An organization of the caller\'s; its members for owners and admins', security: bearerOnly, params: ids('id'),
    response: {
      200: object({ ...organization.properties, members: { type: 'array', items: member, description: 'owners and admins only' } }),
      ...errors('orgNotFound', 'apiKeyNotAccepted', 'tokenInvalid'),
    },
  },
  rename: {
    tags, summary: 'Rename an organization (owner, admin)', security: bearerOnly, params: ids('id'), body: NAME,
    response: { 200: organization, ...errors('badRequest', 'orgNameInvalid', 'orgNotFound', 'roleInsufficient', 'apiKeyNotAccepted', 'tokenInvalid') },
  },
  remove: {
    tags, security: bearerOnly, params: ids('id'),
    summary: 'Delete an organization with its memberships, invitations and keys (owner, guard factor: a recent sign-in)',
    response: { 200: message, ...errors('orgNotFound', 'roleInsufficient', 'recentAuthRequired', 'emailUnverified', 'apiKeyNotAccepted', 'tokenInvalid', 'paymentUnavailable') },
  },
};

const shown = (org: orgs.Organization) => ({ id: org.id, name: org.name, plan: org.plan, created_at: org.created_at });

/** POST /api/v1/orgs, under the auth rate limit (index.ts). */
export async function createOrgRoute(app: FastifyInstance, deps: OrgRoutesDeps): Promise<void> {
  app.post('', { schema: DOCS.create, preHandler: deps.bearer }, async function createOrg(request, reply) {
    const outcome = await userChange(deps, actorOf(request), async ({ tx, now, user }) => {
      // Read from the locked row, not the request's cached user: a verification a moment ago counts.
      if (!user.email_verified_at) refuse('emailUnverified');
      const name = requiredOrgName(request.body);
      if ((await orgs.ownedCount(tx, user.id)) >= deps.maxOwnedPerUser) refuse('orgLimitReached');
      const org = await orgs.insertOrganization(tx, name, now);
      await orgs.addMember(tx, org.id, user.id, 'owner', now);
      const { client } = actorOf(request);
      await deps.audit.record({ type: 'org.created', actor: 'user', userId: user.id, ...client, data: { org_id: org.id, name } }, tx);
      return { id: org.id, name: org.name, plan: org.plan, role: 'owner', created_at: org.created_at };
    });
    if ('ok' in outcome) {
      // An id asked about before it existed is cached as no organization: its owner acts for it at once.
      deps.memberships.forget(outcome.ok.id);
      request.log.info({ userId: currentUser(request).id, orgId: outcome.ok.id }, 'organization created');
    }
    return answer(reply, outcome, 201);
  });
}

export async function orgRoutes(app: FastifyInstance, deps: OrgRoutesDeps): Promise<void> {
  const { db } = deps;
  app.get('', { schema: DOCS.list, preHandler: deps.bearer }, async function listOrgs(request) {
    return { orgs: await orgs.organizationsOf(db, currentUser(request).id) };
  });

  app.get('/:id', { schema: DOCS.read, preHandler: deps.bearer }, async function readOrg(request, reply) {
    const id = pathId(request, 'id');
    return answer(reply, await orgRead(db, currentUser(request).id, id, orgs.ORG_ROLES, async (role) => {
      const org = (await orgs.findOrganization(db, id!))!;
      return { ...shown(org), ...(MANAGERS.includes(role) ? { members: await orgs.membersOf(db, org.id) } : {}) };
    }));
  });

  app.patch('/:id', { schema: DOCS.rename, preHandler: deps.bearer }, async function renameOrg(request, reply) {
    const id = pathId(request, 'id');
    if (id === undefined) return sendError(reply, 'orgNotFound');
    return answer(reply, await orgChange(deps, actorOf(request), id, async ({ tx, org, role, record }) => {
      requireRole(role, MANAGERS);
      const name = requiredOrgName(request.body);
      const renamed = (await orgs.renameOrganization(tx, org.id, name))!;
      if (name !== org.name) await record('org.updated', { name });
      return shown(renamed);
    }));
  });

  app.delete('/:id', { schema: DOCS.remove, preHandler: [...deps.bearer, deps.factor] }, async function deleteOrg(request, reply) {
    const id = pathId(request, 'id');
    if (id === undefined) return sendError(reply, 'orgNotFound');
    const outcome = await orgChange(deps, actorOf(request), id, async ({ tx, org, role, record }) => {
      requireRole(role, OWNERS);
      // A paying organization stops being billed first: its subscriptions end with the period paid.
      if (deps.cancelSubscriptions && !(await deps.cancelSubscriptions({ type: 'org', id: org.id }))) refuse('paymentUnavailable');
      // Its keys revoked first: the revocation triggers tell every instance's cache (migration 025).
      const keys = await orgs.revokeOrganizationKeys(tx, org.id);
      await record('org.deleted', { name: org.name, keys_revoked: keys });
      await orgs.deleteOrganization(tx, org.id);
      return org.id;
    });
    if ('refused' in outcome) return answer(reply, outcome);
    request.log.info({ userId: currentUser(request).id, orgId: outcome.ok }, 'organization deleted');
    return successBody(reply, 'orgDeleted');
  });
}
