// The imported hash formats of CONTRACT §27, each against a vector its own system made (or its
// algorithm computed independently by node:crypto), and its near misses. Pure: in-process
// derivations, no gateway (importedHashes.http.test.ts signs in with them); then what a check
// costs through an instance's hasher child.
import { pbkdf2Sync, scryptSync } from 'node:crypto';
import argon2 from 'argon2';
import bcrypt from 'bcryptjs';
import { afterAll, describe, expect, it } from 'vitest';
import { HasherProcess, type HashJob, type KdfJob } from '../../src/auth/password/hasher.js';
import { firebaseScryptHash, hashCost, hashCostClass, importedHashFormat, recognisedHashFormat, verifyImportedHash } from '../../src/auth/password/importedHashes.js';
import { isNativeHash, needsRehash, Passwords } from '../../src/auth/password/passwords.js';

const SALT = Buffer.from('0123456789abcdef');
const phc = (bytes: Buffer) => bytes.toString('base64').replace(/=+$/, '');
const passlib = (bytes: Buffer) => phc(bytes).replaceAll('+', '.');

// Firebase's published example (github.com/firebase/scrypt, README): the project's parameters,
// one exported user's salt and hash, and the password they were made from.
const FIREBASE = {
  signerKey: 'jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA==',
  saltSeparator: 'Bw==',
  rounds: 8,
  memCost: 14,
  salt: '42xEC+ixf3L2lw==',
  hash: 'lSrfV15cpx95/sZS2W9c9Kp6i/LVgQNDNC/qzrCnh1SAyZvqmZqAjTdn3aoItz+VHjoZilo78198JAdRuid5lQ==',
  password: 'user1password',
};
const unpadded = (b64: string) => b64.replace(/=+$/, '');
/** The string the importer stores for a Firebase user (CONTRACT §27, its agreed form). */
const firebaseStored = (f: typeof FIREBASE) =>
  `$firebase-scrypt$rounds=${f.rounds},mem=${f.memCost},sep=${unpadded(f.saltSeparator)},key=${unpadded(f.signerKey)}$${unpadded(f.salt)}$${unpadded(f.hash)}`;

const pbkdf2 = (password: string, iterations: number) => pbkdf2Sync(password, SALT, iterations, 32, 'sha256');
const scrypt = (password: string, ln: number) => scryptSync(password, SALT, 32, { N: 2 ** ln, r: 8, p: 1 });

/** Every format: a stored hash, the password it was made from, and its format's name. */
const VECTORS: Array<[string, string, string, string]> = [
  // PHP's manual, password_verify(): bcrypt as PHP writes it ($2y$), cost 10.
  ['bcrypt $2y$ (PHP manual)', '$2y$10$.vGA1O9wmRjrwAVXD98HNOgsNpDczlqm3Jq7KnEd1rVAGv3Fykk1a', 'rasmuslerdorf', 'bcrypt'],
  ['bcrypt $2b$ (bcryptjs)', bcrypt.hashSync('bcrypt b password', 4), 'bcrypt b password', 'bcrypt'],
  ['bcrypt $2a$', bcrypt.hashSync('bcrypt a password', 4).replace(/^\$2b\$/, '$2a$'), 'bcrypt a password', 'bcrypt'],
  // passlib's documentation, pbkdf2_sha256.hash("toomanysecrets"): its base64 with '.' for '+'.
  ['PBKDF2 passlib (passlib docs)', '$pbkdf2-sha256$29000$N2YMIWQsBWBMae09x1jrPQ$1t8iyB2A.WF/Z5JZv.lfCIhXXN33N23OSgQYThBYRfk', 'toomanysecrets', 'pbkdf2-sha256'],
  ['PBKDF2 PHC i=', `$pbkdf2-sha256$i=1000$${phc(SALT)}$${phc(pbkdf2('pbkdf2 phc', 1000))}`, 'pbkdf2 phc', 'pbkdf2-sha256'],
  ['PBKDF2 PHC i=,l=', `$pbkdf2-sha256$i=1000,l=32$${passlib(SALT)}$${passlib(pbkdf2('pbkdf2 ab64', 1000))}`, 'pbkdf2 ab64', 'pbkdf2-sha256'],
  // Django's own test (test_hashers.py, Django 3.2's iteration count).
  ['Django (Django tests)', 'pbkdf2_sha256$260000$seasalt$YlZ2Vggtqdc61YjArZuoApoBh9JNGYoDRBUGu6tcJQo=', 'lètmein', 'django-pbkdf2-sha256'],
  ['scrypt PHC', `$scrypt$ln=10,r=8,p=1$${phc(SALT)}$${phc(scrypt('scrypt phc', 10))}`, 'scrypt phc', 'scrypt'],
  ['scrypt passlib base64', `$scrypt$ln=10,r=8,p=1$${passlib(SALT)}$${passlib(scrypt('scrypt ab64', 10))}`, 'scrypt ab64', 'scrypt'],
  ['Firebase scrypt (Firebase README)', firebaseStored(FIREBASE), FIREBASE.password, 'firebase-scrypt'],
];

