// The SCIM filter and PATCH path grammars (src/scim/filter.ts), and PATCH bodies read into users and
// groups (userModel.ts, groupModel.ts), as pure functions: the forms Okta and Entra ID send are read,
// anything else is refused with SCIM's scimType (never thrown as another error: a 5xx), and no
// input reads as a filter on another attribute than the ones allowed.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ScimError } from '../../src/scim/errors.js';
import { parseFilter, parsePatchPath } from '../../src/scim/filter.js';
import { groupPatch } from '../../src/scim/groupModel.js';
import { patchedUser, type UserState } from '../../src/scim/userModel.js';

const USER: UserState = {
  userName: 'ada@corp.example', externalId: 'e1', name: { givenName: 'Ada' }, displayName: null, emails: [{ value: 'ada@corp.example', type: 'work', primary: true }], active: true,
};
const op = (...operations: unknown[]) => ({ schemas: ['urn:ietf:params:scim:api:messages:2.0:PatchOp'], Operations: operations });

/** What a call throws: the SCIM error's status and scimType, or 'ok'. */
function outcome(fn: () => unknown): string {
  try {
    fn();
    return 'ok';
  } catch (err) {
    if (err instanceof ScimError) return `${err.status} ${err.scimType ?? ''}`.trim();
    throw err;
  }
}

describe('SCIM filters', () => {
  it('reads `attr eq "value"` with any case of the name and of eq, the core schema URN, and JSON escapes', () => {
    expect(parseFilter('userName eq "ada@corp.example"', ['userName', 'externalId'])).toEqual({ attribute: 'userName', value: 'ada@corp.example' });
    expect(parseFilter('USERNAME EQ "a\\"b"', ['userName'])).toEqual({ attribute: 'userName', value: 'a"b' });
    expect(parseFilter('urn:ietf:params:scim:schemas:core:2.0:User:externalId eq "00u1"', ['userName', 'externalId'])).toEqual({ attribute: 'externalId', value: '00u1' });
    expect(parseFilter('displayName eq "Engineering"', ['displayName'])).toEqual({ attribute: 'displayName', value: 'Engineering' });
  });

  it.each([
    'userName co "ada"', 'userName eq "a" or userName eq "b"', 'userName eq "a" and externalId eq "b"', 'emails.value eq "a@b"', 'userName pr', 'userName eq ada',
    'userName eq "unterminated', '', 'id eq "x"', 'userName eq "a")', 'meta.lastModified gt "2011-05-13T04:42:34Z"', 'userName eq 1', 'userName eq true',
  ])('refuses %j as invalidFilter', (filter) => {
    expect(outcome(() => parseFilter(filter, ['userName', 'externalId']))).toBe('400 invalidFilter');
  });

  it('property: any text is either a filter on an allowed attribute with a string value, or 400 invalidFilter; never another error', () => {
    const pieces = fc.constantFrom(
      'userName', 'externalId', 'displayName', 'id', 'emails.value', ' eq ', ' EQ ', ' co ', ' and ', ' or ', '"', '\\"', '\\', '(', ')', '[', ']', 'a', '@', ' ', '\u0000', 'é',
    );
    const text = fc.oneof(fc.string(), fc.array(pieces, { maxLength: 12 }).map((p) => p.join('')));
    fc.assert(fc.property(text, (filter) => {
      try {
        const read = parseFilter(filter, ['userName', 'externalId']);
        expect(['userName', 'externalId']).toContain(read.attribute);
        expect(typeof read.value).toBe('string');
      } catch (err) {
        expect(err).toBeInstanceOf(ScimError);
        expect(err).toMatchObject({ status: 400, scimType: 'invalidFilter' });
      }
    }), { numRuns: 2000 });
  });
});

/** The detail of the SCIM error a call throws. */
function detail(fn: () => unknown): string | undefined {
  try {
    fn();
    return undefined;
  } catch (err) {
    return (err as ScimError).detail;
  }
}

