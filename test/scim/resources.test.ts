// How the directory's users and groups are shown (RFC 7643 §4.1, §4.2) and how a list's page and
// query are read (RFC 7644 §3.4.2), as pure functions (src/scim/resources.ts): what is absent is
// left out, never sent as null; every reference is under the organization's base; startIndex,
// count, a repeated parameter and excludedAttributes read as Okta and Entra ID send them.
import type { FastifyRequest } from 'fastify';
import { describe, expect, it } from 'vitest';
import { excludesMembers, groupResource, pageOf, queryValue, userResource } from '../../src/scim/resources.js';
import type { ScimGroupRow, ScimUserRow } from '../../src/storage/orgs/index.js';
import { scimOutcome } from './outcome.js';

const BASE = '/scim/v2/orgs/7';
const [CREATED, UPDATED] = [new Date('2026-01-02T03:04:05.678Z'), new Date('2026-02-03T04:05:06.789Z')];
const USER: ScimUserRow = {
  id: 'u1', org_id: 7, user_id: 42, user_name: 'ada@corp.example', external_id: null, name: {}, display_name: null,
  emails: [{ value: 'ada@corp.example', primary: true }], active: true, deactivated_account: false, created_at: CREATED, updated_at: UPDATED,
};
const GROUP: ScimGroupRow = { id: 'g1', org_id: 7, display_name: 'Engineering', external_id: null, created_at: CREATED, updated_at: UPDATED };
const request = (query: Record<string, unknown>) => ({ query }) as unknown as FastifyRequest;

describe('SCIM resources', () => {
  it('a user with nothing optional: no externalId, name or displayName keys; its groups referenced under the base', () => {
    expect(userResource(BASE, USER, [{ id: 'g1', display_name: 'Engineering' }])).toEqual({
      schemas: ['urn:ietf:params:scim:schemas:core:2.0:User'], id: 'u1', userName: 'ada@corp.example',
      emails: [{ value: 'ada@corp.example', primary: true }], active: true,
      groups: [{ value: 'g1', display: 'Engineering', $ref: `${BASE}/Groups/g1` }],
      meta: { resourceType: 'User', created: '2026-01-02T03:04:05.678Z', lastModified: '2026-02-03T04:05:06.789Z', location: `${BASE}/Users/u1` },
    });
  });

  it('a user with every optional attribute, an empty externalId and displayName kept as given', () => {
    const full = userResource(BASE, { ...USER, external_id: '00u1', name: { givenName: 'Ada' }, display_name: 'Ada L', active: false }, []);
    expect(full).toMatchObject({ externalId: '00u1', name: { givenName: 'Ada' }, displayName: 'Ada L', active: false, groups: [] });
    expect(userResource(BASE, { ...USER, external_id: '', display_name: '' }, [])).toMatchObject({ externalId: '', displayName: '' });
  });

  it('a group: its members when asked for (referenced under the base), none listed when left out; externalId only when it has one', () => {
    expect(groupResource(BASE, GROUP, [{ id: 'u1', user_name: 'ada@corp.example' }])).toEqual({
      schemas: ['urn:ietf:params:scim:schemas:core:2.0:Group'], id: 'g1', displayName: 'Engineering',
      members: [{ value: 'u1', display: 'ada@corp.example', $ref: `${BASE}/Users/u1` }],
      meta: { resourceType: 'Group', created: '2026-01-02T03:04:05.678Z', lastModified: '2026-02-03T04:05:06.789Z', location: `${BASE}/Groups/g1` },
    });
    const excluded = groupResource(BASE, { ...GROUP, external_id: 'okta-g' }, undefined);
    expect(excluded).toMatchObject({ externalId: 'okta-g' });
    expect(Object.keys(excluded)).not.toContain('members');
    expect(groupResource(BASE, GROUP, [])).toMatchObject({ members: [] });
  });
});

describe('SCIM list queries', () => {
  it('startIndex from 1 (below reads as 1), count from 0 to 100 (outside reads as its bound); both by default', () => {
    expect(pageOf({})).toEqual({ startIndex: 1, count: 100 });
    expect(pageOf({ startIndex: '5', count: '10' })).toEqual({ startIndex: 5, count: 10 });
    expect(pageOf({ startIndex: '0', count: '-3' })).toEqual({ startIndex: 1, count: 0 });
    expect(pageOf({ startIndex: '-7', count: '101' })).toEqual({ startIndex: 1, count: 100 });
    expect(pageOf({ count: '999999999' })).toEqual({ startIndex: 1, count: 100 });
  });

  it.each(['1.5', '12abc', 'abc12', '', ' 3', '1e3', '1234567890', '--1'])('a page value that is no integer (%j) is 400 invalidValue naming it', (value) => {
    expect(scimOutcome(() => pageOf({ count: value }))).toEqual({ status: 400, scimType: 'invalidValue', detail: 'count must be an integer' });
    expect(scimOutcome(() => pageOf({ startIndex: value }))).toEqual({ status: 400, scimType: 'invalidValue', detail: 'startIndex must be an integer' });
  });

  it('a parameter given twice is refused, never read as one', () => {
    expect(scimOutcome(() => pageOf({ count: ['1', '2'] }))).toMatchObject({ status: 400, detail: 'count must be an integer' });
    expect(scimOutcome(() => queryValue(request({ filter: ['userName eq "a"', 'userName eq "b"'] }), 'filter'))).toEqual(
      { status: 400, scimType: 'invalidValue', detail: 'filter is given once' });
    expect(queryValue(request({ filter: 'userName eq "a"' }), 'filter')).toBe('userName eq "a"');
    expect(queryValue(request({}), 'filter')).toBeUndefined();
  });

  it('excludedAttributes leaves members out when it names them, in any case and place of its list', () => {
    for (const value of ['members', 'Members', 'displayName, MEMBERS', ' members ']) expect(excludesMembers(request({ excludedAttributes: value })), value).toBe(true);
    for (const value of [undefined, '', 'displayName', 'members.value', 'externalId,membersX']) expect(excludesMembers(request({ excludedAttributes: value })), String(value)).toBe(false);
  });
});
