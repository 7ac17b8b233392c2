// Password hashing: argon2id with OWASP's parameters (m=19 MiB, t=2, p=1).
import argon2 from 'argon2';
import { GatewayError } from '../../errors/index.js';
import { HasherProcess } from './hasher.js';
import type { ImportedHashCost } from '../../storage/accounts/index.js';
import { hashCost, verifyImportedHash } from './importedHashes.js';

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
  private dearest: ImportedHashCost | undefined;

  constructor(private readonly hasher: HasherProcess = new HasherProcess()) {}

  hash(password: string): Promise<string> {
    return this.limited(async () => String(await this.hasher.run({ op: 'hash', password, options: OPTIONS })));
  }

  /**
   * Every check of a password against a stored hash, the gateway's own or an imported one
   * (importedHashes.ts). A malformed or unknown stored hash is a failed check, not a crash.
   */
  async verify(hash: string, password: string): Promise<boolean> {
    const matches = await this.check(hash, password);
    if (!matches) await this.padFailure(isNativeHash(hash) ? 1 : (hashCost(hash) ?? 0), password);
    return matches;
  }

  // Same work for unknown or inactive emails, so login time does not reveal which accounts exist.
  async burnVerification(password: string): Promise<void> {
    await this.padFailure(0, password);
  }

  /**
   * The dearest imported hash still stored, from the imported_hash_costs table (dearestImported.ts
   * keeps it current); undefined when none is dearer than an argon2id verification.
   */
  set dearestImported(dearest: ImportedHashCost | undefined) {
    this.dearest = dearest && dearest.work > 1 ? dearest : undefined;
  }

  get dearestImported(): ImportedHashCost | undefined {
    return this.dearest;
  }

  close(): void {
    this.hasher.close();
  }

  private check(hash: string, password: string): Promise<boolean> {
    return this.limited(() => verifyImportedHash(hash, password, (job) => this.hasher.run(job)));
  }

  /**
   * A failed check, or none (unknown email: `spent` 0), padded with dummy checks (§13, §27) so
   * that every failure costs about what an unknown email's does: one argon2id verification, plus
   * one of the dearest imported hash while one is dearer than that. A not-yet-migrated account
   * costs its own check: it gets whichever of the two dummies (none, one, both) brings its total
   * nearest (hashCost() estimates), so a bcrypt account of the dearest cost pays the argon2id one,
   * and a cheap PBKDF2 account both. The argon2id one is paid first: the dummy hash is made then.
   */
  private async padFailure(spent: number, password: string): Promise<void> {
    const dear = this.dearest;
    const owed = 1 + (dear?.work ?? 0) - spent;
    const choices = [[], [1], ...(dear ? [[dear.work], [1, dear.work]] : [])];
    const sum = (works: number[]) => works.reduce((a, b) => a + b, 0);
    const nearest = choices.reduce((best, c) => (Math.abs(owed - sum(c)) <= Math.abs(owed - sum(best)) ? c : best));
    if (nearest.includes(1)) {
      this.dummyHash ??= this.hash('dummy password that matches no account');
      await this.check(await this.dummyHash, password);
    }
    if (dear && nearest.includes(dear.work)) await this.check(dear.dummy, password);
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
