// scim_users, scim_groups and scim_group_members (migration 048, CONTRACT §31): what an
// organization's directory pushed. Every statement names the organization in its WHERE, so a
// SCIM request can only ever read or change its own organization's users and groups.
import type { Queryable } from '../database/db.js';

export interface ScimUserRow {
  id: string;
  org_id: number;
  user_id: number;
  user_name: string;
  external_id: string | null;
  name: Record<string, string>;
  display_name: string | null;
  emails: Array<Record<string, unknown>>;
  active: boolean;
  deactivated_account: boolean;
  created_at: Date;
  updated_at: Date;
}

export interface ScimGroupRow {
  id: string;
  org_id: number;
  display_name: string;
  external_id: string | null;
  created_at: Date;
  updated_at: Date;
}

const USER = 'id, org_id, user_id, user_name, external_id, name, display_name, emails, active, deactivated_account, created_at, updated_at';
const GROUP = 'id, org_id, display_name, external_id, created_at, updated_at';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Whether `id` can be a resource id (a uuid): anything else is answered as not found, not by Postgres' cast error. */
export const isResourceId = (id: string) => UUID.test(id);

export type ScimUserFields = Pick<ScimUserRow, 'user_name' | 'external_id' | 'name' | 'display_name' | 'emails'>;

/** A new SCIM user of the organization; undefined when its account or userName already has one there. */
export async function insertScimUser(q: Queryable, orgId: number, userId: number, fields: ScimUserFields, active: boolean, now: Date): Promise<ScimUserRow | undefined> {
  return (await q.query<ScimUserRow>(
    `INSERT INTO scim_users (org_id, user_id, user_name, external_id, name, display_name, emails, active, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) ON CONFLICT DO NOTHING RETURNING ${USER}`,
    [orgId, userId, fields.user_name, fields.external_id, JSON.stringify(fields.name), fields.display_name, JSON.stringify(fields.emails), active, now],
  ))[0];
}

export async function updateScimUser(q: Queryable, row: ScimUserRow, now: Date): Promise<ScimUserRow> {
  return (await q.query<ScimUserRow>(
    `UPDATE scim_users SET user_name = $3, external_id = $4, name = $5, display_name = $6, emails = $7, active = $8, deactivated_account = $9, updated_at = $10
      WHERE org_id = $1 AND id = $2 RETURNING ${USER}`,
    [row.org_id, row.id, row.user_name, row.external_id, JSON.stringify(row.name), row.display_name, JSON.stringify(row.emails), row.active, row.deactivated_account, now],
  ))[0]!;
}

/** The SCIM user, its row locked for the rest of the transaction when `lock`. */
export async function findScimUser(q: Queryable, orgId: number, id: string, lock = false): Promise<ScimUserRow | undefined> {
  if (!isResourceId(id)) return undefined;
  return (await q.query<ScimUserRow>(`SELECT ${USER} FROM scim_users WHERE org_id = $1 AND id = $2${lock ? ' FOR UPDATE' : ''}`, [orgId, id]))[0];
}

export async function scimUserOfAccount(q: Queryable, orgId: number, userId: number): Promise<ScimUserRow | undefined> {
  return (await q.query<ScimUserRow>(`SELECT ${USER} FROM scim_users WHERE org_id = $1 AND user_id = $2`, [orgId, userId]))[0];
}

export async function deleteScimUser(q: Queryable, orgId: number, id: string): Promise<boolean> {
  return (await q.query('DELETE FROM scim_users WHERE org_id = $1 AND id = $2 RETURNING id', [orgId, id])).length > 0;
}

export interface Page {
  /** 1-based, as SCIM counts. */
  startIndex: number;
  count: number;
}

/** The organization's users, with `userName` or `externalId` equal to a value when asked; a page and the total. */
export async function listScimUsers(
  q: Queryable, orgId: number, filter: { attribute: 'userName' | 'externalId'; value: string } | undefined, page: Page,
): Promise<{ total: number; rows: ScimUserRow[] }> {
  // userName compares case-insensitively (RFC 7643: caseExact false), stored lower-case; externalId exactly.
  const where = !filter ? '' : filter.attribute === 'userName' ? 'AND user_name = lower($2)' : 'AND external_id = $2';
  const params: unknown[] = filter ? [orgId, filter.value] : [orgId];
  const total = Number((await q.query<{ n: string }>(`SELECT count(*) AS n FROM scim_users WHERE org_id = $1 ${where}`, params))[0]!.n);
  const rows = await q.query<ScimUserRow>(
    `SELECT ${USER} FROM scim_users WHERE org_id = $1 ${where} ORDER BY created_at, id OFFSET ${page.startIndex - 1} LIMIT ${page.count}`, params,
  );
  return { total, rows };
}

export async function insertScimGroup(q: Queryable, orgId: number, fields: { display_name: string; external_id: string | null }, now: Date): Promise<ScimGroupRow | undefined> {
  return (await q.query<ScimGroupRow>(
    `INSERT INTO scim_groups (org_id, display_name, external_id, created_at, updated_at) VALUES ($1, $2, $3, $4, $4) ON CONFLICT DO NOTHING RETURNING ${GROUP}`,
    [orgId, fields.display_name, fields.external_id, now],
  ))[0];
}

