// The words of the answers (src/errors/messages.ts, CONTRACT §20) as pure functions: a text in
// the answer's language (the operator's file first, then the built-in French or English, English
// for any other language), its placeholders filled with values, nouns agreeing with a count and
// lists joined in the language's word. End to end (operators' files, negotiation): locale.test.ts.
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_STYLE, errorMessage, errorTitle, fill, negotiates, placeholders, successMessage, type ErrorStyle, type Nouns,
} from '../../src/errors/messages.js';

const COURSES: Nouns = { fr: { one: 'course', many: 'courses' }, en: { one: 'ride', many: 'rides' } };

describe('filling a text', () => {
  it('puts values in their placeholders and leaves the ones it is not given, even those every object has', () => {
    expect(fill('plan {plan}: {limit}/day', 'en', { plan: 'pro', limit: 1000 })).toBe('plan pro: 1000/day');
    expect(fill('{plan} and {missing}', 'en', { plan: 'free' })).toBe('free and {missing}');
    expect(fill('{constructor} {to_string}', 'en')).toBe('{constructor} {to_string}');
    expect(fill('{Plan} {plan-x}', 'en', { Plan: 'x', 'plan-x': 'y' })).toBe('{Plan} {plan-x}');
    expect(fill('no placeholder', 'fr', { plan: 'pro' })).toBe('no placeholder');
  });

  it('lists its placeholders, lower-case names and underscores only', () => {
    expect(placeholders('{min} {characters} {Upper} {with_under} {x1}')).toEqual(['min', 'characters', 'with_under']);
    expect(placeholders('none')).toEqual([]);
  });

  it('joins a list with the language\'s word, English\'s for a language without one', () => {
    const list = { list: ['free', 'premium', 'pro'] };
    expect(fill('({plans})', 'fr', { plans: list })).toBe('(free, premium ou pro)');
    expect(fill('({plans})', 'en', { plans: list })).toBe('(free, premium or pro)');
    expect(fill('({plans})', 'de', { plans: list })).toBe('(free, premium or pro)');
    expect(fill('({plans})', 'fr', { plans: { list: ['free', 'pro'] } })).toBe('(free ou pro)');
    expect(fill('({plans})', 'fr', { plans: { list: ['pro'] } })).toBe('(pro)');
    expect(fill('({plans})', 'fr', { plans: { list: [] } })).toBe('()');
  });

  it('makes a noun agree with its count, in the language, else English, else the first given', () => {
    expect(fill('{n} {noun}', 'fr', { n: 1, noun: { count: 1, nouns: COURSES } })).toBe('1 course');
    expect(fill('{noun}', 'fr', { noun: { count: 0, nouns: COURSES } })).toBe('courses');
    expect(fill('{noun}', 'fr', { noun: { count: 2, nouns: COURSES } })).toBe('courses');
    expect(fill('{noun}', 'en', { noun: { count: 1, nouns: COURSES } })).toBe('ride');
    expect(fill('{noun}', 'de', { noun: { count: 5, nouns: COURSES } })).toBe('rides');
    expect(fill('{noun}', 'de', { noun: { count: 1, nouns: { fr: { one: 'course', many: 'courses' } } } })).toBe('course');
  });
});

describe('a text in a language', () => {
  const overrides = new Map<string, Record<string, string>>([
    ['fr', { token_missing: 'Jeton absent', user_created: 'Bienvenue' }],
    ['de', { password_too_short: 'Passwort zu kurz (min {min})', email_invalid: 'Ungültige E-Mail' }],
  ]);
  const style: ErrorStyle = { codes: false, language: 'negotiate', languages: ['fr', 'en', 'de'], overrides };

  it('the built-in French or English, English for any other language', () => {
    expect(errorMessage(DEFAULT_STYLE, 'passwordTooShort', 'fr', { min: 8, characters: 'caractères' })).toBe('Mot de passe trop court (min 8 caractères)');
    expect(errorMessage(DEFAULT_STYLE, 'passwordTooShort', 'en', { min: 8, characters: 'characters' })).toBe('Password too short (min 8 characters)');
    expect(errorMessage(DEFAULT_STYLE, 'tokenMissing', 'de')).toBe('No token was sent');
    expect(successMessage(DEFAULT_STYLE, 'userCreated', 'fr')).toBe('Utilisateur créé');
    expect(successMessage(DEFAULT_STYLE, 'userCreated', 'it')).toBe('User created');
  });

  it('the operator\'s text first, by code, its placeholders filled; the built-in one for the codes it leaves', () => {
    expect(errorMessage(style, 'tokenMissing', 'fr')).toBe('Jeton absent');
    expect(errorMessage(style, 'tokenMissing', 'en')).toBe('No token was sent');
    expect(errorMessage(style, 'passwordTooShort', 'de', { min: 12 })).toBe('Passwort zu kurz (min 12)');
    expect(errorMessage(style, 'loginFieldsRequired', 'de')).toBe('Email and password required');
    expect(successMessage(style, 'userCreated', 'fr')).toBe('Bienvenue');
    expect(successMessage(style, 'loggedOut', 'fr')).toBe('Déconnexion réussie');
  });

  it('a title: the code\'s own where it has one (the operator\'s text is the message\'s), else its message, the operator\'s too', () => {
    expect(errorTitle(style, 'passwordTooShort', 'fr')).toBe('Mot de passe trop court');
    expect(errorTitle(style, 'passwordTooShort', 'en')).toBe('Password too short');
    expect(errorTitle(style, 'tokenMissing', 'fr')).toBe('Token manquant');
    expect(errorTitle(style, 'tokenMissing', 'de')).toBe('Missing token');
    expect(errorTitle(style, 'emailInvalid', 'fr')).toBe('Email invalide');
    expect(errorTitle(style, 'emailInvalid', 'en')).toBe('Invalid email');
    expect(errorTitle(style, 'emailInvalid', 'de')).toBe('Ungültige E-Mail');
    expect(errorTitle(style, 'passwordTooShort', 'de')).toBe('Password too short');
  });

  it('only negotiate makes an answer depend on Accept-Language', () => {
    expect(negotiates(style)).toBe(true);
    expect(negotiates(DEFAULT_STYLE)).toBe(false);
    expect(negotiates({ ...DEFAULT_STYLE, language: 'en' })).toBe(false);
  });
});
