// /scim/v2/orgs/{id}/Users (RFC 7644 §3, CONTRACT §31): list (filter userName or externalId eq,
// startIndex/count ≤ 100), create, get, replace, PATCH, delete. A POST or PUT body and a PATCH
// applied to the stored user give one wanted state (userModel.ts); applyUser then makes the
// account and membership follow it, under the locks of provisioning.ts, so each rule is written once.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Database, Queryable } from '../storage/database/index.js';
import { scimDirectory as directory } from '../storage/orgs/index.js';
import { callerOf, type ScimCaller } from './access.js';
import { baseOf } from './discoveryRoutes.js';
import { listOf } from './discovery.js';
import { invalidValue, notFound, scimError, sendScim } from './errors.js';
import { parseFilter } from './filter.js';
import { ensureManagedAccountIn } from './managed.js';
import { directoryChange, DOMAIN_RULE, endAccess, lockFor, moveEmail, restoreAccess, type ProvisioningDeps, type ScimWriters } from './provisioning.js';
import { pageOf, queryValue, userResource } from './resources.js';
import { accountEmail, patchedUser, userFromResource, type UserState } from './userModel.js';

export interface UserRouteDeps extends ProvisioningDeps {
  db: Database;
  /** Forgets a deactivated account at once on this instance (the users trigger tells the others). */
  forgetUser: (id: number) => void;
}

const tags = ['scim'];
const security = [{ scimToken: [] }];
const anyObject = { type: 'object', additionalProperties: true };
const doc = (summary: string, status = 200) => ({ tags, security, summary, response: { [status]: anyObject } });
const DOCS = {
  list: doc('SCIM: the organization\'s users; filter userName eq "…" or externalId eq "…", startIndex, count ≤ 100'),
  create: doc('SCIM: provision a user (an email of a verified domain): links or creates the account and adds the membership', 201),
  read: doc('SCIM: one user'),
  replace: doc('SCIM: replace a user (active false ends the membership; true restores it)'),
  patch: doc('SCIM: PATCH active, name, emails, externalId, userName (ops case-insensitive, "True"/"False" read as booleans)'),
  remove: doc('SCIM: deprovision and delete the user', 204),
};

const fieldsOf = (state: UserState): directory.ScimUserFields =>
  ({ user_name: state.userName, external_id: state.externalId, name: state.name, display_name: state.displayName, emails: state.emails as unknown as directory.ScimUserRow['emails'] });

const stateOf = (row: directory.ScimUserRow): UserState =>
  ({ userName: row.user_name, externalId: row.external_id, name: row.name, displayName: row.display_name, emails: row.emails as unknown as UserState['emails'], active: row.active });

async function shown(db: Database, request: FastifyRequest, row: directory.ScimUserRow) {
  return userResource(baseOf(request), row, await directory.groupsOfUser(db, row.id));
}

const userNameTaken = async (q: Queryable, orgId: number, userName: string) =>
  (await directory.listScimUsers(q, orgId, { attribute: 'userName', value: userName }, { startIndex: 1, count: 1 })).total > 0;

/** The account and membership follow the wanted state: email, access, then the stored fields. */
async function applyUser(w: ScimWriters, row: directory.ScimUserRow, wanted: UserState): Promise<directory.ScimUserRow> {
  const email = accountEmail(wanted) ?? invalidValue(DOMAIN_RULE);
  // userName is stored lowercase (userModel.ts): another name found is another user's.
  if (wanted.userName !== row.user_name && (await userNameTaken(w.tx, w.caller.orgId, wanted.userName))) {
    scimError(409, 'Another user of the organization has this userName', 'uniqueness');
  }
  await moveEmail(w, email);
  const next: directory.ScimUserRow = { ...row, ...fieldsOf(wanted), active: wanted.active };
  if (row.active && !wanted.active) next.deactivated_account = await endAccess(w, next);
  if (!row.active && wanted.active) await restoreAccess(w, next);
  return directory.updateScimUser(w.tx, next, w.now);
}

/** Runs a change of the stored user `id` under its locks; the user after it, and whether the account was deactivated. */
async function changeUser(deps: UserRouteDeps, caller: ScimCaller, id: string, change: (w: ScimWriters, row: directory.ScimUserRow) => Promise<directory.ScimUserRow | undefined>) {
  const outcome = await directoryChange(deps, caller, async (tx, forgetKey) => {
    const found = (await directory.findScimUser(tx, caller.orgId, id)) ?? notFound('User');
    const account = await lockFor(tx, deps, caller, found.user_id);
    // Read again under the locks: a change that committed meanwhile is the one this one builds on.
    const row = (await directory.findScimUser(tx, caller.orgId, id, true)) ?? notFound('User');
    const after = await change({ tx, now: deps.clock(), caller, account, deps, forgetKey }, row);
    return { after, userId: row.user_id };
  });
  deps.forgetUser(outcome.userId);
  return outcome.after;
}

