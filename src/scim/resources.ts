// How the directory's users and groups are shown (RFC 7643 §4.1, §4.2), and how a list's page is
// read (RFC 7644 §3.4.2.4: startIndex from 1, count at most 100 here).
import type { FastifyRequest } from 'fastify';
import type { ScimGroupRow, ScimUserRow, Page } from '../storage/orgs/index.js';
import { MAX_RESULTS, SCHEMAS } from './discovery.js';
import { invalidValue } from './errors.js';

const meta = (resourceType: 'User' | 'Group', row: { created_at: Date; updated_at: Date }, location: string) =>
  ({ resourceType, created: row.created_at.toISOString(), lastModified: row.updated_at.toISOString(), location });

export function userResource(base: string, row: ScimUserRow, groups: ReadonlyArray<{ id: string; display_name: string }>) {
  return {
    schemas: [SCHEMAS.user],
    id: row.id,
    ...(row.external_id !== null ? { externalId: row.external_id } : {}),
    userName: row.user_name,
    ...(Object.keys(row.name).length ? { name: row.name } : {}),
    ...(row.display_name !== null ? { displayName: row.display_name } : {}),
    emails: row.emails,
    active: row.active,
    groups: groups.map((g) => ({ value: g.id, display: g.display_name, $ref: `${base}/Groups/${g.id}` })),
    meta: meta('User', row, `${base}/Users/${row.id}`),
  };
}

export function groupResource(base: string, row: ScimGroupRow, members: ReadonlyArray<{ id: string; user_name: string }> | undefined) {
  return {
    schemas: [SCHEMAS.group],
    id: row.id,
    displayName: row.display_name,
    ...(row.external_id !== null ? { externalId: row.external_id } : {}),
    ...(members ? { members: members.map((m) => ({ value: m.id, display: m.user_name, $ref: `${base}/Users/${m.id}` })) } : {}),
    meta: meta('Group', row, `${base}/Groups/${row.id}`),
  };
}

const INTEGER = /^-?\d{1,9}$/;

/** startIndex (below 1 reads as 1) and count (below 0 as 0, above 100 as 100); anything but an integer is 400 invalidValue. */
export function pageOf(query: Record<string, unknown>): Page {
  const read = (name: string, fallback: number) => {
    const raw = query[name];
    if (raw === undefined) return fallback;
    return typeof raw === 'string' && INTEGER.test(raw) ? Number(raw) : invalidValue(`${name} must be an integer`);
  };
  return { startIndex: Math.max(1, read('startIndex', 1)), count: Math.min(MAX_RESULTS, Math.max(0, read('count', MAX_RESULTS))) };
}

/** The query's one value of `name` (a repeated parameter is refused: two filters must not be read as one). */
export function queryValue(request: FastifyRequest, name: string): string | undefined {
  const value = (request.query as Record<string, unknown>)[name];
  if (value === undefined || typeof value === 'string') return value;
  return invalidValue(`${name} is given once`);
}

/** Whether the list asked to leave members out (Entra ID: `excludedAttributes=members`). */
export function excludesMembers(request: FastifyRequest): boolean {
  const excluded = queryValue(request, 'excludedAttributes');
  return excluded !== undefined && excluded.split(',').some((a) => a.trim().toLowerCase() === 'members');
}