describe('imported password hashes: each format verifies its own vector', () => {
  it.each(VECTORS)('%s', async (_name, stored, password, format) => {
    expect(importedHashFormat(stored)).toBe(format);
    expect(await verifyImportedHash(stored, password)).toBe(true);
    expect(await verifyImportedHash(stored, `${password}x`)).toBe(false);
    expect(await verifyImportedHash(stored, password.slice(1))).toBe(false);
    expect(await verifyImportedHash(stored, '')).toBe(false);
  });

  it('Firebase: the importer\'s helper writes the agreed form, padding or not', () => {
    const { password: _password, memCost, ...values } = FIREBASE;
    expect(firebaseScryptHash({ ...values, memCost })).toBe(firebaseStored(FIREBASE));
    expect(firebaseScryptHash({ ...values, memCost, signerKey: unpadded(FIREBASE.signerKey), salt: unpadded(FIREBASE.salt) })).toBe(firebaseStored(FIREBASE));
  });

  it('argon2id and argon2i of another system (PHC, their own parameters)', async () => {
    for (const type of [argon2.argon2id, argon2.argon2i]) {
      const stored = await argon2.hash('argon2 import', { type, memoryCost: 4096, timeCost: 3, parallelism: 2 });
      expect(importedHashFormat(stored)).toBe('argon2');
      expect(await verifyImportedHash(stored, 'argon2 import')).toBe(true);
      expect(await verifyImportedHash(stored, 'argon2 imporT')).toBe(false);
    }
  });
});

/** A character of the part after the last '$' changed: the same shape, another hash. */
function oneCharOff(stored: string): string {
  const i = stored.length - 5;
  return stored.slice(0, i) + (stored[i] === 'A' ? 'B' : 'A') + stored.slice(i + 1);
}

describe('imported password hashes: near misses fail', () => {
  it.each(VECTORS)('%s, one character of the hash off', async (_name, stored, password) => {
    expect(await verifyImportedHash(oneCharOff(stored), password)).toBe(false);
  });

  it('Firebase: another signer key, salt separator, salt, rounds or memory cost', async () => {
    const variants = [
      { ...FIREBASE, signerKey: `${FIREBASE.signerKey.slice(0, -4)}AAA=` },
      { ...FIREBASE, saltSeparator: 'CA==' },
      { ...FIREBASE, salt: '42xEC+ixf3L2lA==' },
      { ...FIREBASE, rounds: 7 },
      { ...FIREBASE, memCost: 13 },
    ];
    for (const variant of variants) expect(await verifyImportedHash(firebaseStored(variant), FIREBASE.password)).toBe(false);
  });
});

