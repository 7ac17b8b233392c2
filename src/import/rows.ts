// One imported account, checked field by field (CONTRACT §27): what every format is turned into,
// and the reason a line is refused. Nothing here touches storage.
import { normalizeEmail } from '../credentials/emailAddress.js';
import { importedHashFormat, recognisedHashFormat } from '../auth/index.js';
import type { ImportedUser } from '../storage/accounts/index.js';
import { readIsoTime } from '../time.js';

/** An account as it will be stored (storage/accounts/imports.ts says what each field holds). */
export type ImportRow = ImportedUser;

/** A record of the file: its account, or why it is refused. `line`: the file's line (a record's number in a Firebase export). */
export type Parsed = { line: number; row: ImportRow } | { line: number; email?: string; reason: string };

/** The fields of CONTRACT §27's csv and json formats; the exports' own fields are mapped onto them. */
export interface Fields {
  email?: unknown;
  password_hash?: unknown;
  email_verified?: unknown;
  plan?: unknown;
  is_active?: unknown;
  created_at?: unknown;
  external_id?: unknown;
  /** When the address was proved (Supabase's email_confirmed_at); else email_verified's created_at. */
  email_verified_at?: unknown;
}

export const FIELDS = ['email', 'password_hash', 'email_verified', 'plan', 'is_active', 'created_at', 'external_id', 'email_verified_at'] as const;

// An external id travels in x-user-external-id: printable ASCII, no space, bounded.
const EXTERNAL_ID = /^[\x21-\x7e]{1,255}$/;

class Refusal extends Error {}

const blank = (v: unknown) => v === undefined || v === null || (typeof v === 'string' && v.trim() === '');

function flag(v: unknown, name: string, fallback: boolean): boolean {
  if (blank(v)) return fallback;
  if (typeof v === 'boolean') return v;
  const text = typeof v === 'string' ? v.trim().toLowerCase() : '';
  if (text === 'true') return true;
  if (text === 'false') return false;
  throw new Refusal(`${name}: expected true or false`);
}

/** An ISO 8601 time (Postgres' `2024-01-15 10:30:00.123456+00` too) as a full ISO string; undefined for a blank. */
export function isoTime(v: unknown, name: string): string | undefined {
  if (blank(v)) return undefined;
  const date = typeof v === 'string' ? readIsoTime(v) : undefined;
  if (!date) throw new Refusal(`${name}: expected an ISO 8601 time such as 2024-01-15T10:30:00Z`);
  return date.toISOString();
}

function text(v: unknown, name: string): string | undefined {
  if (blank(v)) return undefined;
  if (typeof v === 'string') return v.trim();
  if (typeof v === 'number' && Number.isSafeInteger(v)) return String(v);
  throw new Refusal(`${name}: expected text`);
}

/** The account `fields` describe, checked against the plans the configuration knows. */
export function toRow(line: number, fields: Fields, plans: readonly string[]): Parsed {
  const rawEmail = typeof fields.email === 'string' ? fields.email : undefined;
  try {
    if (rawEmail === undefined || rawEmail.trim() === '') throw new Refusal('email is required');
    const email = normalizeEmail(rawEmail);
    if (!email) throw new Refusal('email is not a single mailbox the gateway accepts (CONTRACT §19)');
    const passwordHash = text(fields.password_hash, 'password_hash') ?? null;
    if (passwordHash !== null && !recognisedHashFormat(passwordHash)) throw new Refusal('password_hash: unknown hash format (docs/password-hashes.md lists the known ones)');
    // A known shape that no login would check (parameters out of bounds, a digest of the wrong
    // size): stored, it would lock its owner out without a word.
    if (passwordHash !== null && !importedHashFormat(passwordHash)) throw new Refusal('password_hash: parameters or sizes beyond what a login checks (docs/password-hashes.md, Bounds)');
    const plan = text(fields.plan, 'plan') ?? 'free';
    if (!plans.includes(plan)) throw new Refusal(`unknown plan ${JSON.stringify(plan)}: expected one of ${plans.join(', ')}`);
    const externalId = text(fields.external_id, 'external_id') ?? null;
    if (externalId !== null && !EXTERNAL_ID.test(externalId)) throw new Refusal('external_id: expected 1 to 255 printable ASCII characters without spaces');
    const createdAt = isoTime(fields.created_at, 'created_at') ?? null;
    const verifiedAt = isoTime(fields.email_verified_at, 'email_verified_at');
    const verified = flag(fields.email_verified, 'email_verified', verifiedAt !== undefined);
    const isActive = flag(fields.is_active, 'is_active', true);
    const emailVerifiedAt = verified ? verifiedAt ?? createdAt ?? new Date().toISOString() : null;
    return { line, row: { email, passwordHash, emailVerifiedAt, plan, isActive, createdAt, externalId } };
  } catch (err) {
    if (!(err instanceof Refusal)) throw err;
    return { line, ...(rawEmail ? { email: rawEmail.trim() } : {}), reason: err.message };
  }
}

export const refused = (line: number, reason: string): Parsed => ({ line, reason });
