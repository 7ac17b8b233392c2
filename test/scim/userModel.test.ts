// A SCIM user's body and PATCH read at their edges (src/scim/userModel.ts), as pure functions: what
// is kept of a POST or PUT, which email an account is found by, each PATCH attribute and the
// `emails[type eq "work"]` paths Entra ID sends, each refusal with SCIM's status, scimType and detail.
import { describe, expect, it } from 'vitest';
import { accountEmail, patchedUser, userFromResource, type UserState } from '../../src/scim/userModel.js';
import { scimOutcome } from './outcome.js';

const op = (...operations: unknown[]) => ({ schemas: ['urn:ietf:params:scim:api:messages:2.0:PatchOp'], Operations: operations });
const invalidValue = (detail: string) => ({ status: 400, scimType: 'invalidValue', detail });
const notText = (what: string) => invalidValue(`${what} must be a string of at most 1024 characters`);
const emails = (n: number) => Array.from({ length: n }, (_, i) => ({ value: `a${i}@corp.example` }));

const ADA: UserState = {
  userName: 'ada@corp.example', externalId: 'e1', name: { givenName: 'Ada' }, displayName: 'Ada', active: true,
  emails: [{ value: 'ada@corp.example', type: 'work', primary: true }, { value: 'ada@home.example', type: 'home' }],
};
const patched = (...operations: unknown[]) => scimOutcome(() => patchedUser(ADA, op(...operations)));

describe('a SCIM user as POST and PUT send it', () => {
  it('keeps the attributes the gateway keeps, drops the others, and is active unless it says otherwise', () => {
    const body = {
      schemas: ['urn:ietf:params:scim:schemas:core:2.0:User'], userName: '  Ada@Corp.Example ', externalId: '00u1', displayName: 'Ada L.', title: 'Countess',
      name: { givenName: 'Ada', familyName: 'Lovelace', middleName: 'A', honorificPrefix: 'Lady', honorificSuffix: 'FRS', formatted: 'Lady Ada', nickName: 'A', middle: 'B' },
      emails: [{ value: 'ada@corp.example', type: 'work', primary: 'True', display: 'Ada' }, { value: 'ada@home.example', type: null, primary: null }],
    };
    expect(scimOutcome(() => userFromResource(body))).toEqual({
      userName: 'ada@corp.example', externalId: '00u1', displayName: 'Ada L.', active: true,
      name: { givenName: 'Ada', familyName: 'Lovelace', middleName: 'A', honorificPrefix: 'Lady', honorificSuffix: 'FRS', formatted: 'Lady Ada' },
      emails: [{ value: 'ada@corp.example', type: 'work', primary: true }, { value: 'ada@home.example' }],
    });
    expect(scimOutcome(() => userFromResource({ userName: 'bob' }))).toEqual({ userName: 'bob', externalId: null, name: {}, displayName: null, emails: [], active: true });
    expect(scimOutcome(() => userFromResource({ userName: 'bob', name: null, emails: null, active: null }))).toMatchObject({ name: {}, emails: [], active: true });
    expect(scimOutcome(() => userFromResource({ userName: 'bob', active: 'False' }))).toMatchObject({ active: false });
    expect(scimOutcome(() => userFromResource({ userName: 'bob', active: false }))).toMatchObject({ active: false });
    expect(scimOutcome(() => userFromResource({ userName: 'bob', name: { givenName: undefined, middleName: null, familyName: 'B' } }))).toMatchObject({ name: { familyName: 'B' } });
  });

  it('emails: one object alone is a list of one, at most 10, each an object with a string value', () => {
    expect(scimOutcome(() => userFromResource({ userName: 'bob', emails: { value: 'b@corp.example', primary: false } }))).toMatchObject({ emails: [{ value: 'b@corp.example', primary: false }] });
    expect(scimOutcome(() => userFromResource({ userName: 'bob', emails: emails(10) }))).toMatchObject({ emails: emails(10) });
    expect(scimOutcome(() => userFromResource({ userName: 'bob', emails: emails(11) }))).toEqual(invalidValue('at most 10 emails'));
    expect(scimOutcome(() => userFromResource({ userName: 'bob', emails: ['b@corp.example'] }))).toEqual(invalidValue('each of emails is an object with a value'));
    expect(scimOutcome(() => userFromResource({ userName: 'bob', emails: [null] }))).toEqual(invalidValue('each of emails is an object with a value'));
    expect(scimOutcome(() => userFromResource({ userName: 'bob', emails: [{}] }))).toEqual(notText('emails.value'));
    expect(scimOutcome(() => userFromResource({ userName: 'bob', emails: [{ value: 'b@x.example', type: 3 }] }))).toEqual(notText('emails.type'));
    expect(scimOutcome(() => userFromResource({ userName: 'bob', emails: [{ value: 'b@x.example', primary: 'yes' }] }))).toEqual(invalidValue('emails.primary must be a boolean'));
  });

  it('refuses a body that is no object, a userName missing or blank, and values of the wrong kind', () => {
    for (const body of [null, [], 'bob', 3]) {
      expect(scimOutcome(() => userFromResource(body)), JSON.stringify(body)).toEqual({ status: 400, scimType: 'invalidSyntax', detail: 'A User resource is a JSON object' });
    }
    expect(scimOutcome(() => userFromResource({}))).toEqual(notText('userName'));
    expect(scimOutcome(() => userFromResource({ userName: 7 }))).toEqual(notText('userName'));
    for (const userName of ['', '   ']) expect(scimOutcome(() => userFromResource({ userName })), JSON.stringify(userName)).toEqual(invalidValue('userName is required'));
    expect(scimOutcome(() => userFromResource({ userName: 'bob', externalId: 1 }))).toEqual(notText('externalId'));
    expect(scimOutcome(() => userFromResource({ userName: 'bob', displayName: {} }))).toEqual(notText('displayName'));
    expect(scimOutcome(() => userFromResource({ userName: 'bob', active: 'yes' }))).toEqual(invalidValue('active must be a boolean'));
    for (const name of ['Ada', ['Ada'], 1]) expect(scimOutcome(() => userFromResource({ userName: 'bob', name })), JSON.stringify(name)).toEqual(invalidValue('name must be an object'));
    expect(scimOutcome(() => userFromResource({ userName: 'bob', name: { familyName: 2 } }))).toEqual(notText('name.familyName'));
  });
});