describe('SCIM grammars at their edges', () => {
  const USERS = ['userName', 'externalId'];
  const PATHS = ['emails', 'name', 'active'];
  const SUBS = ['value', 'type', 'givenName'];

  it('a filter: spaces of any length around eq; a bad JSON escape, a URN only as a prefix; at most 1024 characters; the detail names the form', () => {
    expect(parseFilter('userName  eq   "a"', USERS)).toEqual({ attribute: 'userName', value: 'a' });
    expect(outcome(() => parseFilter('userName eq "\\x"', USERS))).toBe('400 invalidFilter');
    expect(outcome(() => parseFilter('userNameurn:ietf:params:scim:schemas:core:2.0:User: eq "a"', USERS))).toBe('400 invalidFilter');
    const at = (length: number) => `userName eq "${'a'.repeat(length - 'userName eq ""'.length)}"`;
    expect(parseFilter(at(1024), USERS).value).toHaveLength(1024 - 14);
    expect(outcome(() => parseFilter(at(1025), USERS))).toBe('400 invalidFilter');
    expect(detail(() => parseFilter('userName co "a"', USERS))).toBe('Only filters of the form <userName|externalId> eq "<value>" are supported');
  });

  it('a path: trimmed, at most 1024 characters, names of letters, digits, $, - and _ only; a dotted name takes no filter nor sub-attribute', () => {
    expect(parsePatchPath('  active ', PATHS, SUBS)).toEqual({ attribute: 'active' });
    expect(parsePatchPath(`${' '.repeat(1018)}active`, PATHS, SUBS)).toEqual({ attribute: 'active' });
    expect(outcome(() => parsePatchPath(`${' '.repeat(1019)}active`, PATHS, SUBS))).toBe('400 invalidPath');
    const refused = [
      '-active', 'a:b', 'myurn:x', 'urn:ietf:params:scim:schemas:core:2.0:User:-x', 'name.1x', 'emails.value[type eq "work"]', 'name.givenName.value', 'emails[type eq "work"].nope',
      // Refused as paths no grammar reads, even of an attribute the gateway does not keep.
      'title.1x', 'title.a[type eq "x"]', 'title.a.b',
    ];
    for (const bad of refused) {
      expect(outcome(() => parsePatchPath(bad, PATHS, SUBS)), bad).toBe('400 invalidPath');
    }
    // The detail quotes the path, cut at 100 characters.
    expect(detail(() => parsePatchPath(`a:${'b'.repeat(200)}`, PATHS, SUBS))).toBe(`Unsupported PATCH path: a:${'b'.repeat(98)}`);
  });
});

describe('SCIM PATCH paths', () => {
  const ALLOWED = ['emails', 'name', 'members', 'active'];
  const SUBS = ['value', 'type', 'givenName'];
  it('reads attributes, sub-attributes, value filters and filters with a sub-attribute; skips what is not kept', () => {
    expect(parsePatchPath('active', ALLOWED, SUBS)).toEqual({ attribute: 'active' });
    expect(parsePatchPath('name.givenName', ALLOWED, SUBS)).toEqual({ attribute: 'name', sub: 'givenName' });
    expect(parsePatchPath('emails[type eq "work"].value', ALLOWED, SUBS)).toEqual({ attribute: 'emails', filter: { attribute: 'type', value: 'work' }, sub: 'value' });
    expect(parsePatchPath('members[value eq "abc"]', ALLOWED, SUBS)).toEqual({ attribute: 'members', filter: { attribute: 'value', value: 'abc' } });
    expect(parsePatchPath('urn:ietf:params:scim:schemas:core:2.0:User:name.givenName', ALLOWED, SUBS)).toEqual({ attribute: 'name', sub: 'givenName' });
    expect(parsePatchPath('urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:employeeNumber', ALLOWED, SUBS)).toBeUndefined();
    expect(parsePatchPath('title', ALLOWED, SUBS)).toBeUndefined();
  });

  it('property: any path is read, skipped, or 400 invalidPath; never another error', () => {
    const pieces = fc.constantFrom('emails', 'members', 'name', 'active', '.', '[', ']', 'value', 'type', ' eq ', '"work"', '"', 'urn:ietf:params:scim:schemas:core:2.0:User:', '$', '-', ' ');
    const text = fc.oneof(fc.string(), fc.array(pieces, { maxLength: 10 }).map((p) => p.join('')));
    fc.assert(fc.property(text, (path) => {
      try {
        const read = parsePatchPath(path, ALLOWED, SUBS);
        if (read) expect(ALLOWED).toContain(read.attribute);
      } catch (err) {
        expect(err).toMatchObject({ status: 400, scimType: 'invalidPath' });
      }
    }), { numRuns: 2000 });
  });
});