describe('imported password hashes: unknown, malformed and absurd hashes are no hash (a failed check, never a throw)', () => {
  const valid = (ln: number) => `$scrypt$ln=${ln},r=8,p=1$${phc(SALT)}$${phc(scrypt('x', 10))}`;
  const refused: Array<[string, string]> = [
    ['empty', ''],
    ['plain text', 'hunter2'],
    ['MD5 crypt', '$1$saltsalt$qjXMvbEw8oaL.CzflDugX/'],
    ['unknown PHC', '$sha512$rounds=5000$abc$def'],
    ['bcrypt truncated', '$2b$04$abcdefghijklmnopqrstuv'],
    ['bcrypt cost 31', `$2b$31$${'a'.repeat(53)}`],
    ['scrypt N = 2^40', valid(40)],
    ['scrypt 1 GiB (N = 2^20, r = 8)', valid(20)],
    ['scrypt p = 10000', `$scrypt$ln=10,r=8,p=10000$${phc(SALT)}$${phc(scrypt('x', 10))}`],
    ['scrypt r = 64', `$scrypt$ln=4,r=64,p=1$${phc(SALT)}$${phc(scrypt('x', 10))}`],
    ['scrypt ln = 0 (N = 1)', valid(0)],
    ['scrypt missing r', `$scrypt$ln=10,p=1$${phc(SALT)}$${phc(scrypt('x', 10))}`],
    ['scrypt unknown parameter', `$scrypt$ln=10,r=8,p=1,x=1$${phc(SALT)}$${phc(scrypt('x', 10))}`],
    ['scrypt salt not base64', `$scrypt$ln=10,r=8,p=1$sa*lt$${phc(scrypt('x', 10))}`],
    ['PBKDF2 a billion iterations', `$pbkdf2-sha256$1000000000$${phc(SALT)}$${phc(pbkdf2('x', 1))}`],
    ['PBKDF2 0 iterations', `$pbkdf2-sha256$i=0$${phc(SALT)}$${phc(pbkdf2('x', 1))}`],
    ['PBKDF2 hash too short', `$pbkdf2-sha256$i=1000$${phc(SALT)}$AAAA`],
    ['Django 4 billion iterations', 'pbkdf2_sha256$4000000000$seasalt$YlZ2Vggtqdc61YjArZuoApoBh9JNGYoDRBUGu6tcJQo='],
    ['Django hash not base64', 'pbkdf2_sha256$260000$seasalt$Yl*Z2Vggtqdc61YjArZuoApoBh9JNGYoDRBUGu6tcJQo='],
    ['Firebase mem 20', firebaseStored({ ...FIREBASE, memCost: 20 })],
    ['Firebase rounds 0', firebaseStored({ ...FIREBASE, rounds: 0 })],
    ['Firebase padded base64', firebaseStored(FIREBASE).replace(/\$([^$]+)$/, '$$$1==')],
    ['Firebase parameter missing', firebaseStored(FIREBASE).replace(/,sep=[^,]+/, '')],
    ['argon2 4 GiB', '$argon2id$v=19$m=4194304,t=2,p=1$c29tZXNhbHQ$RdescudvJCsgt3ub+b+dWRWJTmaaJObG'],
    ['argon2d (not listed)', '$argon2d$v=19$m=4096,t=3,p=1$c29tZXNhbHQ$RdescudvJCsgt3ub+b+dWRWJTmaaJObG'],
  ];
  it.each(refused)('%s', async (_name, stored) => {
    const jobs: KdfJob[] = [];
    const run = async (job: KdfJob) => { jobs.push(job); return true; };
    expect(importedHashFormat(stored)).toBeUndefined();
    expect(await verifyImportedHash(stored, 'x', run)).toBe(false);
    // Refused before any derivation: an absurd row costs nothing to check.
    expect(jobs).toEqual([]);
  });

  it('a derivation that fails is a mismatch, not a throw', async () => {
    const stored = VECTORS.find(([, , , format]) => format === 'scrypt')![1];
    expect(await verifyImportedHash(stored, 'scrypt phc', () => Promise.reject(new Error('hasher gone')))).toBe(false);
  });
});