/** Renames or re-keys the group; undefined when another group of the organization has that name. */
export async function updateScimGroup(q: Queryable, row: ScimGroupRow, now: Date): Promise<ScimGroupRow | undefined> {
  const clash = await q.query('SELECT 1 FROM scim_groups WHERE org_id = $1 AND lower(display_name) = lower($2) AND id <> $3', [row.org_id, row.display_name, row.id]);
  if (clash.length) return undefined;
  return (await q.query<ScimGroupRow>(
    `UPDATE scim_groups SET display_name = $3, external_id = $4, updated_at = $5 WHERE org_id = $1 AND id = $2 RETURNING ${GROUP}`,
    [row.org_id, row.id, row.display_name, row.external_id, now],
  ))[0];
}

export async function findScimGroup(q: Queryable, orgId: number, id: string, lock = false): Promise<ScimGroupRow | undefined> {
  if (!isResourceId(id)) return undefined;
  return (await q.query<ScimGroupRow>(`SELECT ${GROUP} FROM scim_groups WHERE org_id = $1 AND id = $2${lock ? ' FOR UPDATE' : ''}`, [orgId, id]))[0];
}

export async function deleteScimGroup(q: Queryable, orgId: number, id: string): Promise<boolean> {
  return (await q.query('DELETE FROM scim_groups WHERE org_id = $1 AND id = $2 RETURNING id', [orgId, id])).length > 0;
}

export async function listScimGroups(q: Queryable, orgId: number, displayName: string | undefined, page: Page): Promise<{ total: number; rows: ScimGroupRow[] }> {
  const where = displayName === undefined ? '' : 'AND lower(display_name) = lower($2)';
  const params: unknown[] = displayName === undefined ? [orgId] : [orgId, displayName];
  const total = Number((await q.query<{ n: string }>(`SELECT count(*) AS n FROM scim_groups WHERE org_id = $1 ${where}`, params))[0]!.n);
  const rows = await q.query<ScimGroupRow>(
    `SELECT ${GROUP} FROM scim_groups WHERE org_id = $1 ${where} ORDER BY created_at, id OFFSET ${page.startIndex - 1} LIMIT ${page.count}`, params,
  );
  return { total, rows };
}

/** The group's members: their SCIM ids and userNames. */
export async function groupMembers(q: Queryable, groupId: string): Promise<Array<{ id: string; user_name: string }>> {
  return q.query('SELECT u.id, u.user_name FROM scim_group_members m JOIN scim_users u ON u.id = m.scim_user_id WHERE m.group_id = $1 ORDER BY u.user_name', [groupId]);
}

/** The user's groups: ids, display names and external ids (what roleMapping reads). */
export async function groupsOfUser(q: Queryable, scimUserId: string): Promise<Array<{ id: string; display_name: string; external_id: string | null }>> {
  return q.query('SELECT g.id, g.display_name, g.external_id FROM scim_group_members m JOIN scim_groups g ON g.id = m.group_id WHERE m.scim_user_id = $1 ORDER BY g.display_name', [scimUserId]);
}

/** Which of `ids` are SCIM users of the organization. */
export async function existingUsers(q: Queryable, orgId: number, ids: readonly string[]): Promise<string[]> {
  const valid = ids.filter(isResourceId);
  if (!valid.length) return [];
  return (await q.query<{ id: string }>('SELECT id FROM scim_users WHERE org_id = $1 AND id = ANY($2::uuid[])', [orgId, valid])).map((r) => r.id);
}

export async function addGroupMembers(q: Queryable, groupId: string, userIds: readonly string[]): Promise<string[]> {
  if (!userIds.length) return [];
  return (await q.query<{ scim_user_id: string }>(
    'INSERT INTO scim_group_members (group_id, scim_user_id) SELECT $1, unnest($2::uuid[]) ON CONFLICT DO NOTHING RETURNING scim_user_id', [groupId, userIds],
  )).map((r) => r.scim_user_id);
}

export async function removeGroupMembers(q: Queryable, groupId: string, userIds: readonly string[] | 'all'): Promise<string[]> {
  const rows = userIds === 'all'
    ? await q.query<{ scim_user_id: string }>('DELETE FROM scim_group_members WHERE group_id = $1 RETURNING scim_user_id', [groupId])
    : await q.query<{ scim_user_id: string }>(
      'DELETE FROM scim_group_members WHERE group_id = $1 AND scim_user_id = ANY($2::uuid[]) RETURNING scim_user_id', [groupId, userIds.filter(isResourceId)],
    );
  return rows.map((r) => r.scim_user_id);
}

/**
 * Moves an account the organization manages to another address (CONTRACT §31: SCIM renames only
 * the accounts its organization's SCIM or SAML made); false when another account holds it.
 */
export async function renameManagedAccount(tx: Queryable, userId: number, email: string, now: Date): Promise<boolean> {
  return (await tx.query(
    'UPDATE users SET email = $2, email_verified_at = $3 WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM users WHERE email = $2 AND id <> $1) RETURNING id',
    [userId, email, now],
  )).length > 0;
}

/** How many organizations the account belongs to. */
export async function membershipCount(q: Queryable, userId: number): Promise<number> {
  return Number((await q.query<{ n: string }>('SELECT count(*) AS n FROM memberships WHERE user_id = $1', [userId]))[0]!.n);
}
