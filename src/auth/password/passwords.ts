// Password hashing: argon2id with OWASP's parameters (m=19 MiB, t=2, p=1).
import argon2 from 'argon2';
import { GatewayError } from '../../errors/index.js';
import { HasherProcess } from './hasher.js';
import { verifyImportedHash } from './importedHashes.js';

export const MAX_PASSWORD_BYTES = 1024;
const OPTIONS = { type: argon2.argon2id, memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;

// Hashing runs in a low-priority child process (hasher.ts); capping concurrent hashes keeps a
// burst of logins from taking both cores from the proxy's hot path even so.
const MAX_CONCURRENT_HASHES = 2;
// At idle priority hashes get only the CPU the proxy leaves, so a flood of logins (or a proxy
// that keeps every core busy) would queue them without end. Past this many waiting (a few
// seconds of hashing), a password request is answered 503 at once instead of hanging.
export const MAX_WAITING_HASHES = 100;

export function isTooLong(password: string): boolean {
  return Buffer.byteLength(password) > MAX_PASSWORD_BYTES;
}

/** A hash the gateway made with its parameters of today; any other (imported, older) is rehashed at its next login. */
export function isNativeHash(hash: string): boolean {
  try {
    // argon2's needsRehash compares version and parameters, not the variant.
    return hash.startsWith('$argon2id$') && !argon2.needsRehash(hash, OPTIONS);
  } catch {
    return false;
  }
}

/** Whether a hash that just matched should be replaced by the gateway's own (login does it, in the same request). */
export function needsRehash(hash: string): boolean {
  return !isNativeHash(hash);
}

/** Hashing and checking passwords for one gateway instance: its hasher child and its queue. */
export class Passwords {
  private running = 0;
  private readonly waiting: Array<() => void> = [];
  private dummyHash: Promise<string> | undefined;

  constructor(private readonly hasher: HasherProcess = new HasherProcess()) {}

  hash(password: string): Promise<string> {
    return this.limited(async () => String(await this.hasher.run({ op: 'hash', password, options: OPTIONS })));
  }

  /**
   * Every check of a password against a stored hash, the gateway's own or an imported one
   * (importedHashes.ts). A malformed or unknown stored hash is a failed check, not a crash.
   */
  async verify(hash: string, password: string): Promise<boolean> {
    const matches = await this.limited(() => verifyImportedHash(hash, password, (job) => this.hasher.run(job)));
    // An imported hash may be far cheaper than argon2id (PBKDF2 at 1,000 iterations): its failure
    // costs one argon2id verification more, so it takes no less than an unknown email's (§13).
    // Outside the queue's slot, which burnVerification takes again.
    if (!matches && !isNativeHash(hash)) await this.burnVerification(password);
    return matches;
  }

  // Same work for unknown or inactive emails, so login time does not reveal which accounts exist.
  async burnVerification(password: string): Promise<void> {
    this.dummyHash ??= this.hash('dummy password that matches no account');
    await this.verify(await this.dummyHash, password);
  }

  close(): void {
    this.hasher.close();
  }

  private async limited<T>(work: () => Promise<T>): Promise<T> {
    // A finishing hash hands its slot straight to the next waiter, so the cap holds exactly.
    if (this.running >= MAX_CONCURRENT_HASHES) {
      if (this.waiting.length >= MAX_WAITING_HASHES) throw new GatewayError('storageUnavailable');
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else this.running++;
    try {
      return await work();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
    }
  }
}
