// The import's readers (CONTRACT §27), pure: each format turned into accounts or refusals with the
// file's line, the hash shapes known and unknown, Firebase's hash string to the character.
import { describe, expect, it } from 'vitest';
import { recognisedHashFormat as hashFormat } from '../../src/auth/index.js';
import { firebaseHash, ImportFileError, readUsers, standardBase64, type Parsed } from '../../src/import/index.js';
import { docsBlock } from '../helpers/docs.js';

const PLANS = ['free', 'premium', 'pro'];
const FIREBASE = { hashKey: 'jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA==', saltSeparator: 'Bw==', rounds: 8, memCost: 14 };
const BCRYPT = '$2b$10$SoU5.WPa.McB32Izq0bK2eh4fKPgMx2Z4vnTM9AoSuZ4GgDVItELm';
const read = (text: string, format: Parameters<typeof readUsers>[1]) => readUsers(text, format, { plans: PLANS, firebase: FIREBASE, now: new Date('2026-01-01T00:00:00Z') });
const rows = (parsed: Parsed[]) => parsed.flatMap((p) => ('row' in p ? [p.row] : []));
const refusals = (parsed: Parsed[]) => parsed.flatMap((p) => ('reason' in p ? [[p.line, p.reason]] : []));
/** The message of the ImportFileError reading `text` stops at; any other error fails the test as it is. */
const fileError = (text: string, format: Parameters<typeof readUsers>[1]) => {
  try {
    read(text, format);
  } catch (error) {
    if (error instanceof ImportFileError) return error.message;
    throw error;
  }
  return 'read without an error';
};
/** An account imported with only its email, and what the test gives. */
const account = (line: number, email: string, row: Record<string, unknown> = {}) => ({
  line, row: { email, passwordHash: null, emailVerifiedAt: null, plan: 'free', isActive: true, createdAt: null, externalId: null, ...row },
});

