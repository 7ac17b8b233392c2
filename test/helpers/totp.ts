// The codes an authenticator app shows, for the tests that sign in with TOTP: RFC 6238 (SHA-1,
// 6 digits, 30 s steps) over a base32 secret, written out here with node:crypto so that the tests
// check the gateway against the RFC and not against the library the gateway itself uses (otplib).
// Its shape is otplib 12's `authenticator` (generate, clone({ epoch }) with epoch in ms), the one
// the tests were written against before otplib 13 removed it (issue 47).
import { createHmac } from 'node:crypto';

const STEP_MS = 30_000;
const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

function base32Decode(secret: string): Buffer {
  let bits = 0;
  let value = 0;
  const bytes: number[] = [];
  for (const char of secret.replace(/=+$/, '').toUpperCase()) {
    const index = BASE32.indexOf(char);
    if (index < 0) throw new Error(`not a base32 secret: ${secret}`);
    value = (value << 5) | index;
    bits += 5;
    if (bits >= 8) {
      bytes.push((value >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  return Buffer.from(bytes);
}

/** The 6-digit code of a base32 secret at `epochMs` (RFC 4226 §5.3's dynamic truncation). */
export function totpCode(secret: string, epochMs: number): string {
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(Math.floor(epochMs / STEP_MS)));
  const mac = createHmac('sha1', base32Decode(secret)).update(counter).digest();
  const offset = mac[mac.length - 1]! & 0x0f;
  return String((mac.readUInt32BE(offset) & 0x7fffffff) % 1_000_000).padStart(6, '0');
}

interface Authenticator {
  /** The code at `epoch` (ms; the clone's, or now). */
  generate(secret: string): string;
  clone(options: { epoch: number }): Authenticator;
}

function authenticatorAt(epoch?: number): Authenticator {
  return {
    generate: (secret) => totpCode(secret, epoch ?? Date.now()),
    clone: (options) => authenticatorAt(options.epoch),
  };
}

export const authenticator = authenticatorAt();