describe('imported password hashes: each part of each format, alone at fault or at its bound', () => {
  const bytes = (n: number) => Buffer.alloc(n, 7);
  const P = (rounds: string, salt = phc(SALT), hash = phc(pbkdf2('x', 1000))) => `$pbkdf2-sha256$${rounds}$${salt}$${hash}`;
  const S = (params: string, salt = phc(SALT), hash = phc(scrypt('x', 10))) => `$scrypt$${params}$${salt}$${hash}`;
  const D = (hash: string) => `pbkdf2_sha256$260000$seasalt$${hash}`;
  const A = (params: string) => `$argon2id$v=19$${params}$c29tZXNhbHQ$RdescudvJCsgt3ub+b+dWRWJTmaaJObG`;
  const KEY = unpadded(FIREBASE.signerKey);
  const F = (params: string, salt = unpadded(FIREBASE.salt), hash = unpadded(FIREBASE.hash)) => `$firebase-scrypt$${params}$${salt}$${hash}`;
  const fp = (sep = 'Bw', key = KEY, rounds = '8', mem = '14') => `rounds=${rounds},mem=${mem},sep=${sep},key=${key}`;
  // One character outside base64's alphabet before or after a field (of a length base64 can have
  // then): read past, the rest would decode to the same bytes.
  const badFirst = (b64: string) => `*${b64}`;
  const badLast = (b64: string) => `${b64}*`;
  /** A Firebase hash of fields of about 1,000 bytes, its salt and separator sized to make it `length` characters long. */
  const firebaseOfLength = (length: number) => {
    const key = phc(bytes(1000));
    for (let salt = 998; salt <= 1000; salt++) {
      for (let n = 1; n <= 100; n++) {
        const stored = F(fp(phc(bytes(n)), key), phc(bytes(salt)), key);
        if (stored.length === length) return stored;
      }
    }
    throw new Error(`no Firebase hash of ${length} characters`);
  };

  // [what is at fault, the hash, what recognisedHashFormat (the shape alone, no bounds) says]
  const faults: Array<[string, string, string | undefined]> = [
    ['bcrypt: a character after its 53', `${VECTORS[0]![1]}x`, undefined],
    ['argon2: a character after the digest', `${A('m=65536,t=3,p=4')}*`, undefined],
    ['Django: a character after the hash', `${D(VECTORS[6]![1].split('$')[3]!)}*`, undefined],
    ['Django: a hash of 45 base64 characters', D('A'.repeat(45)), undefined],
    ['Django: a hash of 45 base64 characters, padded', D(`${'A'.repeat(45)}==`), undefined],
    ['PBKDF2: rounds neither a number nor i=', P('x'), undefined],
    ['PBKDF2: rounds a number, then more', P('1000x'), undefined],
    ['PBKDF2: i= without a number', P('i='), undefined],
    ['PBKDF2: a field after the hash', `${P('i=1000')}$AAAA`, undefined],
    ['PBKDF2: no hash', `$pbkdf2-sha256$i=1000$${phc(SALT)}`, undefined],
    ['PBKDF2: a salt of 5 characters', P('i=1000', 'AAAAA'), undefined],
    ['PBKDF2: the salt\'s first character', P('i=1000', badFirst(phc(SALT))), undefined],
    ['PBKDF2: the salt\'s last character', P('i=1000', badLast(phc(SALT))), undefined],
    ['PBKDF2: the hash\'s first character', P('i=1000', phc(SALT), badFirst(phc(pbkdf2('x', 1000)))), undefined],
    ['PBKDF2: the hash\'s last character', P('i=1000', phc(SALT), badLast(phc(pbkdf2('x', 1000)))), undefined],
    ['scrypt: a parameter with two values', S('ln=10=1,r=8,p=1'), undefined],
    ['scrypt: a parameter without a name', S('=10,r=8,p=1'), undefined],
    ['scrypt: a parameter that is no number', S('ln=x,r=8,p=1'), undefined],
    ['scrypt: a parameter\'s number after a letter', S('ln=x10,r=8,p=1'), undefined],
    ['scrypt: a parameter\'s number before a letter', S('ln=10x,r=8,p=1'), undefined],
    ['scrypt: a field after the hash', `${S('ln=10,r=8,p=1')}$AAAA`, undefined],
    ['scrypt: a parameter twice', S('ln=10,ln=10,r=8,p=1'), undefined],
    ['scrypt: p missing', S('ln=10,r=8'), undefined],
    ['scrypt: no hash', `$scrypt$ln=10,r=8,p=1$${phc(SALT)}`, undefined],
    ['scrypt: the salt\'s first character', S('ln=10,r=8,p=1', badFirst(phc(SALT))), undefined],
    ['scrypt: the salt\'s last character', S('ln=10,r=8,p=1', badLast(phc(SALT))), undefined],
    ['Firebase: the salt\'s first character', F(fp(), badFirst(unpadded(FIREBASE.salt))), undefined],
    ['Firebase: the salt\'s last character', F(fp(), badLast(unpadded(FIREBASE.salt))), undefined],
    ['Firebase: the hash\'s first character', F(fp(), undefined, badFirst(unpadded(FIREBASE.hash))), undefined],
    ['Firebase: the hash\'s last character', F(fp(), undefined, badLast(unpadded(FIREBASE.hash))), undefined],
    ['Firebase: the separator\'s first character', F(fp('*w')), undefined],
    ['Firebase: the separator\'s last character', F(fp('B*')), undefined],
    ['Firebase: the key\'s first character', F(fp('Bw', badFirst(KEY))), undefined],
    ['Firebase: the key\'s last character', F(fp('Bw', badLast(KEY))), undefined],
    ['Firebase: a hash one byte shorter than the key', F(fp(), undefined, phc(bytes(63))), undefined],
    ['Firebase: a field after the hash', `${F(fp())}$AAAA`, undefined],
    ['Firebase: a parameter twice', F(`${fp()},rounds=8`), undefined],
    // 'sepB': without its '=', read as a name of all but its last character and a value of all of it, it would be a separator.
    ['Firebase: a parameter without =', F(fp().replace('sep=Bw', 'sepB')), undefined],
    ['Firebase: a fifth parameter', F(`${fp()},x=1`), undefined],
    ['Firebase: rounds no number', F(fp('Bw', KEY, 'x')), undefined],
    ['Firebase: mem no number', F(fp('Bw', KEY, '8', 'x')), undefined],
    // Well formed, beyond a bound: recognised by the import (its own refusal), checked by no login.
    ['scrypt: 512 MiB (N = 2^19, r = 8), its work at the bound', S('ln=19,r=8,p=1'), 'scrypt'],
    ['scrypt: work 2^23 in 128 MiB (N = 2^17, r = 8, p = 8)', S('ln=17,r=8,p=8'), 'scrypt'],
    ['scrypt: a hash of 8 bytes', S('ln=10,r=8,p=1', phc(SALT), phc(bytes(8))), 'scrypt'],
    ['scrypt: a salt of 1,025 bytes', S('ln=10,r=8,p=1', phc(bytes(1025))), 'scrypt'],
    ['Firebase: rounds 9', firebaseStored({ ...FIREBASE, rounds: 9 }), 'firebase-scrypt'],
    ['Firebase: mem 15', firebaseStored({ ...FIREBASE, memCost: 15 }), 'firebase-scrypt'],
    ['Firebase: a key and hash of 8 bytes', F(fp('Bw', phc(bytes(8))), undefined, phc(bytes(8))), 'firebase-scrypt'],
    ['Firebase: 4,097 characters', firebaseOfLength(4097), 'firebase-scrypt'],
  ];
  it.each(faults)('%s: no hash a login checks', (_name, stored, recognised) => {
    expect(importedHashFormat(stored)).toBeUndefined();
    expect(recognisedHashFormat(stored)).toBe(recognised);
  });

  const atBounds: Array<[string, string, string]> = [
    ['argon2: t = 16, p = 16', A('m=65536,t=16,p=16'), 'argon2'],
    ['argon2: without v=', '$argon2id$m=65536,t=3,p=4$c29tZXNhbHQ$RdescudvJCsgt3ub+b+dWRWJTmaaJObG', 'argon2'],
    ['Django: a hash of 48 bytes, no padding', D(phc(bytes(48))), 'django-pbkdf2-sha256'],
    ['scrypt: N = 2', S('ln=1,r=8,p=1'), 'scrypt'],
    ['scrypt: 256 MiB (N = 2^18, r = 8)', S('ln=18,r=8,p=1'), 'scrypt'],
    ['scrypt: work 2^22 (N = 2^18, r = 8, p = 2)', S('ln=18,r=8,p=2'), 'scrypt'],
    ['scrypt: a salt of 1,024 bytes', S('ln=10,r=8,p=1', phc(bytes(1024))), 'scrypt'],
    ['Firebase: 4,096 characters', firebaseOfLength(4096), 'firebase-scrypt'],
  ];
  it.each(atBounds)('%s: checked', (_name, stored, format) => {
    expect(importedHashFormat(stored)).toBe(format);
  });

  it('what PBKDF2 and scrypt cost grows with each parameter: iterations, 32-byte blocks of the key, N, r and p', () => {
    const key = (n: number) => P('i=100000', phc(SALT), phc(bytes(n)));
    expect(hashCost(key(32))).toBeCloseTo(0.85);
    expect(hashCost(key(33))).toBeCloseTo(1.7);
    expect(hashCost(key(64))).toBeCloseTo(1.7);
    expect(hashCost(S('ln=14,r=8,p=1'))).toBeCloseTo(1.7);
    expect(hashCost(S('ln=14,r=8,p=2'))).toBeCloseTo(3.4);
    expect(hashCost(S('ln=14,r=16,p=1'))).toBeCloseTo(3.4);
  });
});

