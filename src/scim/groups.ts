// /scim/v2/orgs/{id}/Groups (RFC 7644 §3, CONTRACT §31): a directory's groups with displayName,
// externalId and members; list (filter displayName eq "…"), create, get, replace, PATCH members
// add, remove and replace (and displayName, externalId), delete. A group's name is a value of the
// organization's roleMapping: whenever a user's groups change, their role is mapped again
// (provisioning.ts's remapRole: never an owner's, never to owner, kept when no value maps).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Database, Queryable } from '../storage/database/index.js';
import { lockOrganization, scimDirectory as directory } from '../storage/orgs/index.js';
import { callerOf, type ScimCaller } from './access.js';
import { baseOf } from './discoveryRoutes.js';
import { listOf } from './discovery.js';
import { invalidValue, notFound, scimError, sendScim } from './errors.js';
import { parseFilter } from './filter.js';
import { groupFromResource, groupPatch, type GroupFields, type MemberChange } from './groupModel.js';
import { directoryChange, remapRole, type ProvisioningDeps } from './provisioning.js';
import { excludesMembers, groupResource, pageOf, queryValue } from './resources.js';

export interface GroupRouteDeps extends ProvisioningDeps {
  db: Database;
}

const tags = ['scim'];
const security = [{ scimToken: [] }];
const anyObject = { type: 'object', additionalProperties: true };
const doc = (summary: string, status = 200) => ({ tags, security, summary, response: { [status]: anyObject } });
const DOCS = {
  list: doc('SCIM: the organization\'s groups; filter displayName eq "…", startIndex, count ≤ 100, excludedAttributes=members'),
  create: doc('SCIM: create a group; its members\' roles follow roleMapping', 201),
  read: doc('SCIM: one group'),
  replace: doc('SCIM: replace a group (its name and members)'),
  patch: doc('SCIM: PATCH members add, remove, replace; displayName, externalId'),
  remove: doc('SCIM: delete a group; its members\' roles follow roleMapping', 204),
};

interface GroupWriters {
  tx: Queryable;
  now: Date;
  caller: ScimCaller;
  deps: GroupRouteDeps;
}

/** The member ids, each a user of this organization's directory; another is 400 invalidValue (never another organization's). */
async function ownMembers(w: GroupWriters, ids: readonly string[]): Promise<string[]> {
  const unique = [...new Set(ids)];
  const found = new Set(await directory.existingUsers(w.tx, w.caller.orgId, unique));
  const unknown = unique.filter((id) => !found.has(id));
  if (unknown.length) invalidValue(`Not users of this organization: ${unknown.slice(0, 5).join(', ')}`);
  return unique;
}

async function applyMembers(w: GroupWriters, groupId: string, change: MemberChange): Promise<string[]> {
  if ('add' in change) return directory.addGroupMembers(w.tx, groupId, await ownMembers(w, change.add));
  if ('remove' in change) return directory.removeGroupMembers(w.tx, groupId, change.remove);
  const removed = await directory.removeGroupMembers(w.tx, groupId, 'all');
  return [...removed, ...(await directory.addGroupMembers(w.tx, groupId, await ownMembers(w, change.replace)))];
}

/** The roles of the users whose groups changed, mapped again. */
async function remapUsers(w: GroupWriters, userIds: Iterable<string>): Promise<void> {
  for (const id of new Set(userIds)) {
    const row = await directory.findScimUser(w.tx, w.caller.orgId, id);
    if (row) await remapRole(w, row);
  }
}

async function renameGroup(w: GroupWriters, row: directory.ScimGroupRow, fields: Partial<GroupFields>): Promise<directory.ScimGroupRow> {
  if (fields.displayName === undefined && fields.externalId === undefined) return row;
  const next = { ...row, display_name: fields.displayName ?? row.display_name, external_id: fields.externalId === undefined ? row.external_id : fields.externalId };
  return (await directory.updateScimGroup(w.tx, next, w.now)) ?? scimError(409, 'Another group of the organization has this displayName', 'uniqueness');
}

/** A change of group `id` under the organization's lock (one order with every membership change); the group after it. */
async function changeGroup(deps: GroupRouteDeps, caller: ScimCaller, id: string, change: (w: GroupWriters, row: directory.ScimGroupRow) => Promise<directory.ScimGroupRow | undefined>) {
  return directoryChange(deps, caller, async (tx) => {
    if (!(await lockOrganization(tx, caller.orgId))) notFound('Organization');
    const row = (await directory.findScimGroup(tx, caller.orgId, id, true)) ?? notFound('Group');
    return change({ tx, now: deps.clock(), caller, deps }, row);
  });
}