describe('hash shapes', () => {
  it.each([
    ['bcrypt', BCRYPT], ['bcrypt', BCRYPT.replace('$2b$', '$2a$')], ['bcrypt', BCRYPT.replace('$2b$', '$2y$')],
    ['argon2', '$argon2id$v=19$m=65536,t=3,p=4$c29tZXNhbHRzb21lc2FsdA$5Ha5V3Cpy5UpkUFr3e6VgGbtsydHZzMf3wVaqsWpwQM'],
    ['argon2', '$argon2i$v=19$m=4096,t=3,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNo'],
    ['scrypt', '$scrypt$ln=15,r=8,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA'],
    ['pbkdf2-sha256', '$pbkdf2-sha256$i=600000$c2FsdA$aGFzaGhhc2g'],
    ['pbkdf2-sha256', '$pbkdf2-sha256$29000$N2YuJ8QfJ.Tq$Z9q1w5Kx4mzQnTUy6Mt2d5e9pW2h0jcWHgB6r7R0sYk'],
    ['django-pbkdf2-sha256', 'pbkdf2_sha256$600000$Xc2dlIbd4nBs$Jy5nS0k2HqFQdXv1W7qYIx8fiSdzPZ0xHqv3iQmGmOg='],
  ])('%s: %s is known', (format, hash) => {
    expect(hashFormat(hash)).toBe(format);
  });

  const unknown = ['md5:5f4dcc3b5aa765d61d8327deb882cf99', '5f4dcc3b5aa765d61d8327deb882cf99', '$2b$10$short', '$argon2d$v=19$m=1,t=1,p=1$c2FsdA$aGFzaA', '$1$salt$hash', 'plain'];
  it.each(unknown)('%s is refused', (hash) => {
    expect(hashFormat(hash)).toBeUndefined();
  });

  it('a known shape that no login would check is refused at import, with its reason: it would lock its owner out', () => {
    const beyond = [
      BCRYPT.replace('$10$', '$15$'), // bcrypt cost above 14
      '$scrypt$ln=30,r=8,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA', // 128 GiB of scrypt
      '$pbkdf2-sha256$i=600000$c2FsdA$aGFzaGhhc2g', // an 8-byte digest
    ];
    const text = ['email,password_hash', ...beyond.map((hash, i) => `b${i}@x.test,"${hash}"`)].join('\n');
    const reason = 'password_hash: parameters or sizes beyond what a login checks (docs/password-hashes.md, Bounds)';
    expect(beyond.map((hash) => hashFormat(hash))).toEqual(['bcrypt', 'scrypt', 'pbkdf2-sha256']);
    expect(refusals(read(text, 'csv'))).toEqual([[2, reason], [3, reason], [4, reason]]);
  });

  it('builds Firebase\'s string: parameters, then salt and hash, standard base64 without padding', () => {
    const hash = firebaseHash(FIREBASE, '42xEC+ixf3L2lw==', 'lSrfV15cpx95/sZS2W9c9Kp6i/LVgQNDNC/qzrCnh1SAyZvqmZqAjTdn3aoItz+VHjoZilo78198JAdRuid5lQ==');
    expect(hash).toBe('$firebase-scrypt$rounds=8,mem=14,sep=Bw,key=jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA'
      + '$42xEC+ixf3L2lw$lSrfV15cpx95/sZS2W9c9Kp6i/LVgQNDNC/qzrCnh1SAyZvqmZqAjTdn3aoItz+VHjoZilo78198JAdRuid5lQ');
    expect(hashFormat(hash!)).toBe('firebase-scrypt');
    expect(firebaseHash(FIREBASE, 'not base64!', 'aGFzaA==')).toBeUndefined();
    // An empty salt or separator is Firebase's; an empty hash or signer key is no hash.
    expect(firebaseHash({ ...FIREBASE, saltSeparator: '' }, '', ' aGFzaA== ')).toBe(`$firebase-scrypt$rounds=8,mem=14,sep=,key=${FIREBASE.hashKey.replace(/=+$/, '')}$$aGFzaA`);
    expect(firebaseHash(FIREBASE, 'c2FsdA==', '')).toBeUndefined();
    expect(firebaseHash({ ...FIREBASE, hashKey: '' }, 'c2FsdA==', 'aGFzaA==')).toBeUndefined();
    expect(firebaseHash({ ...FIREBASE, saltSeparator: 'B' }, 'c2FsdA==', 'aGFzaA==')).toBeUndefined();
  });

  it('reads standard base64, padded or not, trimmed; refuses a length of 1 modulo 4, padding without data or in excess, and other alphabets', () => {
    const accepted = { '': '', QQ: 'QQ', 'QQ==': 'QQ==', QUI: 'QUI', 'QUI=': 'QUI=', QUJD: 'QUJD', ' QUJD\n': 'QUJD', 'QUJDRA==': 'QUJDRA==', 'ab+/Zz09': 'ab+/Zz09' };
    for (const [value, read] of Object.entries(accepted)) expect(standardBase64(value), JSON.stringify(value)).toBe(read);
    for (const value of ['Q', 'QUJDR', '==', '=', 'QQ=', 'QQ===', 'QUI==', 'QUJD=', 'QUJD==', 'Q-_x', 'QUJD QUJD', 'QU=D', 'QUJD\u0000']) {
      expect(standardBase64(value), JSON.stringify(value)).toBeUndefined();
    }
  });
});

