// Password hashes brought from another system (CONTRACT §27): bcrypt, argon2 (PHC), scrypt (PHC),
// PBKDF2-SHA256 (PHC or Django's form) and Firebase's modified scrypt, in the string form the
// importer stores in users.password_hash. Each is recognised by its prefix and parsed strictly;
// its parameters are bounded here, at every check, because an import file is outside input: a
// crafted row asking for scrypt with 16 GiB or a billion PBKDF2 iterations would otherwise turn
// each login of it into a denial of service. Out of bounds, unknown or malformed: not a valid
// hash, and the check fails as a wrong password does (never a 500). The key derivations run
// through a `run` (the instance's hasher child, hasher.ts); comparisons are in constant time
// (timingSafeEqual: every derived key is asked at the stored one's length, and would it differ,
// the throw is a mismatch).
import { createCipheriv, timingSafeEqual } from 'node:crypto';
import type { ImportedHashCost } from '../../storage/accounts/index.js';
import { inProcess, type KdfJob } from './hasher.js';

export type ImportedHashFormat = 'bcrypt' | 'argon2' | 'scrypt' | 'pbkdf2-sha256' | 'django-pbkdf2-sha256' | 'firebase-scrypt';

/** Runs a key derivation: the instance's hasher child, or in-process (the default, outside an instance). */
export type KdfRunner = (job: KdfJob) => Promise<string | boolean>;

/** A job without its password: the password is set at the check, never kept in a parse. */
type Unkeyed<J> = J extends unknown ? Omit<J, 'password'> : never;

/** How a recognised hash is checked: the job to run and how its answer is read. */
interface Check {
  format: ImportedHashFormat;
  job: Unkeyed<KdfJob>;
  /** The derived key (base64) against what was stored; absent when the job answers true/false. */
  expected?: (derived: Buffer) => boolean;
}

// Bounds. Each admits what its system writes by default today, with room (bcrypt 10–12, Django
// 5's 1,000,000 PBKDF2 iterations, passlib's scrypt ln=16, Firebase's documented rounds ≤ 8 and
// mem_cost ≤ 14, OWASP's argon2id parameters), and keeps one check within about a second and
// 256 MiB.
export const HASH_BOUNDS = {
  bcryptCost: { min: 4, max: 14 },
  pbkdf2Iterations: { min: 1, max: 3_000_000 },
  scryptMemoryBytes: 256 * 1024 * 1024,
  scryptWork: 2 ** 22, // N·r·p
  scryptBlockSize: 32, // r
  scryptParallelism: 16, // p
  firebaseRounds: { min: 1, max: 8 },
  firebaseMemCost: { min: 1, max: 14 },
  argon2MemoryKiB: 262_144,
  argon2Time: 16,
  argon2Parallelism: 16,
  saltBytes: 1024,
  keyBytes: { min: 16, max: 1024 },
} as const;

const BCRYPT = /^\$2[aby]\$(\d\d)\$[./A-Za-z0-9]{53}$/;
const ARGON2 = /^\$argon2(?:id|i)\$(?:v=(?:16|19)\$)?m=(\d{1,10}),t=(\d{1,10}),p=(\d{1,10})\$[A-Za-z0-9+/]+\$[A-Za-z0-9+/]+$/;
const DJANGO = /^pbkdf2_sha256\$(\d{1,10})\$([^$]{1,1024})\$([A-Za-z0-9+/]+={0,2})$/;

/** A recognised hash within its bounds: its format; anything else (unknown, malformed, absurd): undefined. */
export function importedHashFormat(stored: string): ImportedHashFormat | undefined {
  return parse(stored)?.format;
}

/**
 * The format of a well-formed hash, its bounds aside: the import tells a row of no known format
 * from one of a known format that no login would check (importedHashFormat undefined), each with
 * its reason. The same parser as a login's, so one place knows the formats.
 */
export function recognisedHashFormat(stored: string): ImportedHashFormat | undefined {
  return parse(stored, false)?.format;
}

/**
 * Whether `password` is the one `stored` was made from, for every format above. Never throws: an
 * unknown, malformed or out-of-bounds hash, or a derivation that fails, is a mismatch.
 */
