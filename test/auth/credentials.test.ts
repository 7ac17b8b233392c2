// Unit tests of src/credentials/emailAddress.ts and src/auth/credentials.ts: what an email or a new
// password must be, at each edge.
// The threats: an address an upstream or a mail library reads as another (or as two), a header
// injected through x-user-email, and an account no later lookup finds. End to end, the same rules
// are in register.test.ts and singleMailbox.security.test.ts. A refused credential's answer and log
// line (refuseCredentials) on a bare fastify app: end to end in logging.test.ts and login.test.ts.
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { newPasswordDenial, refuseCredentials } from '../../src/auth/credentials.js';
import { DEFAULT_STYLE, errorAnswer, type Denial } from '../../src/errors/index.js';
import { isSingleMailbox, lookupForm, normalizeEmail, storable } from '../../src/credentials/emailAddress.js';
import { MAX_PASSWORD_BYTES } from '../../src/auth/password/passwords.js';

describe('isSingleMailbox', () => {
  it.each([
    ['ada@example.test'],
    ['a@b'],
    ['A.B-c_d+tag@sub.example.test'],
    ["!#$&'*+-/=?^_`{|}~@example.test"],
    ['łukasz@x.pl'],
    ['ada@żółw.example'],
    ['"john..doe"@example.test'],
    ['".a."@example.test'],
    ['ada@a-b.example'],
    ['ada@1.2'],
  ])('accepts %s', (email) => {
    expect(isSingleMailbox(email)).toBe(true);
  });

  it.each([
    ['no @', 'ada.example.test'],
    ['empty local part', '@example.test'],
    ['empty domain', 'ada@'],
    ['two @', 'a@b@example.test'],
    ['a display name', 'ceo@bank.test <attacker@evil.test>'],
    ['angle brackets', '<ada@example.test>'],
    ['a list', 'a@x.test,b@y.test'],
    ['a group', 'team:a@x.test;'],
    ['a comment', 'ada(comment)@example.test'],
    ['a space', 'ada lovelace@example.test'],
    ['a leading space', ' ada@example.test'],
    ['a trailing space', 'ada@example.test '],
    ['a leading dot', '.ada@example.test'],
    ['a trailing dot in the local part', 'ada.@example.test'],
    ['two dots in a row', 'a..da@example.test'],
    ['an empty quoted part', '""@example.test'],
    ['a quoted comma', '"a,b"@example.test'],
    ['a quoted space', '"a b"@example.test'],
    ['an unclosed quote', '"ada@example.test'],
    ['a domain literal', 'eve@[127.0.0.1]'],
    ['an IPv6 literal', 'a@[IPv6:::1]'],
    ['a domain label starting with a hyphen', 'ada@-x.test'],
    ['a domain label ending with a hyphen', 'ada@x-.test'],
    ['an empty domain label', 'ada@x..test'],
    ['a trailing dot in the domain', 'ada@example.test.'],
    ['an underscore in the domain', 'ada@ex_ample.test'],
    ['CR LF', 'a@b.test\r\nx-user-id: 1'],
    ['NUL', 'a\0@b.test'],
    ['DEL', 'a\x7f@b.test'],
    ['a C1 control', 'a\x85@b.test'],
    ['U+FFFD', 'a\uFFFD@b.test'],
    ['a lone surrogate', 'a\uD800@b.test'],
    ['a percent sign', '%c5%82ukasz@x.pl'],
    ['a line separator', 'a\u2028@b.test'],
    ['a no-break space', 'a\u00a0@b.test'],
    ['a zero-width joiner', 'a\u200d@b.test'],
  ])('refuses %s', (_why, email) => {
    expect(isSingleMailbox(email)).toBe(false);
  });

  it('takes a local part of 64 octets, not 65 (UTF-8 octets, not characters)', () => {
    expect(isSingleMailbox(`${'a'.repeat(64)}@x.test`)).toBe(true);
    expect(isSingleMailbox(`${'a'.repeat(65)}@x.test`)).toBe(false);
    expect(isSingleMailbox(`${'ł'.repeat(32)}@x.test`)).toBe(true);
    expect(isSingleMailbox(`${'ł'.repeat(32)}a@x.test`)).toBe(false);
  });

  it('takes an address of 320 characters, not 321', () => {
    const domain = (length: number) => `${'d'.repeat(length - 5)}.test`;
    expect(isSingleMailbox(`${'a'.repeat(64)}@${domain(255)}`)).toBe(true);
    expect(isSingleMailbox(`${'a'.repeat(64)}@${domain(256)}`)).toBe(false);
  });
});