describe('csv', () => {
  it('reads the docs\' table: quoted fields, defaults, refusals with their line', () => {
    const parsed = read(docsBlock('migrating', 'users-csv'), 'csv');
    expect(rows(parsed).map((r) => [r.email, r.plan, r.isActive, r.emailVerifiedAt, r.createdAt, r.externalId, r.passwordHash?.slice(0, 10) ?? null])).toEqual([
      ['ada@example.com', 'pro', true, '2023-04-01T10:00:00.000Z', '2023-04-01T10:00:00.000Z', 'cust_1001', '$2b$10$SoU'],
      ['grace@example.com', 'free', true, '2023-05-12T08:30:00.000Z', '2023-05-12T08:30:00.000Z', 'cust_1002', '$argon2id$'],
      ['linus@example.com', 'free', true, null, '2024-01-15T00:00:00.000Z', 'cust_1003', 'pbkdf2_sha'],
      ['margaret@example.com', 'premium', false, expect.any(String), null, 'cust_1004', null],
    ]);
    expect(refusals(parsed)).toEqual([
      [6, 'email is not a single mailbox the gateway accepts (CONTRACT §19)'],
      [7, 'password_hash: unknown hash format (docs/password-hashes.md lists the known ones)'],
    ]);
  });

  it('refuses what is malformed, line by line, and a header without email as a whole', () => {
    const text = 'email,plan,is_active,created_at,external_id\r\n'
      + '"a,b"@x.test,free,,,\r\n' // a quoted comma in a local part: no single mailbox
      + 'b@x.test,gold,,,\n'
      + 'c@x.test,free,maybe,,\n'
      + 'd@x.test,free,,yesterday,\n'
      + 'e@x.test,free,,,has space\n'
      + 'f@x.test,free\n'
      + '"g@x.test","free","false","2020-02-02T02:02:02+02:00","multi\nline"\n'
      + '\n';
    expect(refusals(read(text, 'csv'))).toEqual([
      [2, 'email is not a single mailbox the gateway accepts (CONTRACT §19)'],
      [3, 'unknown plan "gold": expected one of free, premium, pro'],
      [4, 'is_active: expected true or false'],
      [5, 'created_at: expected an ISO 8601 time such as 2024-01-15T10:30:00Z'],
      [6, 'external_id: expected 1 to 255 printable ASCII characters without spaces'],
      [7, 'expected 5 fields as the header row has, found 2'],
      [8, 'external_id: expected 1 to 255 printable ASCII characters without spaces'],
    ]);
    expect(() => read('mail,plan\na@x.test,free\n', 'csv')).toThrow(ImportFileError);
    expect(refusals(read('email,pasword_hash\na@x.test,x\n', 'csv')))
      .toEqual([[2, 'unknown field "pasword_hash": expected email, password_hash, email_verified, plan, is_active, created_at, external_id, email_verified_at']]);
  });

  it('an empty file holds no records; a header that is unreadable or has no email column stops the import, saying why', () => {
    expect(read('', 'csv')).toEqual([]);
    expect(read('', 'auth0')).toEqual([]);
    expect(fileError('"email,plan\na@x.test,free\n', 'csv')).toBe('line 1: a quoted field is never closed');
    expect(fileError('mail,plan\na@x.test,free\n', 'csv')).toBe('the header row has no email column');
  });

  it('reads header names without their spaces, and refuses a row whose quote never closes at the line it starts on', () => {
    expect(read(' email , plan \na@x.test,pro\n"b@x.test,free\nc@x.test,free\n', 'csv')).toEqual([
      account(2, 'a@x.test', { plan: 'pro' }),
      { line: 3, reason: 'a quoted field is never closed' },
    ]);
  });
});

describe('json lines', () => {
  it('reads the contract\'s fields, JSON booleans, and refuses lines that are not objects', () => {
    const text = `{"email":" Ada@Example.com ","password_hash":"${BCRYPT}","email_verified":true,"plan":"pro","is_active":false,`
      + '"created_at":"2023-04-01T10:00:00Z","external_id":42}\n\nnot json\n[1]\n{"plan":"pro"}\n';
    const parsed = read(text, 'json');
    expect(rows(parsed)).toEqual([{
      email: 'ada@example.com', passwordHash: BCRYPT, emailVerifiedAt: '2023-04-01T10:00:00.000Z', plan: 'pro', isActive: false, createdAt: '2023-04-01T10:00:00.000Z', externalId: '42',
    }]);
    expect(refusals(parsed)).toEqual([[3, 'not JSON'], [4, 'not a JSON object'], [5, 'email is required']]);
  });

  it('JSON values of the wrong kind are each refused with the field\'s name; text flags are read trimmed, in any case', () => {
    const lines = [
      { email: 'a@example.com', is_active: 1 }, { email: 'b@example.com', email_verified: 'yes' }, { email: 'c@example.com', plan: { name: 'pro' } },
      { email: 'd@example.com', external_id: 4.5 }, { email: 'e@example.com', password_hash: ['x'] }, { email: 'f@example.com', external_id: 2 ** 53 },
      { email: 'g@example.com', is_active: ' FALSE ', email_verified: ' True ', created_at: '2023-04-01T10:00:00Z' },
    ];
    const parsed = read(lines.map((l) => JSON.stringify(l)).join('\n'), 'json');
    expect(refusals(parsed)).toEqual([
      [1, 'is_active: expected true or false'], [2, 'email_verified: expected true or false'], [3, 'plan: expected text'],
      [4, 'external_id: expected text'], [5, 'password_hash: expected text'], [6, 'external_id: expected text'],
    ]);
    expect(rows(parsed)).toEqual([expect.objectContaining({ email: 'g@example.com', isActive: false, emailVerifiedAt: '2023-04-01T10:00:00.000Z' })]);
  });
});