describe('cost classes: the dummy a failed login is padded with (CONTRACT §27, §13)', () => {
  const argon2Imported = argon2.hash('argon2 imported', { type: argon2.argon2id, memoryCost: 8192, timeCost: 3, parallelism: 1 });

  it.each(VECTORS)('%s: a dummy of the same format, parameters and length, matching no password', async (_name, stored, password, format) => {
    const cost = hashCostClass(stored)!;
    expect(stored.startsWith(cost.shape)).toBe(true);
    expect(cost.dummy.startsWith(cost.shape)).toBe(true);
    expect(cost.dummy).toHaveLength(stored.length);
    expect(cost.dummy).not.toBe(stored);
    expect(importedHashFormat(cost.dummy)).toBe(format);
    expect(hashCost(cost.dummy)).toBe(cost.work);
    expect(await verifyImportedHash(cost.dummy, password)).toBe(false);
  });

  it('an argon2 hash of other parameters has one too; what no check derives has none', async () => {
    const stored = await argon2Imported;
    const cost = hashCostClass(stored)!;
    expect(cost.shape).toBe('$argon2id$v=19$m=8192,t=3,p=1$');
    expect(cost.work).toBeCloseTo((8192 * 3) / (19_456 * 2));
    expect(await verifyImportedHash(cost.dummy, 'argon2 imported')).toBe(false);
    for (const stored of ['$1$saltsalt$qjXMvbEw8oaL.CzflDugX/', '$2b$31$' + 'A'.repeat(53), 'plain']) expect(hashCostClass(stored)).toBeUndefined();
  });

  it('costs rank the formats: bcrypt doubles with each cost, PBKDF2 grows with its iterations, the gateway\'s argon2id is 1', async () => {
    const bcryptOf = (cost: number) => `$2b$${String(cost).padStart(2, '0')}$${'A'.repeat(53)}`;
    expect(hashCost(bcryptOf(11))! / hashCost(bcryptOf(10))!).toBe(2);
    expect(hashCost(bcryptOf(10))).toBeGreaterThan(1);
    expect(hashCost(bcryptOf(4))).toBeLessThan(0.1);
    expect(hashCost('pbkdf2_sha256$600000$seasalt$YlZ2Vggtqdc61YjArZuoApoBh9JNGYoDRBUGu6tcJQo=')).toBeGreaterThan(hashCost(VECTORS[6]![1])!);
    expect(hashCost(await argon2.hash('x', { type: argon2.argon2id, memoryCost: 19_456, timeCost: 2, parallelism: 1 }))).toBe(1);
  });
});