export async function verifyImportedHash(stored: string, password: string, run: KdfRunner = inProcess): Promise<boolean> {
  try {
    const check = parse(stored);
    if (!check) return false;
    const answer = await run({ ...check.job, password } as KdfJob);
    if (!check.expected) return answer === true;
    return typeof answer === 'string' && check.expected(Buffer.from(answer, 'base64'));
  } catch {
    return false;
  }
}

// What one check costs, in argon2id verifications of the gateway's parameters (m=19 MiB, t=2):
// per unit of each format's work, measured on these machines with Node 26 (bcrypt 10 ≈ 2.5,
// PBKDF2-SHA256 at 100,000 iterations ≈ 0.85, scrypt N=16384 r=8 ≈ 1.7). Rough: they only rank
// the formats and choose the padding of a failed login (passwords.ts), never a limit.
const COST_PER_UNIT = { bcrypt: 2.5 / 1024, pbkdf2: 0.85 / 100_000, scrypt: 1.7 / 131_072, argon2: 1 / (19_456 * 2) } as const;

/** What checking `stored` costs, in argon2id verifications (above); undefined when it is no hash a check would derive. */
export function hashCost(stored: string): number | undefined {
  const check = parse(stored);
  switch (check?.job.op) {
    case undefined: return undefined;
    case 'bcrypt': return 2 ** Number(stored.slice(4, 6)) * COST_PER_UNIT.bcrypt;
    case 'pbkdf2': return check.job.iterations * Math.ceil(check.job.keylen / 32) * COST_PER_UNIT.pbkdf2;
    case 'scrypt': return check.job.params.N * check.job.params.r * check.job.params.p * COST_PER_UNIT.scrypt;
    case 'verify': {
      const [, m, t] = ARGON2.exec(stored)!;
      return Number(m) * Number(t) * COST_PER_UNIT.argon2;
    }
  }
}

/**
 * The cost class of an imported hash: its format and parameters kept, its salt and digest (the
 * last field of bcrypt, the last two of the others) replaced by 'A's of the same length, so the
 * dummy costs what the hash costs and is no one's. Undefined for what no check derives.
 */
export function hashCostClass(stored: string): ImportedHashCost | undefined {
  const work = hashCost(stored);
  if (work === undefined) return undefined;
  const fields = stored.split('$');
  const secret = stored.startsWith('$2') ? 1 : 2;
  const shape = `${fields.slice(0, -secret).join('$')}$`;
  const dummy = shape + fields.slice(-secret).map((f) => f.replace(/[A-Za-z0-9+/.]/g, 'A')).join('$');
  return { shape, dummy, work };
}

// `bounded` false: the shape only, every bound and size below passes (recognisedHashFormat); the
// check it returns is then never run.
function parse(stored: string, bounded = true): Check | undefined {
  if (bounded && stored.length > 4096) return undefined;
  if (stored.startsWith('$2')) return bcrypt(stored, bounded);
  if (stored.startsWith('$argon2')) return argon2(stored, bounded);
  if (stored.startsWith('$scrypt$')) return scryptPhc(stored, bounded);
  if (stored.startsWith('$pbkdf2-sha256$')) return pbkdf2Phc(stored, bounded);
  if (stored.startsWith('pbkdf2_sha256$')) return django(stored, bounded);
  if (stored.startsWith('$firebase-scrypt$')) return firebase(stored, bounded);
  return undefined;
}

type Range = { min: number; max: number };
const within = (n: number, { min, max }: Range) => Number.isSafeInteger(n) && n >= min && n <= max;
/** Unbounded, any decimal passes: the parse is of the shape only. */
const inBounds = (bounded: boolean, ...checks: Array<[number, Range]>) => !bounded || checks.every(([n, range]) => within(n, range));

function bcrypt(stored: string, bounded: boolean): Check | undefined {
  const m = BCRYPT.exec(stored);
  if (!m || !inBounds(bounded, [Number(m[1]), HASH_BOUNDS.bcryptCost])) return undefined;
  return { format: 'bcrypt', job: { op: 'bcrypt', hash: stored } };
}

function argon2(stored: string, bounded: boolean): Check | undefined {
  const m = ARGON2.exec(stored);
  if (!m) return undefined;
  const [memory, time, lanes] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const memoryRange = { min: 8, max: HASH_BOUNDS.argon2MemoryKiB };
  if (!inBounds(bounded, [memory, memoryRange], [time, { min: 1, max: HASH_BOUNDS.argon2Time }], [lanes, { min: 1, max: HASH_BOUNDS.argon2Parallelism }])) return undefined;
  return { format: 'argon2', job: { op: 'verify', hash: stored } };
}