describe('exports', () => {
  it('auth0: the bulk export\'s and support\'s shapes, blocked users inactive', () => {
    const parsed = read(docsBlock('migrating', 'auth0-export'), 'auth0');
    expect(refusals(parsed)).toEqual([]);
    expect(rows(parsed).map((r) => [r.email, r.externalId, r.emailVerifiedAt, r.isActive, r.passwordHash?.slice(0, 7) ?? null])).toEqual([
      ['alan@example.com', 'auth0|64b7f0c2a1d3e5f7a9b1c3d5', '2023-04-01T10:00:00.000Z', true, '$2b$10$'],
      ['katherine@example.com', '64b7f0c2a1d3e5f7a9b1c3d6', null, true, '$2b$10$'],
      ['dennis@example.com', 'google-oauth2|104729384756102938475', '2024-02-02T12:00:00.000Z', false, null],
    ]);
    const array = read(`[{"user_id":"auth0|1","email":"x@x.test","custom_password_hash":{"algorithm":"bcrypt","hash":{"value":"${BCRYPT}"}}}]`, 'auth0');
    expect(rows(array)).toEqual([expect.objectContaining({ email: 'x@x.test', externalId: 'auth0|1', passwordHash: BCRYPT })]);
  });

  it('auth0: a JSON array after blank space, numbered by position; elements that are not objects refused; null or hashless ids and hashes read as none', () => {
    const elements = [
      { email: 'a@x.test', user_id: 'auth0|1' }, null, 1, [2], 'b@x.test',
      { email: 'c@x.test', _id: null, custom_password_hash: null },
      { email: 'd@x.test', _id: { $oid: 'd1' }, custom_password_hash: { algorithm: 'bcrypt' } },
    ];
    expect(read(`\n  ${JSON.stringify(elements)}\n`, 'auth0')).toEqual([
      account(1, 'a@x.test', { externalId: 'auth0|1' }),
      { line: 2, reason: 'not a JSON object' }, { line: 3, reason: 'not a JSON object' }, { line: 4, reason: 'not a JSON object' }, { line: 5, reason: 'not a JSON object' },
      account(6, 'c@x.test'),
      account(7, 'd@x.test', { externalId: 'd1' }),
    ]);
    expect(fileError('[{"email":"a@x.test"},\n', 'auth0')).toBe('not JSON (a file starting with [ is read as one JSON array)');
  });

  // Auth0's bulk export job writes CSV when asked (format: csv): its booleans are the text true or
  // false, in whatever case a spreadsheet left them.
  it('auth0: the bulk export as CSV, blocked and email_verified read from their text', () => {
    const csv = [
      'user_id,email,email_verified,blocked,created_at',
      'auth0|1,blocked@example.com,true,true,2023-04-01T10:00:00.000Z',
      'auth0|2,shouting@example.com,TRUE, TRUE ,2023-04-01T10:00:00.000Z',
      'auth0|3,active@example.com,false,false,2023-04-01T10:00:00.000Z',
      'auth0|4,empty@example.com,,,2023-04-01T10:00:00.000Z',
    ].join('\n');
    const parsed = read(csv, 'auth0');
    expect(refusals(parsed)).toEqual([]);
    expect(rows(parsed).map((r) => [r.email, r.externalId, r.emailVerifiedAt, r.isActive])).toEqual([
      ['blocked@example.com', 'auth0|1', '2023-04-01T10:00:00.000Z', false],
      ['shouting@example.com', 'auth0|2', '2023-04-01T10:00:00.000Z', false],
      ['active@example.com', 'auth0|3', null, true],
      ['empty@example.com', 'auth0|4', null, true],
    ]);
  });

  it('supabase: auth.users as CSV or JSON lines; confirmation time kept, running bans inactive', () => {
    const parsed = read(docsBlock('migrating', 'supabase-export'), 'supabase');
    expect(refusals(parsed)).toEqual([]);
    expect(rows(parsed).map((r) => [r.email, r.externalId, r.emailVerifiedAt, r.createdAt, r.isActive, r.passwordHash?.slice(0, 7) ?? null])).toEqual([
      ['ken@example.com', '7d0c5a52-3f3e-4b8e-9a43-0c3b8f0e2d11', '2023-04-01T10:05:00.123Z', '2023-04-01T10:00:00.123Z', true, '$2a$10$'],
      ['frances@example.com', '0b6f6c4e-8f0a-4a57-b3c4-2d5e6f708192', '2023-05-12T08:31:00.000Z', '2023-05-12T08:30:00.000Z', true, null],
      ['edsger@example.com', 'f3a1e2d3-4c5b-4d6e-8f70-8192a3b4c5d6', null, '2024-01-15T09:00:00.000Z', false, '$2a$10$'],
    ]);
    const lines = read('{"id":"u1","email":"x@x.test","encrypted_password":"","email_confirmed_at":null,"banned_until":"2020-01-01T00:00:00Z"}\n', 'supabase');
    expect(rows(lines)).toEqual([expect.objectContaining({ email: 'x@x.test', externalId: 'u1', passwordHash: null, isActive: true, emailVerifiedAt: null })]);
  });

  // Postgres writes a timestamptz as `2020-01-01 00:00:00+00` (psql, \\copy, the SQL editor's
  // download), which new Date() cannot read, and a ban for ever as `infinity`; a JSON export may
  // hold ISO 8601. `now` is 2026-01-01.
  it('supabase: banned_until read as Postgres and ISO 8601 write it; an ended ban is active, a running one inactive, an unreadable one refused', () => {
    const csv = ['id,email,banned_until', ...[
      '2020-01-01 00:00:00+00', '2020-01-01T00:00:00Z', '2025-12-31 23:59:59.999999+00', '2026-01-01 01:00:00+02', '2025-12-31 18:00:00-05',
      '2999-01-01 00:00:00+00', '2999-01-01T00:00:00Z', '2026-01-01 00:00:01+00', '2025-12-31 20:00:00-05:30', 'infinity', '-infinity', 'soon',
    ].map((until, i) => `u${i},u${i}@example.com,${until}`)].join('\n');
    const parsed = read(csv, 'supabase');
    expect(rows(parsed).map((r) => [r.externalId, r.isActive])).toEqual([
      ['u0', true], ['u1', true], ['u2', true], ['u3', true], ['u4', true],
      ['u5', false], ['u6', false], ['u7', false], ['u8', false], ['u9', false], ['u10', true],
    ]);
    expect(refusals(parsed)).toEqual([[13, 'banned_until: expected an ISO 8601 time such as 2024-01-15T10:30:00Z']]);
  });

  it('supabase: infinity in any case and spacing, a ban ending exactly now ended; a JSON null no ban, a number refused with the email it had', () => {
    const csv = ['id,email,banned_until', ...['Infinity', ' INFINITY ', '-Infinity', ' -infinity', '2026-01-01 00:00:00+00'].map((until, i) => `u${i},u${i}@x.test,${until}`)].join('\n');
    expect(rows(read(csv, 'supabase')).map((r) => [r.externalId, r.isActive])).toEqual([['u0', false], ['u1', false], ['u2', true], ['u3', true], ['u4', true]]);
    const lines = [
      { id: 'j1', email: 'j1@x.test', banned_until: null },
      { id: 'j2', email: 'j2@x.test', banned_until: 1767225600000 },
      { id: 'j3', email: 42, banned_until: 'soon' },
    ].map((u) => JSON.stringify(u)).join('\n');
    const reason = 'banned_until: expected an ISO 8601 time such as 2024-01-15T10:30:00Z';
    expect(read(lines, 'supabase')).toEqual([account(1, 'j1@x.test', { externalId: 'j1' }), { line: 2, email: 'j2@x.test', reason }, { line: 3, reason }]);
  });

  it('firebase: auth:export\'s JSON, the hash with the project\'s parameters, a user without email refused', () => {
    const parsed = read(docsBlock('migrating', 'firebase-export'), 'firebase');
    expect(refusals(parsed)).toEqual([[3, 'email is required']]);
    expect(rows(parsed)).toEqual([
      {
        email: 'hedy@example.com', emailVerifiedAt: '2023-04-01T10:00:00.000Z', createdAt: '2023-04-01T10:00:00.000Z', plan: 'free', isActive: true, externalId: 'Ka0kjXHVcjUqzXx3Dz8PnHXJV0F2',
        passwordHash: '$firebase-scrypt$rounds=8,mem=14,sep=Bw,key=jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA'
          + '$42xEC+ixf3L2lw$lSrfV15cpx95/sZS2W9c9Kp6i/LVgQNDNC/qzrCnh1SAyZvqmZqAjTdn3aoItz+VHjoZilo78198JAdRuid5lQ',
      },
      { email: 'radia@example.com', emailVerifiedAt: null, createdAt: '2023-05-12T08:30:00.000Z', plan: 'free', isActive: false, externalId: 'pX3bQ9sW2vYkL8mN4rT6uH1jG5fD', passwordHash: null },
    ]);
    expect(() => read('{"accounts": []}', 'firebase')).toThrow(ImportFileError);
    expect(refusals(read('{"users":[{"email":"x@x.test","passwordHash":"%%%","salt":"c2FsdA=="},{"email":"y@x.test","createdAt":"soon"}]}', 'firebase')))
      .toEqual([[1, 'passwordHash and salt: expected standard base64'], [2, 'createdAt: expected epoch milliseconds']]);
  });

  it('firebase: a file that is not JSON, or whose users are no array, is refused whole with its reason', () => {
    expect(fileError('users: []', 'firebase')).toBe('not JSON: expected the file `firebase auth:export FILE --format=json` writes');
    expect(fileError('null', 'firebase')).toBe('no "users" array: expected the file `firebase auth:export FILE --format=json` writes');
    expect(fileError('{"users":{}}', 'firebase')).toBe('no "users" array: expected the file `firebase auth:export FILE --format=json` writes');
  });

  it('firebase: users numbered by position, those not objects refused; createdAt epoch milliseconds from 0 as a number or text, else refused', () => {
    const hash = 'lSrfV15cpx95/sZS2W9c9Kp6i/LVgQNDNC/qzrCnh1SAyZvqmZqAjTdn3aoItz+VHjoZilo78198JAdRuid5lQ==';
    const users = [
      null, 1,
      { email: 'a@x.test', createdAt: 1680343200000 }, { email: 'b@x.test', createdAt: '0' }, { email: 'c@x.test' }, { email: 'd@x.test', passwordHash: '' },
      { email: 'e@x.test', createdAt: '-1' }, { email: 'f@x.test', createdAt: '1.5' }, { email: 'g@x.test', createdAt: true }, { email: 'h@x.test', createdAt: null },
      { email: 42, createdAt: 'soon' },
      { email: 'i@x.test', passwordHash: hash }, // no salt: the hash string has an empty one, which no login reads
    ];
    const epoch = 'createdAt: expected epoch milliseconds';
    expect(read(JSON.stringify({ users }), 'firebase')).toEqual([
      { line: 1, reason: 'not a JSON object' }, { line: 2, reason: 'not a JSON object' },
      account(3, 'a@x.test', { createdAt: '2023-04-01T10:00:00.000Z' }), account(4, 'b@x.test', { createdAt: '1970-01-01T00:00:00.000Z' }), account(5, 'c@x.test'), account(6, 'd@x.test'),
      { line: 7, email: 'e@x.test', reason: epoch }, { line: 8, email: 'f@x.test', reason: epoch }, { line: 9, email: 'g@x.test', reason: epoch }, { line: 10, email: 'h@x.test', reason: epoch },
      { line: 11, reason: epoch },
      { line: 12, email: 'i@x.test', reason: 'password_hash: unknown hash format (docs/password-hashes.md lists the known ones)' },
    ]);
  });
});