describe('what a check costs in hasher jobs (the timing rule, CONTRACT §27 and §13)', () => {
  class CountingHasher extends HasherProcess {
    jobs: string[] = [];
    override run(job: HashJob) {
      this.jobs.push(job.op);
      return super.run(job);
    }
  }
  const hasher = new CountingHasher();
  const passwords = new Passwords(hasher);
  afterAll(() => passwords.close());

  async function jobsOf(work: () => Promise<unknown>): Promise<string[]> {
    hasher.jobs = [];
    await work();
    return hasher.jobs;
  }

  it('imported: its own check, then one argon2id verification only when it fails (as an unknown email costs); native: one verification', async () => {
    const native = await passwords.hash('native password');
    await passwords.burnVerification('warms the dummy hash');
    const stored = bcrypt.hashSync('imported password', 4);
    expect(await jobsOf(() => passwords.burnVerification('unknown email'))).toEqual(['verify']);
    expect(await jobsOf(() => passwords.verify(native, 'wrong'))).toEqual(['verify']);
    expect(await jobsOf(() => passwords.verify(stored, 'wrong'))).toEqual(['bcrypt', 'verify']);
    expect(await jobsOf(async () => expect(await passwords.verify(stored, 'imported password')).toBe(true))).toEqual(['bcrypt']);
    // An unknown format derives nothing, and costs what an unknown email does.
    expect(await jobsOf(() => passwords.verify('$1$saltsalt$qjXMvbEw8oaL.CzflDugX/', 'wrong'))).toEqual(['verify']);
  });

  it('while a hash dearer than argon2id is imported, every failure also pays a check of the dearest, but its own kind\'s', async () => {
    const native = await passwords.hash('native password');
    await passwords.burnVerification('warms the dummy hash');
    const dear = bcrypt.hashSync('dear password', 10);
    const cheap = bcrypt.hashSync('cheap password', 4);
    try {
      passwords.dearestImported = hashCostClass(dear);
      expect(passwords.dearestImported?.shape).toBe('$2b$10$');
      expect(await jobsOf(() => passwords.burnVerification('unknown email'))).toEqual(['verify', 'bcrypt']);
      expect(await jobsOf(() => passwords.verify(native, 'wrong'))).toEqual(['verify', 'bcrypt']);
      expect(await jobsOf(() => passwords.verify(dear, 'wrong'))).toEqual(['bcrypt', 'verify']);
      // Cheap imported: its own check is next to nothing, so it pays both dummies, as an unknown email does.
      expect(await jobsOf(() => passwords.verify(cheap, 'wrong'))).toEqual(['bcrypt', 'verify', 'bcrypt']);
      // Success costs no padding, whoever it is.
      expect(await jobsOf(async () => expect(await passwords.verify(dear, 'dear password')).toBe(true))).toEqual(['bcrypt']);
      expect(await jobsOf(async () => expect(await passwords.verify(native, 'native password')).toBe(true))).toEqual(['verify']);
      // A dearest no dearer than argon2id changes nothing.
      passwords.dearestImported = hashCostClass(cheap);
      expect(passwords.dearestImported).toBeUndefined();
      expect(await jobsOf(() => passwords.burnVerification('unknown email'))).toEqual(['verify']);
    } finally {
      passwords.dearestImported = undefined;
    }
  });

  it('only the gateway\'s own argon2id with today\'s parameters is native; every other matched hash is rehashed', async () => {
    expect(isNativeHash(await passwords.hash('x'))).toBe(true);
    expect(needsRehash(await passwords.hash('x'))).toBe(false);
    expect(needsRehash(await argon2.hash('x', { type: argon2.argon2i, memoryCost: 19_456, timeCost: 2, parallelism: 1 }))).toBe(true);
    expect(needsRehash(await argon2.hash('x', { type: argon2.argon2id, memoryCost: 8192, timeCost: 2, parallelism: 1 }))).toBe(true);
    for (const [, stored] of VECTORS) expect(needsRehash(stored)).toBe(true);
  });
});