describe('the email an account is found or made by', () => {
  const state = (userName: string, list: UserState['emails']) => ({ userName, emails: list });
  it('the userName when it is an address, as accounts store it', () => {
    expect(accountEmail(state(' Ada@Corp.Example', [{ value: 'other@corp.example', primary: true }]))).toBe('ada@corp.example');
  });

  it('else the primary email, or the only one; none when there are several and none is primary, or it is no address', () => {
    expect(accountEmail(state('ada', [{ value: 'a@home.example', primary: false }, { value: 'Ada@Corp.Example', primary: true }]))).toBe('ada@corp.example');
    expect(accountEmail(state('ada', [{ value: 'Only@Corp.Example' }]))).toBe('only@corp.example');
    expect(accountEmail(state('ada', [{ value: 'a@corp.example' }, { value: 'b@corp.example' }]))).toBeUndefined();
    expect(accountEmail(state('ada', [{ value: 'a@corp.example', primary: false }, { value: 'b@corp.example' }]))).toBeUndefined();
    expect(accountEmail(state('ada', [{ value: 'not an address', primary: true }]))).toBeUndefined();
    expect(accountEmail(state('ada', []))).toBeUndefined();
  });
});

describe('a SCIM user PATCH, attribute by attribute', () => {
  it('userName replaced (trimmed, lower-cased) but never removed; active replaced but never removed', () => {
    expect(patched({ op: 'replace', path: 'userName', value: ' Ada.L@Corp.Example ' })).toEqual({ ...ADA, userName: 'ada.l@corp.example' });
    expect(patched({ op: 'remove', path: 'userName' })).toEqual({ status: 400, scimType: 'mutability', detail: 'userName cannot be removed' });
    expect(patched({ op: 'replace', path: 'userName', value: ' ' })).toEqual(invalidValue('userName is required'));
    expect(patched({ op: 'add', path: 'active', value: false })).toEqual({ ...ADA, active: false });
    expect(patched({ op: 'remove', path: 'active' })).toEqual(invalidValue('active cannot be removed'));
    expect(patched({ op: 'replace', path: 'active', value: 'yes' })).toEqual(invalidValue('active must be a boolean'));
  });

  it('externalId and displayName replaced, or removed (null)', () => {
    expect(patched({ op: 'replace', path: 'externalId', value: 'e2' }, { op: 'add', path: 'displayName', value: 'Augusta' })).toEqual({ ...ADA, externalId: 'e2', displayName: 'Augusta' });
    expect(patched({ op: 'remove', path: 'externalId', value: 'e2' }, { op: 'remove', path: 'displayName' })).toEqual({ ...ADA, externalId: null, displayName: null });
    expect(patched({ op: 'replace', path: 'displayName', value: 4 })).toEqual(notText('displayName'));
    expect(patched({ op: 'replace', path: 'externalId', value: 4 })).toEqual(notText('externalId'));
  });

  it('name: replaced whole, merged by add, removed whole; a part replaced or removed by its dotted path', () => {
    expect(patched({ op: 'replace', path: 'name', value: { familyName: 'Lovelace' } })).toEqual({ ...ADA, name: { familyName: 'Lovelace' } });
    expect(patched({ op: 'add', path: 'name', value: { familyName: 'Lovelace' } })).toEqual({ ...ADA, name: { givenName: 'Ada', familyName: 'Lovelace' } });
    expect(patched({ op: 'remove', path: 'name' })).toEqual({ ...ADA, name: {} });
    expect(patched({ op: 'replace', path: 'name.givenName', value: 'Augusta' })).toEqual({ ...ADA, name: { givenName: 'Augusta' } });
    expect(patched({ op: 'remove', path: 'name.givenName' })).toEqual({ ...ADA, name: {} });
    expect(patched({ op: 'remove', path: 'name.familyName' })).toEqual(ADA);
    expect(patched({ op: 'add', path: 'name.familyName', value: null })).toEqual(notText('name.familyName'));
    expect(patched({ op: 'add', path: 'name', value: 'Ada' })).toEqual(invalidValue('name must be an object'));
  });

  it('emails: add appends (the last 10 kept), replace replaces, remove empties', () => {
    const work = { value: 'ada@work.example', type: 'work' };
    expect(patched({ op: 'add', path: 'emails', value: [work] })).toEqual({ ...ADA, emails: [...ADA.emails, work] });
    expect(patched({ op: 'add', path: 'emails', value: emails(9) })).toEqual({ ...ADA, emails: [ADA.emails[1], ...emails(9)] });
    expect(patched({ op: 'replace', path: 'emails', value: work })).toEqual({ ...ADA, emails: [work] });
    expect(patched({ op: 'remove', path: 'emails' })).toEqual({ ...ADA, emails: [] });
    expect(patched({ op: 'remove', path: 'emails', value: [{ value: 'ada@home.example' }] })).toEqual({ ...ADA, emails: [] });
    expect(patched({ op: 'replace', path: 'emails', value: emails(11) })).toEqual(invalidValue('at most 10 emails'));
  });

  it('groups are changed through Groups, and a path to what the gateway does not keep changes nothing', () => {
    expect(patched({ op: 'add', path: 'groups', value: [{ value: 'g1' }] })).toEqual({ status: 400, scimType: 'mutability', detail: 'groups cannot be changed on a User' });
    expect(patched({ op: 'replace', path: 'phoneNumbers', value: [] }, { op: 'remove', path: 'meta.lastModified' })).toEqual(ADA);
  });

  it('operations apply in order, each on what the one before left', () => {
    expect(patched({ op: 'remove', path: 'name' }, { op: 'add', path: 'name.familyName', value: 'L' }, { op: 'replace', path: 'active', value: 'false' }))
      .toEqual({ ...ADA, name: { familyName: 'L' }, active: false });
  });
});