describe('normalizeEmail and lookupForm', () => {
  it('trims and lower-cases, then keeps only one mailbox', () => {
    expect(normalizeEmail('  Ada@Example.TEST \n')).toBe('ada@example.test');
    expect(normalizeEmail('ada@example.test, eve@evil.test')).toBeUndefined();
    expect(normalizeEmail('')).toBeUndefined();
  });

  it('looks up any text the same way, a mailbox or not', () => {
    expect(lookupForm('  Eve <EVE@Evil.test> ')).toBe('eve <eve@evil.test>');
  });
});

describe('storable', () => {
  it('refuses a NUL anywhere, and nothing else', () => {
    expect(storable('ada@example.test')).toBe(true);
    expect(storable('')).toBe(true);
    expect(storable('ada\0@example.test')).toBe(false);
    expect(storable('\0')).toBe(false);
  });
});

/** The spec's body a denial is answered with. */
const bodyOf = (denial: Denial | undefined) => denial && errorAnswer(DEFAULT_STYLE, undefined, denial).body;

describe('newPasswordDenial', () => {
  it('counts characters (code points), not UTF-16 units or bytes, against the minimum', () => {
    expect(bodyOf(newPasswordDenial('1234567', 8))).toEqual({ error: 'Mot de passe trop court (min 8 caractères)' });
    expect(newPasswordDenial('12345678', 8)).toBeUndefined();
    // Seven emoji are fourteen UTF-16 units and 28 bytes: still seven characters.
    expect(newPasswordDenial('😀'.repeat(7), 8)?.code).toBe('passwordTooShort');
    expect(newPasswordDenial('😀'.repeat(8), 8)).toBeUndefined();
  });

  it('names another minimum in its message', () => {
    expect(bodyOf(newPasswordDenial('abc', 12))).toEqual({ error: 'Mot de passe trop court (min 12 caractères)' });
    expect(bodyOf(newPasswordDenial('', 1))).toEqual({ error: 'Mot de passe trop court (min 1 caractère)' });
  });

  it(`refuses more than ${MAX_PASSWORD_BYTES} bytes, not ${MAX_PASSWORD_BYTES}`, () => {
    expect(newPasswordDenial('a'.repeat(MAX_PASSWORD_BYTES), 8)).toBeUndefined();
    expect(newPasswordDenial('a'.repeat(MAX_PASSWORD_BYTES + 1), 8)).toEqual({ code: 'passwordTooLong' });
  });
});

describe('refuseCredentials', () => {
  it('answers 401 invalid credentials whatever the reason, and logs the reason and the account, not what was sent', async () => {
    const lines: Array<Record<string, unknown>> = [];
    const app = Fastify({ logger: { level: 'info', stream: { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) } } });
    app.post('/login', (request, reply) => refuseCredentials(request, reply, 'wrongPassword', 42));
    app.post('/missing', (request, reply) => refuseCredentials(request, reply, 'userGone', undefined, 'userInactive'));
    try {
      const refused = await app.inject({ method: 'POST', url: '/login', payload: { password: 'hunter2' } });
      expect(refused.statusCode).toBe(401);
      expect(refused.json()).toMatchObject({ error: 'Identifiants invalides' });
      const denied = lines.filter((line) => line.msg === 'request denied');
      expect(denied).toEqual([expect.objectContaining({ reason: 'invalidCredentials', why: 'wrongPassword', userId: 42 })]);
      expect(JSON.stringify(lines)).not.toContain('hunter2');
      // userInactive is logged under the name telemetry gives it, never telling the two apart.
      await app.inject({ method: 'POST', url: '/missing' });
      expect(lines.filter((line) => line.msg === 'request denied').at(-1)).toMatchObject({ reason: 'userNotFound', why: 'userGone' });
    } finally {
      await app.close();
    }
  });
});
