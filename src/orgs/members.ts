// An organization's members (CONTRACT §22): PUT changes a role, DELETE removes a member (or lets a
// member leave). Only an owner grants or takes `owner`; an organization always keeps one owner,
// counted under its row lock (change.ts): two owners demoting each other at once, on two
// instances, leave one. A member removed loses the organization's keys they made.
import type { FastifyInstance } from 'fastify';
import { sendError, successBody } from '../errors/index.js';
import { revokeMemberKeys } from '../keys/index.js';
import { bearerOnly, errors, message } from '../openapi.js';
import { organizations as orgs } from '../storage/orgs/index.js';
import { orgChange, refuse, requireRole, type OrgChangeDeps, type OrgWriters } from './change.js';
import { actorOf, answer, DATE, ids, INT, MANAGERS, object, OWNERS, orgRole, pathId, ROLE, STR, TAGS } from './common.js';
import type { OrgRoutesDeps } from './orgs.js';
import type { IdentityCache } from '../storage/feed/index.js';

export type MemberDeps = Pick<OrgRoutesDeps, 'bearer'> & OrgChangeDeps & { identities: Pick<IdentityCache, 'forgetKey'> };

const params = ids('id', 'user_id');
const tags = TAGS;
export const DOCS = {
  setRole: {
    tags, summary: 'Change a member\'s role (owner, admin); only an owner grants or takes owner; the last owner stays one', security: bearerOnly, params,
    body: object({ role: ROLE }, ['role']),
    response: {
      200: object({ user_id: INT, email: STR, role: ROLE, joined_at: DATE }),
      ...errors('badRequest', 'orgNotFound', 'memberNotFound', 'roleInsufficient', 'lastOwner', 'apiKeyNotAccepted', 'tokenInvalid'),
    },
  },
  remove: {
    tags, summary: 'Remove a member (owner, admin), or leave (any member, oneself); the last owner cannot leave; their organization keys are revoked',
    security: bearerOnly, params,
    response: { 200: message, ...errors('orgNotFound', 'memberNotFound', 'roleInsufficient', 'lastOwner', 'apiKeyNotAccepted', 'tokenInvalid') },
  },
};

/** The target member's role, read under the organization's lock; refused when they are none. */
async function targetRole(w: OrgWriters, userId: number | undefined): Promise<{ userId: number; role: orgs.OrgRole }> {
  const role = userId === undefined ? undefined : await orgs.roleOf(w.tx, w.org.id, userId);
  return role ? { userId: userId!, role } : refuse('memberNotFound');
}

/** Refuses to leave the organization without an owner when `member`, an owner, stops being one. */
async function keepAnOwner(w: OrgWriters, member: { role: orgs.OrgRole }): Promise<void> {
  if (member.role === 'owner' && (await orgs.ownerCount(w.tx, w.org.id)) <= 1) refuse('lastOwner');
}

export async function memberRoutes(app: FastifyInstance, deps: MemberDeps): Promise<void> {
  app.put('/:id/members/:user_id', { schema: DOCS.setRole, preHandler: deps.bearer }, async function setRole(request, reply) {
    const id = pathId(request, 'id');
    if (id === undefined) return sendError(reply, 'orgNotFound');
    return answer(reply, await orgChange(deps, actorOf(request), id, async (w) => {
      const mine = requireRole(w.role, MANAGERS);
      const role = orgRole(request.body) ?? refuse('badRequest');
      const target = await targetRole(w, pathId(request, 'user_id'));
      if (role === 'owner' || target.role === 'owner') requireRole(mine, OWNERS);
      if (role !== 'owner') await keepAnOwner(w, target);
      if (role !== target.role) {
        await orgs.setRole(w.tx, w.org.id, target.userId, role);
        await w.record('org.role_changed', { member_id: target.userId, from: target.role, to: role });
      }
      return (await orgs.membersOf(w.tx, w.org.id)).find((m) => m.user_id === target.userId);
    }));
  });

  app.delete('/:id/members/:user_id', { schema: DOCS.remove, preHandler: deps.bearer }, async function removeMember(request, reply) {
    const id = pathId(request, 'id');
    if (id === undefined) return sendError(reply, 'orgNotFound');
    const outcome = await orgChange(deps, actorOf(request), id, async (w) => {
      const userId = pathId(request, 'user_id');
      const leaving = userId === w.user.id;
      // Any member may leave; removing someone else takes an owner or admin, and an owner to remove an owner.
      const mine = leaving ? requireRole(w.role, orgs.ORG_ROLES) : requireRole(w.role, MANAGERS);
      const target = await targetRole(w, userId);
      if (target.role === 'owner') requireRole(mine, OWNERS);
      await keepAnOwner(w, target);
      await orgs.removeMember(w.tx, w.org.id, target.userId);
      // CONTRACT §22: each key the member made goes with the membership, the system's doing.
      const keys = await revokeMemberKeys(deps, { tx: w.tx, orgId: w.org.id }, target.userId);
      await w.record('org.member_removed', { member_id: target.userId, left: leaving, keys_revoked: keys.length });
      return keys;
    });
    if ('refused' in outcome) return answer(reply, outcome);
    // Refused here from the next request on, not once this instance hears the rows' NOTIFY.
    for (const { hash } of outcome.ok) deps.identities.forgetKey(hash);
    return successBody(reply, 'memberRemoved');
  });
}