describe('a SCIM user PATCH through an emails filter', () => {
  it('a sub-attribute of the emails the filter selects (type and value compared in any case)', () => {
    expect(patched({ op: 'replace', path: 'emails[type eq "WORK"].value', value: 'ada.l@corp.example' }))
      .toEqual({ ...ADA, emails: [{ value: 'ada.l@corp.example', type: 'work', primary: true }, ADA.emails[1]] });
    expect(patched({ op: 'replace', path: 'emails[value eq "ADA@home.example"].primary', value: 'True' }))
      .toEqual({ ...ADA, emails: [ADA.emails[0], { ...ADA.emails[1], primary: true }] });
    expect(patched({ op: 'replace', path: 'emails[type eq "home"].type', value: 'other' }))
      .toEqual({ ...ADA, emails: [ADA.emails[0], { ...ADA.emails[1], type: 'other' }] });
    expect(patched({ op: 'replace', path: 'emails[type eq "home"].value', value: 5 })).toEqual(notText('emails.value'));
  });

  it('no sub-attribute: the value object merged into each selected email; a value of another kind leaves it as it was', () => {
    expect(patched({ op: 'replace', path: 'emails[type eq "home"]', value: { value: 'ada@new.example', display: 'x' } }))
      .toEqual({ ...ADA, emails: [ADA.emails[0], { value: 'ada@new.example', type: 'home' }] });
    expect(patched({ op: 'replace', path: 'emails[type eq "home"]', value: 'ada@new.example' })).toEqual(ADA);
  });

  it('a sub-attribute an email does not keep (display) changes nothing', () => {
    expect(patched({ op: 'replace', path: 'emails[type eq "work"].display', value: 'Ada' })).toEqual(ADA);
    expect(patched({ op: 'replace', path: 'emails[type eq "work"].givenName', value: 'Ada' })).toEqual(ADA);
    expect(patched({ op: 'add', path: 'emails[type eq "other"].display', value: 'Ada' })).toEqual(ADA);
  });

  it('remove takes the selected emails only, whatever the sub-attribute', () => {
    expect(patched({ op: 'remove', path: 'emails[type eq "work"]' })).toEqual({ ...ADA, emails: [ADA.emails[1]] });
    expect(patched({ op: 'remove', path: 'emails[type eq "home"].value' })).toEqual({ ...ADA, emails: [ADA.emails[0]] });
    expect(patched({ op: 'remove', path: 'emails[type eq "other"]' })).toEqual(ADA);
  });

  it('no email of the filter\'s type: Entra ID adds one so; a filter on anything else selecting none is noTarget', () => {
    expect(patched({ op: 'add', path: 'emails[type eq "other"].value', value: 'ada@other.example' }))
      .toEqual({ ...ADA, emails: [...ADA.emails, { value: 'ada@other.example', type: 'other' }] });
    expect(patched({ op: 'add', path: 'emails[type eq "other"]', value: { value: 'ada@other.example', primary: false } }))
      .toEqual({ ...ADA, emails: [...ADA.emails, { value: 'ada@other.example', type: 'other', primary: false }] });
    expect(patched({ op: 'replace', path: 'emails[value eq "nobody@corp.example"].type', value: 'work' }))
      .toEqual({ status: 400, scimType: 'noTarget', detail: 'No email matches the path\'s filter' });
    expect(patched({ op: 'replace', path: 'emails[primary eq "false"].type', value: 'work' }))
      .toEqual({ status: 400, scimType: 'noTarget', detail: 'No email matches the path\'s filter' });
  });

  it('an email of the filter\'s type made by a sub-attribute other than its value has an empty value', () => {
    expect(patched({ op: 'add', path: 'emails[type eq "other"].primary', value: false }))
      .toEqual({ ...ADA, emails: [...ADA.emails, { value: '', type: 'other', primary: false }] });
  });

  it('an attribute an email lacks compares as empty', () => {
    const untyped = { ...ADA, emails: [...ADA.emails, { value: 'ada@untyped.example' }] };
    expect(scimOutcome(() => patchedUser(untyped, op({ op: 'remove', path: 'emails[type eq ""]' })))).toEqual(ADA);
  });

  it('a filter on primary compares the flag as text', () => {
    expect(patched({ op: 'replace', path: 'emails[primary eq "TRUE"].type', value: 'main' }))
      .toEqual({ ...ADA, emails: [{ ...ADA.emails[0], type: 'main' }, ADA.emails[1]] });
  });
});
