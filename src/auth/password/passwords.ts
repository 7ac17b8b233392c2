// Password hashing: argon2id with OWASP's parameters (m=19 MiB, t=2, p=1).
import argon2 from 'argon2';
import { GatewayError } from '../../errors/index.js';
import { HasherProcess } from './hasher.js';

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

export function needsRehash(hash: string): boolean {
  try {
    return argon2.needsRehash(hash, OPTIONS);
  } catch {
    return false;
  }
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

  verify(hash: string, password: string): Promise<boolean> {
    return this.limited(async () => {
      try {
        return (await this.hasher.run({ op: 'verify', hash, password })) === true;
      } catch {
        return false; // a malformed stored hash is a failed login, not a crash
      }
    });
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