async function createUser(deps: UserRouteDeps, request: FastifyRequest, reply: FastifyReply) {
  const caller = callerOf(request);
  const wanted = userFromResource(request.body);
  const email = accountEmail(wanted) ?? invalidValue(DOMAIN_RULE);
  const row = await directoryChange(deps, caller, async (tx, forgetKey) => {
    if (await userNameTaken(tx, caller.orgId, wanted.userName)) scimError(409, 'A user with this userName exists in the organization', 'uniqueness');
    const managed = await ensureManagedAccountIn(tx, deps, {
      orgId: caller.orgId, email, allowCreate: true, groups: [], roleMapping: await deps.roleMapping(tx, caller.orgId), by: { kind: 'scim', tokenId: caller.tokenId },
    });
    if ('refused' in managed) {
      if (managed.refused === 'org_not_found') notFound('Organization');
      invalidValue(managed.refused === 'account_inactive' ? 'The account holding this email is deactivated' : DOMAIN_RULE);
    }
    const userId = (managed as Extract<typeof managed, { ok: unknown }>).ok.userId;
    const now = deps.clock();
    const created = (await directory.insertScimUser(tx, caller.orgId, userId, fieldsOf(wanted), true, now))
      ?? scimError(409, 'The account holding this email is already a user of the organization\'s directory', 'uniqueness');
    if (wanted.active) return created;
    // Provisioned inactive (Okta can): the account is linked or made, and its access ended at once.
    const account = await lockFor(tx, deps, caller, userId);
    const w = { tx, now, caller, account, deps, forgetKey };
    return directory.updateScimUser(tx, { ...created, active: false, deactivated_account: await endAccess(w, created) }, now);
  });
  deps.forgetUser(row.user_id);
  const body = await shown(deps.db, request, row);
  reply.header('location', body.meta.location);
  return sendScim(reply, body, 201);
}

async function listUsers(deps: UserRouteDeps, request: FastifyRequest, reply: FastifyReply) {
  const caller = callerOf(request);
  const page = pageOf(request.query as Record<string, unknown>);
  const filterText = queryValue(request, 'filter');
  const filter = filterText === undefined ? undefined : parseFilter(filterText, ['userName', 'externalId']) as { attribute: 'userName' | 'externalId'; value: string };
  const { total, rows } = await directory.listScimUsers(deps.db, caller.orgId, filter, page);
  return sendScim(reply, listOf(await Promise.all(rows.map((r) => shown(deps.db, request, r))), page.startIndex, total));
}

export async function userRoutes(app: FastifyInstance, deps: UserRouteDeps): Promise<void> {
  const idOf = (request: FastifyRequest) => (request.params as { id: string }).id;
  app.get('/Users', { schema: DOCS.list }, (request, reply) => listUsers(deps, request, reply));
  app.post('/Users', { schema: DOCS.create }, (request, reply) => createUser(deps, request, reply));
  app.get('/Users/:id', { schema: DOCS.read }, async (request, reply) => {
    const row = (await directory.findScimUser(deps.db, callerOf(request).orgId, idOf(request))) ?? notFound('User');
    return sendScim(reply, await shown(deps.db, request, row));
  });
  app.put('/Users/:id', { schema: DOCS.replace }, async (request, reply) => {
    const wanted = userFromResource(request.body);
    const row = await changeUser(deps, callerOf(request), idOf(request), (w, stored) => applyUser(w, stored, wanted));
    return sendScim(reply, await shown(deps.db, request, row!));
  });
  app.patch('/Users/:id', { schema: DOCS.patch }, async (request, reply) => {
    const row = await changeUser(deps, callerOf(request), idOf(request), (w, stored) => applyUser(w, stored, patchedUser(stateOf(stored), request.body)));
    return sendScim(reply, await shown(deps.db, request, row!));
  });
  app.delete('/Users/:id', { schema: DOCS.remove }, async (request, reply) => {
    await changeUser(deps, callerOf(request), idOf(request), async (w, row) => {
      if (row.active) await endAccess(w, row, true);
      await directory.deleteScimUser(w.tx, w.caller.orgId, row.id);
      return undefined;
    });
    return reply.code(204).send();
  });
}