/** `$scrypt$ln=<log2 N>,r=<r>,p=<p>$<salt>$<hash>` (passlib's form; PHC base64). */
function scryptPhc(stored: string, bounded: boolean): Check | undefined {
  const [, , paramText, saltText, hashText, ...rest] = stored.split('$');
  const params = phcParams(paramText!, ['ln', 'r', 'p']);
  const salt = phcBase64(saltText, bounded);
  const hash = phcBase64(hashText, bounded);
  if (rest.length > 0 || !params || !salt || !hash || !keySized(hash, bounded)) return undefined;
  const job = scryptJob(salt, hash.length, 2 ** params.ln!, params.r!, params.p!, bounded);
  return job && { format: 'scrypt', job, expected: (derived) => timingSafeEqual(derived, hash) };
}

/** `$pbkdf2-sha256$i=<iterations>[,l=<length>]$<salt>$<hash>`, or passlib's `$pbkdf2-sha256$<iterations>$…`. */
function pbkdf2Phc(stored: string, bounded: boolean): Check | undefined {
  const [, , roundsText, saltText, hashText, ...rest] = stored.split('$');
  const iterations = /^\d{1,10}$/.test(roundsText!) ? Number(roundsText) : phcParams(roundsText!, ['i'], ['l'])?.i;
  const salt = phcBase64(saltText, bounded);
  const hash = phcBase64(hashText, bounded);
  if (rest.length > 0 || iterations === undefined || !salt || !hash) return undefined;
  return pbkdf2Check('pbkdf2-sha256', salt, iterations, hash, bounded);
}

/** Django's `pbkdf2_sha256$<iterations>$<salt>$<base64 hash>`: the salt is text, used as its UTF-8 bytes. */
function django(stored: string, bounded: boolean): Check | undefined {
  const m = DJANGO.exec(stored);
  const hash = m && strictBase64(m[3]!, /^[A-Za-z0-9+/]+={0,2}$/, bounded);
  if (!m || !hash) return undefined;
  return pbkdf2Check('django-pbkdf2-sha256', Buffer.from(m[2]!), Number(m[1]), hash, bounded);
}

function pbkdf2Check(format: ImportedHashFormat, salt: Buffer, iterations: number, hash: Buffer, bounded: boolean): Check | undefined {
  if (!inBounds(bounded, [iterations, HASH_BOUNDS.pbkdf2Iterations], [hash.length, { min: HASH_BOUNDS.keyBytes.min, max: 64 }])) return undefined;
  const job: Unkeyed<KdfJob> = { op: 'pbkdf2', salt: salt.toString('base64'), iterations, keylen: hash.length, digest: 'sha256' };
  return { format, job, expected: (derived) => timingSafeEqual(derived, hash) };
}

/**
 * The importer's form of a Firebase hash, `$firebase-scrypt$rounds=<R>,mem=<M>,sep=<salt
 * separator>,key=<signer key>$<salt>$<hash>`, base64 without its padding. Firebase's scrypt
 * (github.com/firebase/scrypt): the key derived by scrypt from the password and salt ‖ separator
 * (N = 2^mem, r = rounds, p = 1, 32 bytes) encrypts the project's signer key with AES-256-CTR
 * under a zero IV; the result is the stored hash.
 */
function firebase(stored: string, bounded: boolean): Check | undefined {
  const [, , paramText, saltText, hashText, ...rest] = stored.split('$');
  const params = firebaseParams(paramText!, bounded);
  const salt = strictBase64(saltText, /^[A-Za-z0-9+/]+$/, bounded);
  const hash = strictBase64(hashText, /^[A-Za-z0-9+/]+$/, bounded);
  if (rest.length > 0 || !params || !salt || !hash || hash.length !== params.key.length) return undefined;
  const job = scryptJob(Buffer.concat([salt, params.sep]), 32, 2 ** params.mem, params.rounds, 1, bounded);
  const expected = (derived: Buffer) => {
    const cipher = createCipheriv('aes-256-ctr', derived, Buffer.alloc(16));
    return timingSafeEqual(Buffer.concat([cipher.update(params.key), cipher.final()]), hash);
  };
  return job && { format: 'firebase-scrypt', job, expected };
}

