// How SCIM values and PATCH bodies are read (src/scim/values.ts), as pure functions: the spellings
// Okta and Entra ID send are taken (`"True"`, `Replace`, `Operations` or `operations`, `Path`,
// `Value`), anything else is a SCIM 400 with its scimType and detail, never another error.
import { describe, expect, it } from 'vitest';
import { ScimError } from '../../src/scim/errors.js';
import { bool, expanded, isObject, operations, opName, optionalText, text } from '../../src/scim/values.js';

/** What a call gives: its value, or the SCIM error it throws as "status scimType: detail". */
function read(fn: () => unknown): unknown {
  try {
    return fn();
  } catch (err) {
    if (err instanceof ScimError) return `${err.status} ${err.scimType ?? '-'}: ${err.detail}`;
    throw err;
  }
}

const PATCH = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';

describe('SCIM values', () => {
  it('a boolean as JSON or as Entra ID\'s strings, in any case; nothing else', () => {
    expect([true, false, 'True', 'FALSE', 'true', 'false'].map((v) => bool(v, 'active'))).toEqual([true, false, true, false, true, false]);
    for (const bad of ['yes', ' true', 'true ', 'truefalse', 1, 0, null, undefined, {}, ['true']]) {
      expect(read(() => bool(bad, 'active')), JSON.stringify(bad)).toBe('400 invalidValue: active must be a boolean');
    }
  });

  it('a string of at most 1024 characters without NUL; null and absent clear an optional one', () => {
    expect(text('Ada', 'displayName')).toBe('Ada');
    expect(text('', 'displayName')).toBe('');
    expect(text('x'.repeat(1024), 'displayName')).toHaveLength(1024);
    for (const bad of ['x'.repeat(1025), 'a\0b', 42, null, ['a']]) {
      expect(read(() => text(bad, 'displayName'))).toBe('400 invalidValue: displayName must be a string of at most 1024 characters');
    }
    expect(optionalText(null, 'title')).toBeNull();
    expect(optionalText(undefined, 'title')).toBeNull();
    expect(optionalText('Dr', 'title')).toBe('Dr');
    expect(read(() => optionalText(7, 'title'))).toBe('400 invalidValue: title must be a string of at most 1024 characters');
  });

  it('an object is neither null nor an array', () => {
    expect([{}, { a: 1 }, null, [], 'x', 1, undefined].map(isObject)).toEqual([true, true, false, false, false, false, false]);
  });

  it('an op in any case, one of add, replace and remove', () => {
    expect(['add', 'Replace', 'REMOVE'].map(opName)).toEqual(['add', 'replace', 'remove']);
    for (const bad of ['delete', '', undefined, 1]) expect(read(() => opName(bad))).toBe('400 invalidValue: op must be add, replace or remove');
  });
});

describe('a PATCH body', () => {
  it('reads Operations (or operations), each op, path and value in either spelling; an empty path is none', () => {
    expect(operations({ schemas: [PATCH], Operations: [{ op: 'Replace', path: 'active', value: false }, { Op: 'add', Path: 'title', Value: 'Dr' }] })).toEqual([
      { op: 'replace', path: 'active', value: false },
      { op: 'add', path: 'title', value: 'Dr' },
    ]);
    expect(operations({ operations: [{ op: 'remove', path: '' }] })).toEqual([{ op: 'remove', path: undefined, value: undefined }]);
    expect(operations({ Operations: [] })).toEqual([]);
    expect(operations({ Operations: Array.from({ length: 1000 }, () => ({ op: 'add', path: 'a', value: 1 })) })).toHaveLength(1000);
  });

  it('refuses a body that is none, too many operations, an operation that is no object, a path that is no string', () => {
    const noBody = `400 invalidSyntax: A PATCH body is a ${PATCH} with Operations`;
    for (const bad of [null, [], 'x', {}, { Operations: {} }, { Operations: 'add' }]) expect(read(() => operations(bad)), JSON.stringify(bad)).toBe(noBody);
    expect(read(() => operations({ Operations: Array.from({ length: 1001 }, () => ({ op: 'add', path: 'a' })) }))).toBe(noBody);
    expect(read(() => operations({ Operations: [{ op: 'add', path: 'a' }, 'replace'] }))).toBe('400 invalidSyntax: Each operation is an object');
    expect(read(() => operations({ Operations: [null] }))).toBe('400 invalidSyntax: Each operation is an object');
    expect(read(() => operations({ Operations: [{ op: 'add', path: 3 }] }))).toBe('400 invalidPath: path must be a string');
    expect(read(() => operations({ Operations: [{ op: 'move', path: 'a' }] }))).toBe('400 invalidValue: op must be add, replace or remove');
  });

  it('makes each attribute of a pathless operation\'s value an operation of its own; keeps the others', () => {
    expect(expanded([
      { op: 'replace', path: undefined, value: { active: false, displayName: 'Ada' } },
      { op: 'add', path: 'title', value: 'Dr' },
    ])).toEqual([
      { op: 'replace', path: 'active', value: false },
      { op: 'replace', path: 'displayName', value: 'Ada' },
      { op: 'add', path: 'title', value: 'Dr' },
    ]);
    expect(read(() => expanded([{ op: 'replace', path: undefined, value: 'Ada' }]))).toBe('400 invalidValue: An operation without a path takes an object value');
    expect(read(() => expanded([{ op: 'replace', path: undefined, value: [1] }]))).toBe('400 invalidValue: An operation without a path takes an object value');
  });
});