describe('PATCH bodies, as Okta and Entra ID send them', () => {
  it('Okta: replace with a value object and no path (active false); Entra ID: Replace with a path and "False"/"True" strings', () => {
    expect(patchedUser(USER, op({ op: 'replace', value: { active: false } })).active).toBe(false);
    expect(patchedUser(USER, op({ op: 'Replace', path: 'active', value: 'False' })).active).toBe(false);
    expect(patchedUser({ ...USER, active: false }, op({ op: 'REPLACE', path: 'active', value: 'True' })).active).toBe(true);
  });

  it('Entra ID: the work email by filter, name parts by dotted paths (also as keys of a value object), attributes not kept are skipped', () => {
    const patched = patchedUser(USER, op(
      { op: 'Replace', path: 'emails[type eq "work"].value', value: 'ada.l@corp.example' },
      { op: 'Add', path: 'name.familyName', value: 'Lovelace' },
      { op: 'Replace', value: { 'name.givenName': 'Augusta', externalId: 'e2' } },
      { op: 'Add', path: 'title', value: 'Countess' },
      { op: 'Replace', path: 'id', value: 'x' }, { op: 'Replace', path: 'meta.lastModified', value: 'x' }, { op: 'Add', path: 'schemas', value: [] },
      { op: 'Add', path: 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department', value: 'Maths' },
      { op: 'Replace', path: 'userName', value: 'Ada.L@corp.example' },
    ));
    expect(patched).toEqual({
      ...USER, userName: 'ada.l@corp.example', externalId: 'e2', name: { givenName: 'Augusta', familyName: 'Lovelace' },
      emails: [{ value: 'ada.l@corp.example', type: 'work', primary: true }],
    });
  });

  it.each([
    [op({ op: 'move', path: 'active', value: true }), '400 invalidValue'],
    [op({ op: 'replace', path: 'active', value: 'yes' }), '400 invalidValue'],
    [op({ op: 'remove', path: 'userName' }), '400 mutability'],
    [op({ op: 'add', path: 'groups', value: [{ value: 'g' }] }), '400 mutability'],
    [op({ op: 'replace', path: 'emails[', value: 'x' }), '400 invalidPath'],
    [op({ op: 'replace', value: 'not an object' }), '400 invalidValue'],
    [{ Operations: 'none' }, '400 invalidSyntax'],
    [{}, '400 invalidSyntax'],
  ])('refuses %j with %s', (body, expected) => {
    expect(outcome(() => patchedUser(USER, body))).toBe(expected);
  });

  it('groups: Okta\'s member filter and value replace, Entra ID\'s Add/Remove with value lists', () => {
    expect(groupPatch(op({ op: 'remove', path: 'members[value eq "u1"]' }))).toEqual({ fields: {}, members: [{ remove: ['u1'] }] });
    expect(groupPatch(op({ op: 'replace', value: { id: 'g', displayName: 'Eng' } }))).toEqual({ fields: { displayName: 'Eng' }, members: [] });
    const entra = op(
      { op: 'Add', path: 'members', value: [{ value: 'u1' }, { value: 'u2' }] }, { op: 'Remove', path: 'members', value: [{ value: 'u2' }] }, { op: 'replace', path: 'members', value: [] },
    );
    expect(groupPatch(entra))
      .toEqual({ fields: {}, members: [{ add: ['u1', 'u2'] }, { remove: ['u2'] }, { replace: [] }] });
    expect(groupPatch(op({ op: 'remove', path: 'members' }))).toEqual({ fields: {}, members: [{ remove: 'all' }] });
    expect(outcome(() => groupPatch(op({ op: 'add', path: 'members[value eq "u1"]', value: [] })))).toBe('400 invalidPath');
  });

  it('property: any PATCH body is applied or refused with a SCIM 400, never another error', () => {
    const value = fc.oneof(fc.constant(null), fc.boolean(), fc.constantFrom('True', 'False', 'x@corp.example', ''), fc.string(), fc.array(fc.record({ value: fc.string() }), { maxLength: 3 }),
      fc.dictionary(fc.constantFrom('active', 'userName', 'name.givenName', 'emails', 'externalId', 'members', 'displayName', 'id'), fc.oneof(fc.string(), fc.boolean())));
    const known = fc.constantFrom(
      'active', 'userName', 'name', 'name.givenName', 'emails', 'emails[type eq "work"].value', 'members', 'members[value eq "u"]', 'displayName', 'externalId', 'groups',
    );
    const path = fc.oneof(fc.constant(undefined), known, fc.string());
    const operation = fc.record({ op: fc.oneof(fc.constantFrom('add', 'Replace', 'REMOVE'), fc.string()), path, value });
    fc.assert(fc.property(fc.array(operation, { maxLength: 5 }), (ops) => {
      for (const apply of [() => patchedUser(USER, op(...ops)), () => groupPatch(op(...ops))]) {
        const result = outcome(apply);
        expect(result === 'ok' || result.startsWith('400')).toBe(true);
      }
    }), { numRuns: 1000 });
  });
});
