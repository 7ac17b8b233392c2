// A SCIM group as the directory states it (RFC 7643 §4.2): displayName, externalId, members (the
// SCIM ids of users). A PATCH is read into a list of changes: the group's own fields, and member
// ids added, removed or replaced, in Okta's forms (`members[value eq "…"]`) and Entra ID's
// (`Remove` with a `members` path and a value list) alike.
import { invalidValue, scimError } from './errors.js';
import { parsePatchPath } from './filter.js';
import { expanded, isObject, operations, optionalText, text, type Operation } from './values.js';

export interface GroupFields {
  displayName: string;
  externalId: string | null;
}

export type MemberChange = { add: string[] } | { remove: string[] | 'all' } | { replace: string[] };

export interface GroupPatch {
  fields: Partial<GroupFields>;
  members: MemberChange[];
}

// What a PATCH may change; any other path (id, meta, schemas, what a group does not keep) is ignored.
const ATTRIBUTES = ['displayName', 'externalId', 'members'];
const MAX_MEMBERS = 1000;

function displayName(value: unknown): string {
  const name = text(value, 'displayName').trim();
  return name || invalidValue('displayName is required');
}

/** Member ids of a `members` value: [{value: id}, …] (or one such object). */
export function memberIds(value: unknown): string[] {
  if (value === null || value === undefined) return [];
  const list = Array.isArray(value) ? value : [value];
  if (list.length > MAX_MEMBERS) return invalidValue(`at most ${MAX_MEMBERS} members per request`);
  return list.map((m) => (isObject(m) ? text(m.value, 'members.value') : invalidValue('each of members is an object with a value')));
}

/** A POST or PUT body. */
export function groupFromResource(body: unknown): GroupFields & { members: string[] } {
  if (!isObject(body)) return scimError(400, 'A Group resource is a JSON object', 'invalidSyntax');
  return { displayName: displayName(body.displayName), externalId: optionalText(body.externalId, 'externalId'), members: memberIds(body.members) };
}

function memberChange(o: Operation, filterValue: string | undefined): MemberChange {
  if (filterValue !== undefined) {
    if (o.op !== 'remove') return scimError(400, 'Only remove takes a members filter', 'invalidPath');
    return { remove: [filterValue] };
  }
  if (o.op === 'add') return { add: memberIds(o.value) };
  if (o.op === 'replace') return { replace: memberIds(o.value) };
  // Entra ID names the members to remove in the value; without one, all go (RFC 7644 §3.5.2.2).
  // (operations() reads a null value as none.)
  return { remove: o.value === undefined ? 'all' : memberIds(o.value) };
}

/** A PATCH body read into changes, in order. */
export function groupPatch(body: unknown): GroupPatch {
  const patch: GroupPatch = { fields: {}, members: [] };
  for (const o of expanded(operations(body))) {
    const path = parsePatchPath(o.path!, ATTRIBUTES, ['value', 'display']);
    if (!path) continue;
    if (path.attribute === 'members') {
      if (path.filter && path.filter.attribute !== 'value') scimError(400, 'members are selected by value', 'invalidPath');
      patch.members.push(memberChange(o, path.filter?.value));
    } else if (path.attribute === 'displayName') {
      patch.fields.displayName = o.op === 'remove' ? scimError(400, 'displayName cannot be removed', 'mutability') : displayName(o.value);
    } else {
      patch.fields.externalId = o.op === 'remove' ? null : optionalText(o.value, 'externalId');
    }
  }
  return patch;
}
