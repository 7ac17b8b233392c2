// TOTP (RFC 6238: SHA-1, 6 digits, 30 s) with otplib, secrets encrypted at rest (AES-256-GCM with
// a key generated once in gateway_secrets), and recovery codes (80 random bits each, stored as
// SHA-256: no slow hash is needed for a secret that cannot be guessed).
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { generateSecret, verifySync } from 'otplib';
import { getOrCreateSecret, type Queryable } from '../../storage/database/index.js';
import { sha256Hex } from '../../credentials/digest.js';

const STEP_MS = 30_000;
const RECOVERY_CODES = 10;
/** The window: the current step, then the one before, then the one after (otplib 12's checkDelta order). */
const WINDOW = [0, -1, 1];

export interface Totp {
  newSecret(): string;
  otpauthUrl(issuer: string, email: string, secret: string): string;
  encrypt(secret: string): string;
  decrypt(stored: string): string;
  /** The 30 s step `code` belongs to (current, or one either side), or undefined when it is none. */
  stepOf(secret: string, code: string, now: Date): number | undefined;
}

export async function createTotp(db: Queryable): Promise<Totp> {
  const key = Buffer.from((await getOrCreateSecret(db, 'mfa_totp_key', randomBytes(32).toString('base64'))).value, 'base64');
  return {
    // otplib's default: 20 bytes, RFC 4226's 160 bits (its length tested).
    newSecret: () => generateSecret(),
    otpauthUrl,
    encrypt(secret) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      const data = Buffer.concat([cipher.update(secret), cipher.final()]);
      return [iv, cipher.getAuthTag(), data].map((b) => b.toString('base64url')).join('.');
    },
    decrypt(stored) {
      const [iv, tag, data] = stored.split('.').map((part) => Buffer.from(part, 'base64url'));
      const decipher = createDecipheriv('aes-256-gcm', key, iv!);
      decipher.setAuthTag(tag!);
      return Buffer.concat([decipher.update(data!), decipher.final()]).toString('utf8');
    },
    stepOf(secret, code, now) {
      if (!/^\d{6}$/.test(code)) return undefined;
      const current = Math.floor(now.getTime() / STEP_MS);
      // Each step checked on its own (otplib's epoch is in seconds; no tolerance), so that a code
      // two steps share, one time in a million, is taken as the current step's, as before.
      return WINDOW.map((delta) => current + delta).find((step) => verifySync({ secret, token: code, epoch: (step * STEP_MS) / 1000 }).valid);
    },
  };
}

/**
 * The otpauth:// URL of the QR code, as otplib 12 wrote it (otplib 13's generateURI leaves out the
 * default period, digits and algorithm, and orders the parameters otherwise): apps read both, and
 * what an enrolment shows stays what the docs and tests show.
 */
function otpauthUrl(issuer: string, email: string, secret: string): string {
  return `otpauth://totp/${encodeURIComponent(issuer)}:${encodeURIComponent(email)}?secret=${secret}&period=30&digits=6&algorithm=SHA1&issuer=${encodeURIComponent(issuer)}`;
}

/** Ten new recovery codes, as shown once to the user (xxxxx-xxxxx-xxxxx-xxxxx, 80 bits). */
export function newRecoveryCodes(): string[] {
  return Array.from({ length: RECOVERY_CODES }, () => randomBytes(10).toString('hex').match(/.{5}/g)!.join('-'));
}

/** What is stored for a recovery code: typed with or without dashes, spaces, in any case. */
export function recoveryCodeHash(code: string): string {
  return sha256Hex(code.replace(/[\s-]/g, '').toLowerCase());
}
