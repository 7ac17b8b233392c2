// Unit tests of src/errors/listing.ts (CONTRACT §20): an operator's text for one error shows, in its
// language, on that error's entry of the list alone. Over HTTP: test/errors/shapes.test.ts.
import { describe, expect, it } from 'vitest';
import { errorList } from '../../src/errors/listing.js';
import type { ErrorStyle } from '../../src/errors/messages.js';

describe('errorList', () => {
  it('adds an operator\'s language to the entries it has a text for, and to no other', () => {
    const style: ErrorStyle = { codes: true, language: 'negotiate', languages: ['fr', 'en', 'de'], overrides: new Map([['de', { plan_insufficient: 'Tarif zu klein' }]]) };
    const list = errorList(style);
    expect(list.find((e) => e.code === 'plan_insufficient')!.messages).toEqual({ fr: 'Plan insuffisant', en: 'Insufficient plan', de: 'Tarif zu klein' });
    expect(Object.keys(list.find((e) => e.code === 'token_missing')!.messages)).toEqual(['fr', 'en']);
  });
});