async function shown(db: Database, request: FastifyRequest, row: directory.ScimGroupRow, withMembers = true) {
  return groupResource(baseOf(request), row, withMembers ? await directory.groupMembers(db, row.id) : undefined);
}

async function createGroup(deps: GroupRouteDeps, request: FastifyRequest, reply: FastifyReply) {
  const caller = callerOf(request);
  const wanted = groupFromResource(request.body);
  const row = await directoryChange(deps, caller, async (tx) => {
    if (!(await lockOrganization(tx, caller.orgId))) notFound('Organization');
    const w = { tx, now: deps.clock(), caller, deps };
    const created = (await directory.insertScimGroup(tx, caller.orgId, { display_name: wanted.displayName, external_id: wanted.externalId }, w.now))
      ?? scimError(409, 'A group with this displayName exists in the organization', 'uniqueness');
    await remapUsers(w, await directory.addGroupMembers(tx, created.id, await ownMembers(w, wanted.members)));
    return created;
  });
  const body = await shown(deps.db, request, row);
  reply.header('location', body.meta.location);
  return sendScim(reply, body, 201);
}

async function listGroups(deps: GroupRouteDeps, request: FastifyRequest, reply: FastifyReply) {
  const page = pageOf(request.query as Record<string, unknown>);
  const filterText = queryValue(request, 'filter');
  const name = filterText === undefined ? undefined : parseFilter(filterText, ['displayName']).value;
  const { total, rows } = await directory.listScimGroups(deps.db, callerOf(request).orgId, name, page);
  const withMembers = !excludesMembers(request);
  return sendScim(reply, listOf(await Promise.all(rows.map((r) => shown(deps.db, request, r, withMembers))), page.startIndex, total));
}

export async function groupRoutes(app: FastifyInstance, deps: GroupRouteDeps): Promise<void> {
  const idOf = (request: FastifyRequest) => (request.params as { id: string }).id;
  app.get('/Groups', { schema: DOCS.list }, (request, reply) => listGroups(deps, request, reply));
  app.post('/Groups', { schema: DOCS.create }, (request, reply) => createGroup(deps, request, reply));
  app.get('/Groups/:id', { schema: DOCS.read }, async (request, reply) => {
    const row = (await directory.findScimGroup(deps.db, callerOf(request).orgId, idOf(request))) ?? notFound('Group');
    return sendScim(reply, await shown(deps.db, request, row, !excludesMembers(request)));
  });
  app.put('/Groups/:id', { schema: DOCS.replace }, async (request, reply) => {
    const wanted = groupFromResource(request.body);
    const row = await changeGroup(deps, callerOf(request), idOf(request), async (w, stored) => {
      const renamed = await renameGroup(w, stored, wanted);
      // A replace removes every member and adds the new ones: each member, old and new, is touched,
      // so a new name's mapping reaches them all.
      await remapUsers(w, await applyMembers(w, stored.id, { replace: wanted.members }));
      return renamed;
    });
    return sendScim(reply, await shown(deps.db, request, row!));
  });
  app.patch('/Groups/:id', { schema: DOCS.patch }, async (request, reply) => {
    const patch = groupPatch(request.body);
    const row = await changeGroup(deps, callerOf(request), idOf(request), async (w, stored) => {
      const renamed = await renameGroup(w, stored, patch.fields);
      const touched: string[] = renamed === stored ? [] : (await directory.groupMembers(w.tx, stored.id)).map((m) => m.id);
      for (const change of patch.members) touched.push(...(await applyMembers(w, stored.id, change)));
      await remapUsers(w, touched);
      return renamed;
    });
    return sendScim(reply, await shown(deps.db, request, row!));
  });
  app.delete('/Groups/:id', { schema: DOCS.remove }, async (request, reply) => {
    await changeGroup(deps, callerOf(request), idOf(request), async (w, row) => {
      const members = (await directory.groupMembers(w.tx, row.id)).map((m) => m.id);
      await directory.deleteScimGroup(w.tx, w.caller.orgId, row.id);
      await remapUsers(w, members);
      return undefined;
    });
    return reply.code(204).send();
  });
}
