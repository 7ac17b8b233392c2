// A SCIM group's body and PATCH read at their edges (src/scim/groupModel.ts), as pure functions:
// each refusal with SCIM's status, scimType and the detail a directory's log shows.
import { describe, expect, it } from 'vitest';
import { groupFromResource, groupPatch, memberIds } from '../../src/scim/groupModel.js';
import { scimOutcome } from './outcome.js';

const op = (...operations: unknown[]) => ({ schemas: ['urn:ietf:params:scim:api:messages:2.0:PatchOp'], Operations: operations });

const invalidValue = (detail: string) => ({ status: 400, scimType: 'invalidValue', detail });
const members = (n: number) => Array.from({ length: n }, (_, i) => ({ value: `u${i}` }));

describe('a SCIM group as POST and PUT send it', () => {
  it('displayName trimmed and required; externalId kept or null; members by value', () => {
    expect(scimOutcome(() => groupFromResource({ displayName: '  Eng  ', externalId: 'g-1', members: [{ value: 'u1', display: 'Ada' }] })))
      .toEqual({ displayName: 'Eng', externalId: 'g-1', members: ['u1'] });
    expect(scimOutcome(() => groupFromResource({ displayName: 'Eng' }))).toEqual({ displayName: 'Eng', externalId: null, members: [] });
    expect(scimOutcome(() => groupFromResource({ displayName: 'Eng', members: null }))).toMatchObject({ members: [] });
    expect(scimOutcome(() => groupFromResource({ displayName: 'Eng', externalId: 5 }))).toEqual(invalidValue('externalId must be a string of at most 1024 characters'));
    for (const name of [undefined, '', '   ']) {
      const detail = name === undefined ? 'displayName must be a string of at most 1024 characters' : 'displayName is required';
      expect(scimOutcome(() => groupFromResource({ displayName: name })), String(name)).toEqual(invalidValue(detail));
    }
  });

  it('refuses a body that is no object', () => {
    for (const body of [null, [], 'Eng', 1]) {
      expect(scimOutcome(() => groupFromResource(body)), JSON.stringify(body)).toEqual({ status: 400, scimType: 'invalidSyntax', detail: 'A Group resource is a JSON object' });
    }
  });

  it('members: none for null or absent, one object alone, at most 1000 a request, each an object with a value', () => {
    expect(memberIds(undefined)).toEqual([]);
    expect(memberIds(null)).toEqual([]);
    expect(memberIds({ value: 'u1' })).toEqual(['u1']);
    expect(memberIds(members(1000))).toHaveLength(1000);
    expect(scimOutcome(() => memberIds(members(1001)))).toEqual(invalidValue('at most 1000 members per request'));
    expect(scimOutcome(() => memberIds(['u1']))).toEqual(invalidValue('each of members is an object with a value'));
    expect(scimOutcome(() => memberIds([{ value: 7 }]))).toEqual(invalidValue('members.value must be a string of at most 1024 characters'));
  });
});

describe('a SCIM group PATCH', () => {
  it('displayName replaced (trimmed) but never removed; externalId replaced or removed (null)', () => {
    expect(scimOutcome(() => groupPatch(op({ op: 'replace', path: 'displayName', value: ' Ops ' })))).toEqual({ fields: { displayName: 'Ops' }, members: [] });
    expect(scimOutcome(() => groupPatch(op({ op: 'remove', path: 'displayName' })))).toEqual({ status: 400, scimType: 'mutability', detail: 'displayName cannot be removed' });
    expect(scimOutcome(() => groupPatch(op({ op: 'replace', path: 'externalId', value: 'g-2' })))).toEqual({ fields: { externalId: 'g-2' }, members: [] });
    expect(scimOutcome(() => groupPatch(op({ op: 'remove', path: 'externalId' })))).toEqual({ fields: { externalId: null }, members: [] });
    expect(scimOutcome(() => groupPatch(op({ op: 'remove', path: 'externalId', value: 'g-2' })))).toEqual({ fields: { externalId: null }, members: [] });
    expect(scimOutcome(() => groupPatch(op({ op: 'add', path: 'externalId', value: 3 })))).toEqual(invalidValue('externalId must be a string of at most 1024 characters'));
  });

  it('id, meta and schemas are skipped, as is a path to an attribute no group has', () => {
    const body = op({ op: 'replace', path: 'id', value: 'x' }, { op: 'replace', path: 'meta', value: {} }, { op: 'add', path: 'schemas', value: [] }, { op: 'add', path: 'locale', value: 'fr' },
      { op: 'replace', path: 'meta.lastModified', value: 'x' }, { op: 'replace', path: 'id[value eq "x"]', value: 'y' },
      { op: 'replace', value: { id: 'x', displayName: 'Eng', externalId: 'e' } });
    expect(scimOutcome(() => groupPatch(body))).toEqual({ fields: { displayName: 'Eng', externalId: 'e' }, members: [] });
  });

  it('members: a filter selects by value, and only for remove; a remove with a null value removes all', () => {
    expect(scimOutcome(() => groupPatch(op({ op: 'remove', path: 'members[display eq "Ada"]' }))))
      .toEqual({ status: 400, scimType: 'invalidPath', detail: 'members are selected by value' });
    expect(scimOutcome(() => groupPatch(op({ op: 'replace', path: 'members[value eq "u1"]', value: [] }))))
      .toEqual({ status: 400, scimType: 'invalidPath', detail: 'Only remove takes a members filter' });
    expect(scimOutcome(() => groupPatch(op({ op: 'remove', path: 'members', value: null })))).toEqual({ fields: {}, members: [{ remove: 'all' }] });
    expect(scimOutcome(() => groupPatch(op({ op: 'add', path: 'members', value: { value: 'u3' } })))).toEqual({ fields: {}, members: [{ add: ['u3'] }] });
  });
});
