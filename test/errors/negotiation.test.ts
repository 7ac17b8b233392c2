// What a client asked for (src/errors/negotiation.ts, CONTRACT §20), as pure functions: problem
// details only when Accept names them at least as high as JSON, the language by Accept-Language's
// q-values, and a user's locale read as a language with texts. End to end (the answers in each
// form and language): test/errors/shapes.test.ts and test/errors/locale.test.ts.
import { describe, expect, it } from 'vitest';
import { LANGUAGE_TAG, namedLanguage, negotiateLanguage, supportedLanguage, wantsProblem } from '../../src/errors/negotiation.js';

describe('Accept: problem details', () => {
  it.each([
    [undefined, false],
    ['', false],
    ['application/json', false],
    ['*/*', false],
    ['application/problem+xml', false],
    ['application/problem+json', true],
    ['APPLICATION/PROBLEM+JSON', true],
    [' application/problem+json ; charset=utf-8', true],
    ['application/problem+json;q=0', false],
    ['application/problem+json; q = 0.001', true],
    ['application/json, application/problem+json', true],
    ['application/problem+json, application/json', true],
    ['application/json, application/problem+json;q=0.5', false],
    ['application/json;q=0.5, application/problem+json;q=0.5', true],
    ['application/json;q=0.4, application/problem+json;q=0.5', true],
    ['text/html, application/problem+json;q=0.1', true],
    // Without an entry of its own, JSON gets application/*'s q, else */*'s.
    ['application/problem+json;q=0.5, application/*;q=0.4', true],
    ['application/problem+json;q=0.5, application/*;q=0.6', false],
    ['*/*;q=0.8, application/problem+json;q=0.9', true],
    ['*/*, application/problem+json;q=0.9', false],
    ['application/json;q=0.1, application/*;q=0.9, application/problem+json;q=0.5', true],
    ['application/*;q=0.1, */*;q=0.9, application/problem+json;q=0.5', true],
    // A q-value no grammar allows counts as 0; above 1 counts as 1.
    ['application/problem+json;q=2', false],
    ['application/problem+json;q=0.1234', false],
    ['application/problem+json;q=abc', false],
    ['application/problem+json;qq=0.5', false],
    ['application/problem+json;\tq=0.5', true],
    ['application/problem+json;q=1.5, application/json', true],
    ['application/problem+json;q=1.000, application/json;q=1', true],
    // Other parameters change nothing.
    ['application/problem+json;level=1, application/json;q=0.9', true],
    [',,application/problem+json,,', true],
  ])('%j: %s', (accept, expected) => {
    expect(wantsProblem(accept)).toBe(expected);
  });
});

describe('Accept-Language', () => {
  const LANGUAGES = ['fr', 'en', 'de', 'pt-br'];
  it.each([
    [undefined, 'fr'],
    ['', 'fr'],
    ['en', 'en'],
    ['EN-gb', 'en'],
    ['de-AT, en;q=0.9', 'de'],
    ['en;q=0.5, de;q=0.8', 'de'],
    ['de, en', 'de'],
    ['it, en;q=0.1', 'en'],
    ['*', 'fr'],
    ['it, *;q=0.5, en;q=0.1', 'fr'],
    ['en;q=0', 'fr'],
    ['en;q=0, de;q=0.001', 'de'],
    ['tlh', 'fr'],
    ['pt-BR', 'pt-br'],
    ['pt-PT, en;q=0.5', 'en'],
    ['de;q=0.5, EN;Q=0.6', 'en'],
  ])('%j: %s', (header, expected) => {
    expect(negotiateLanguage(header, LANGUAGES, 'fr')).toBe(expected);
  });

  it('names a language only when the header names one with texts', () => {
    expect(namedLanguage('de-CH, en;q=0.5', LANGUAGES)).toBe('de');
    expect(namedLanguage('*', LANGUAGES)).toBeUndefined();
    expect(namedLanguage('tlh', LANGUAGES)).toBeUndefined();
    expect(namedLanguage(undefined, LANGUAGES)).toBeUndefined();
  });
});

describe('a user\'s locale', () => {
  const LANGUAGES = ['fr', 'en', 'pt-br'];
  it.each([
    ['en', 'en'],
    [' EN_gb ', 'en'],
    ['pt_BR', 'pt-br'],
    ['pt-BR', 'pt-br'],
    ['fr-CA', 'fr'],
    ['pt', undefined],
    ['de', undefined],
    ['english', undefined],
    ['e', undefined],
    ['en-', undefined],
    ['en--gb', undefined],
    ['en-abcdefghi', undefined],
    ['12', undefined],
    // 35 characters at most, as a BCP 47 tag without extensions is.
    [`en${'-abcdefgh'.repeat(3)}-abcde`, 'en'],
    [`en${'-abcdefgh'.repeat(3)}-abcdef`, undefined],
    [42, undefined],
    [null, undefined],
  ])('%j: %s', (locale, expected) => {
    expect(supportedLanguage(locale, LANGUAGES)).toBe(expected);
  });

  it('a messages file\'s or locale\'s name is a lower-case language tag', () => {
    for (const ok of ['en', 'fil', 'pt-br', 'zh-hant', 'es-419']) expect(LANGUAGE_TAG.test(ok), ok).toBe(true);
    for (const bad of ['EN', 'e', 'engl', 'pt-b', 'pt_br', 'en-abcdefghi', 'en-gb-x', ' en']) expect(LANGUAGE_TAG.test(bad), bad).toBe(false);
  });
});