/** Firebase's export values (base64, padded or not) → the stored string firebase() reads: for the importer, so both sides share one form. */
export function firebaseScryptHash(v: { rounds: number; memCost: number; saltSeparator: string; signerKey: string; salt: string; hash: string }): string {
  const bare = (b64: string) => b64.replace(/=+$/, '');
  return `$firebase-scrypt$rounds=${v.rounds},mem=${v.memCost},sep=${bare(v.saltSeparator)},key=${bare(v.signerKey)}$${bare(v.salt)}$${bare(v.hash)}`;
}

function firebaseParams(text: string, bounded: boolean): { rounds: number; mem: number; sep: Buffer; key: Buffer } | undefined {
  const fields = new Map<string, string>();
  for (const part of text.split(',')) {
    const at = part.indexOf('=');
    if (at === -1 || fields.has(part.slice(0, at))) return undefined;
    fields.set(part.slice(0, at), part.slice(at + 1));
  }
  if (fields.size !== 4) return undefined;
  const rounds = decimal(fields.get('rounds'));
  const mem = decimal(fields.get('mem'));
  const sep = strictBase64(fields.get('sep'), /^[A-Za-z0-9+/]*$/, bounded);
  const key = strictBase64(fields.get('key'), /^[A-Za-z0-9+/]+$/, bounded);
  if (rounds === undefined || mem === undefined || !sep || !key || !keySized(key, bounded)) return undefined;
  if (!inBounds(bounded, [rounds, HASH_BOUNDS.firebaseRounds], [mem, HASH_BOUNDS.firebaseMemCost])) return undefined;
  return { rounds, mem, sep, key };
}

function scryptJob(salt: Buffer, keylen: number, N: number, r: number, p: number, bounded: boolean): Unkeyed<KdfJob> | undefined {
  const memory = 128 * N * r;
  if (!inBounds(bounded, [r, { min: 1, max: HASH_BOUNDS.scryptBlockSize }], [p, { min: 1, max: HASH_BOUNDS.scryptParallelism }])) return undefined;
  if (bounded && (N < 2 || memory > HASH_BOUNDS.scryptMemoryBytes || N * r * p > HASH_BOUNDS.scryptWork)) return undefined;
  // node:crypto refuses more than 32 MiB by default; the bound above is what is allowed.
  const params = { N, r, p, maxmem: memory + 1024 * 1024 };
  return { op: 'scrypt', salt: salt.toString('base64'), keylen, params };
}

/** `a=1,b=2` with exactly the `required` names (and maybe the `optional` ones), each a decimal. */
function phcParams(text: string, required: string[], optional: string[] = []): Record<string, number> | undefined {
  const values: Record<string, number> = {};
  for (const part of text.split(',')) {
    const [name, value, ...more] = part.split('=');
    const n = decimal(value);
    if (more.length > 0 || !name || n === undefined || name in values || ![...required, ...optional].includes(name)) return undefined;
    values[name] = n;
  }
  return required.every((name) => name in values) ? values : undefined;
}

function decimal(text: string | undefined): number | undefined {
  return text !== undefined && /^\d{1,10}$/.test(text) ? Number(text) : undefined;
}

/** PHC's base64: the standard alphabet without padding, or passlib's, with '.' for '+'. */
function phcBase64(text: string | undefined, bounded: boolean): Buffer | undefined {
  return strictBase64(text?.replaceAll('.', '+'), /^[A-Za-z0-9+/]+$/, bounded);
}

/** Buffer.from skips what is not base64; the shape is checked first, so a mangled value is refused, not half read. */
function strictBase64(text: string | undefined, shape: RegExp, bounded: boolean): Buffer | undefined {
  if (text === undefined || !shape.test(text) || text.replace(/=+$/, '').length % 4 === 1) return undefined;
  const bytes = Buffer.from(text, 'base64');
  return !bounded || bytes.length <= HASH_BOUNDS.saltBytes ? bytes : undefined;
}

const keySized = (key: Buffer, bounded: boolean) => inBounds(bounded, [key.length, HASH_BOUNDS.keyBytes]);

