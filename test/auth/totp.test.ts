// Unit tests of src/auth/mfa/totp.ts. The recovery codes: ten of them, 80 random bits each, in the
// shape shown to the user, and stored as a hash that takes them as typed (dashes, spaces, case).
// The TOTP secrets (createTotp, on the run's database, migrated as a gateway would, for the key in gateway_secrets): what an
// authenticator app is given, the secret encrypted at rest with that key, and which 30 s step a
// code is of, at both edges of the window, checked against RFC 6238 (test/helpers/totp.ts).
import { createDecipheriv } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTotp, newRecoveryCodes, recoveryCodeHash, type Totp } from '../../src/auth/mfa/totp.js';
import { sha256Hex } from '../../src/credentials/digest.js';
import { postgresDatabase, type Database } from '../../src/storage/database/db.js';
import { migrate } from '../../src/storage/database/migrations.js';
import { closeSql, describeWithServices, sql, testServices } from '../helpers/gateway.js';
import { totpCode } from '../helpers/totp.js';

describe('recovery codes', () => {
  it('ten codes of four groups of five hex digits, all different', () => {
    const codes = newRecoveryCodes();
    expect(codes).toHaveLength(10);
    for (const code of codes) expect(code).toMatch(/^[0-9a-f]{5}-[0-9a-f]{5}-[0-9a-f]{5}-[0-9a-f]{5}$/);
    expect(new Set(codes).size).toBe(10);
    expect(newRecoveryCodes()).not.toEqual(codes);
  });

  it('hashes the code without dashes or spaces, lower-cased, as SHA-256 hex', () => {
    const stored = sha256Hex('0123456789abcdef0123');
    expect(recoveryCodeHash('01234-56789-abcde-f0123')).toBe(stored);
    expect(recoveryCodeHash(' 01234 56789\tABCDE-F0123 ')).toBe(stored);
    expect(recoveryCodeHash('0123456789ABCDEF0123')).toBe(stored);
    expect(recoveryCodeHash('01234-56789-abcde-f0124')).not.toBe(stored);
  });
});

describeWithServices('createTotp', () => {
  let db: Database;
  let totp: Totp;
  const STEP = 30_000;
  // 1 s into a step: the steps either side are whole steps away.
  const current = Math.floor(Date.UTC(2026, 0, 1) / STEP);
  const now = new Date(current * STEP + 1000);

  beforeAll(async () => {
    db = postgresDatabase(testServices!.postgres);
    await migrate(db);
    totp = await createTotp(db);
  });
  afterAll(async () => {
    await db?.close();
    await closeSql();
  });

  it('a new secret is 20 random bytes in base32, different each time', () => {
    const secret = totp.newSecret();
    expect(secret).toMatch(/^[A-Z2-7]{32}$/);
    expect(totp.newSecret()).not.toBe(secret);
  });

  it('the otpauth URL names the issuer and the account, escaped, with the RFC 6238 parameters', () => {
    expect(totp.otpauthUrl('Example & Co', 'a+b@example.test', 'JBSWY3DPEHPK3PXP')).toBe(
      'otpauth://totp/Example%20%26%20Co:a%2Bb%40example.test?secret=JBSWY3DPEHPK3PXP&period=30&digits=6&algorithm=SHA1&issuer=Example%20%26%20Co');
  });

  it('encrypts with AES-256-GCM under the key kept in gateway_secrets, a fresh IV each time', async () => {
    const stored = totp.encrypt('JBSWY3DPEHPK3PXP');
    const [iv, tag, data] = stored.split('.').map((part) => Buffer.from(part, 'base64url'));
    expect(iv).toHaveLength(12);
    expect(tag).toHaveLength(16);
    expect(data!.toString('utf8')).not.toContain('JBSWY3DPEHPK3PXP');
    expect(totp.encrypt('JBSWY3DPEHPK3PXP')).not.toBe(stored);
    const [row] = await sql<{ value: string }>("SELECT value FROM gateway_secrets WHERE name = 'mfa_totp_key'");
    const key = Buffer.from(row!.value, 'base64');
    expect(key).toHaveLength(32);
    const decipher = createDecipheriv('aes-256-gcm', key, iv!);
    decipher.setAuthTag(tag!);
    expect(Buffer.concat([decipher.update(data!), decipher.final()]).toString('utf8')).toBe('JBSWY3DPEHPK3PXP');
  });

  it('decrypts what any instance on the database encrypted, and refuses a tampered secret', async () => {
    const other = await createTotp(db);
    const stored = other.encrypt('GEZDGNBVGY3TQOJQ');
    expect(totp.decrypt(stored)).toBe('GEZDGNBVGY3TQOJQ');
    const [iv, tag, data] = stored.split('.');
    const flipped = Buffer.from(data!, 'base64url');
    flipped[0]! ^= 1;
    expect(() => totp.decrypt([iv, tag, flipped.toString('base64url')].join('.'))).toThrow();
  });

  it('a code is of the current step or one either side, two steps away at both edges is none', () => {
    const secret = totp.newSecret();
    const codeAt = (delta: number) => totpCode(secret, (current + delta) * STEP);
    expect(totp.stepOf(secret, codeAt(0), now)).toBe(current);
    expect(totp.stepOf(secret, codeAt(-1), now)).toBe(current - 1);
    expect(totp.stepOf(secret, codeAt(1), now)).toBe(current + 1);
    for (const delta of [-2, 2]) {
      const code = codeAt(delta);
      // One time in a million a code two steps away is also a code of the window: not this test's case.
      if ([-1, 0, 1].some((near) => codeAt(near) === code)) continue;
      expect(totp.stepOf(secret, code, now)).toBeUndefined();
    }
  });

  it('a code that the steps before and after share is taken as the step before, the order of the window', () => {
    // Found by search, one secret in about a million: its codes one step either side of `current` are the same.
    const secret = 'AAAAAAAAAAAAAAAAAAAAAAAAAAADMMJJ';
    const code = totpCode(secret, (current - 1) * STEP);
    expect(totpCode(secret, (current + 1) * STEP)).toBe(code);
    expect(totpCode(secret, current * STEP)).not.toBe(code);
    expect(totp.stepOf(secret, code, now)).toBe(current - 1);
  });

  it('only six digits are a code: a code with a character before or after it is none', () => {
    const secret = totp.newSecret();
    const code = totpCode(secret, current * STEP);
    for (const sent of [`${code}0`, `0${code}`, ` ${code}`, `${code}\n`, code.slice(1), '', 'abcdef']) {
      expect(totp.stepOf(secret, sent, now)).toBeUndefined();
    }
  });
});
