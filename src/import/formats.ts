// The files `gateway import users` reads (CONTRACT §27), each turned into the fields of rows.ts:
// csv and json (JSON lines) with the contract's fields; Auth0's user export (the bulk export job's
// JSON lines, or the JSON support sends with password hashes); Supabase's auth.users (a CSV or
// JSON lines of its columns); `firebase auth:export`'s JSON, with the project's hash parameters.
import { parseCsv } from './csv.js';
import { firebaseHash, type FirebaseHashConfig } from './firebaseHash.js';
import { FIELDS, isoTime, refused, toRow, type Fields, type Parsed } from './rows.js';

export const FORMATS = ['csv', 'json', 'auth0', 'supabase', 'firebase'] as const;
export type Format = (typeof FORMATS)[number];

/** A file that is not of its format at all (no header, no users array): nothing of it is imported. */
export class ImportFileError extends Error {}

export interface ReadOptions {
  plans: readonly string[];
  /** For firebase only. */
  firebase?: FirebaseHashConfig;
  now?: Date;
}

type Record_ = { line: number; fields: Record<string, unknown> } | { line: number; reason: string };

/** Every record of `text` in `format`, each an account or a refusal. */
export function readUsers(text: string, format: Format, options: ReadOptions): Parsed[] {
  const records = format === 'firebase' ? firebaseRecords(text) : format === 'csv' ? csvRecords(text) : format === 'json' ? jsonLines(text) : exportRecords(text);
  const map = format === 'auth0' ? fromAuth0 : format === 'supabase' ? fromSupabase(options.now ?? new Date()) : format === 'firebase' ? fromFirebase(options.firebase!) : strict;
  return records.map((r) => {
    if ('reason' in r) return refused(r.line, r.reason);
    const fields = map(r.fields);
    return typeof fields === 'string' ? { line: r.line, ...(typeof r.fields.email === 'string' ? { email: r.fields.email } : {}), reason: fields } : toRow(r.line, fields, options.plans);
  });
}

/** The contract's own fields, and no other (a misspelt column would be lost without a word). */
function strict(fields: Record<string, unknown>): Fields | string {
  const unknown = Object.keys(fields).find((k) => !(FIELDS as readonly string[]).includes(k));
  return unknown === undefined ? fields : `unknown field ${JSON.stringify(unknown)}: expected ${FIELDS.join(', ')}`;
}

function csvRecords(text: string): Record_[] {
  const [header, ...rows] = parseCsv(text);
  if (!header) return [];
  if ('error' in header) throw new ImportFileError(`line ${header.line}: ${header.error}`);
  const names = header.fields.map((f) => f.trim());
  if (!names.includes('email')) throw new ImportFileError('the header row has no email column');
  return rows.map((r) => {
    if ('error' in r) return { line: r.line, reason: r.error };
    if (r.fields.length !== names.length) return { line: r.line, reason: `expected ${names.length} fields as the header row has, found ${r.fields.length}` };
    return { line: r.line, fields: Object.fromEntries(names.map((n, i) => [n, r.fields[i]])) };
  });
}

function jsonLines(text: string): Record_[] {
  const out: Record_[] = [];
  text.split('\n').forEach((raw, i) => {
    if (raw.trim() === '') return;
    let value: unknown;
    try {
      value = JSON.parse(raw);
    } catch {
      out.push({ line: i + 1, reason: 'not JSON' });
      return;
    }
    out.push(value !== null && typeof value === 'object' && !Array.isArray(value) ? { line: i + 1, fields: value as Record<string, unknown> } : { line: i + 1, reason: 'not a JSON object' });
  });
  return out;
}

/** An export of Auth0 or Supabase: a JSON array, JSON lines, or a CSV with a header row. */
function exportRecords(text: string): Record_[] {
  const first = text.trimStart()[0];
  if (first === '[') {
    let all: unknown;
    try {
      all = JSON.parse(text);
    } catch {
      throw new ImportFileError('not JSON (a file starting with [ is read as one JSON array)');
    }
    return (all as unknown[]).map((value, i) => value !== null && typeof value === 'object' && !Array.isArray(value)
      ? { line: i + 1, fields: value as Record<string, unknown> } : { line: i + 1, reason: 'not a JSON object' });
  }
  return first === '{' ? jsonLines(text) : csvRecords(text);
}

function firebaseRecords(text: string): Record_[] {
  let all: unknown;
  try {
    all = JSON.parse(text);
  } catch {
    throw new ImportFileError('not JSON: expected the file `firebase auth:export FILE --format=json` writes');
  }
  const users = (all as { users?: unknown } | null)?.users;
  if (!Array.isArray(users)) throw new ImportFileError('no "users" array: expected the file `firebase auth:export FILE --format=json` writes');
  return users.map((u: unknown, i) => u !== null && typeof u === 'object' ? { line: i + 1, fields: u as Record<string, unknown> } : { line: i + 1, reason: 'not a JSON object' });
}

/** A boolean Auth0, Supabase or Firebase wrote as JSON or as CSV text. */
const isTrue = (v: unknown) => v === true || (typeof v === 'string' && v.trim().toLowerCase() === 'true');

// Auth0's export: user_id (auth0|…), or _id.$oid in the password export; the hash as
// passwordHash (support's export) or custom_password_hash (the import format's: {hash: {value}}).
function fromAuth0(u: Record<string, unknown>): Fields {
  const oid = u._id !== null && typeof u._id === 'object' ? (u._id as { $oid?: unknown }).$oid : u._id;
  const custom = u.custom_password_hash;
  const customValue = custom !== null && typeof custom === 'object' ? (custom as { hash?: { value?: unknown } }).hash?.value : custom;
  return {
    email: u.email, email_verified: isTrue(u.email_verified), created_at: u.created_at,
    external_id: u.user_id ?? oid, password_hash: u.passwordHash ?? customValue, is_active: !isTrue(u.blocked),
  };
}

// Supabase's auth.users columns: a ban still running makes the account inactive.
function fromSupabase(now: Date) {
  return (u: Record<string, unknown>): Fields | string => {
    const banned = runningBan(u.banned_until, now);
    if (typeof banned === 'string') return banned;
    return { email: u.email, password_hash: u.encrypted_password, email_verified_at: u.email_confirmed_at, created_at: u.created_at, external_id: u.id, is_active: !banned };
  };
}

/**
 * Whether a ban ending at `until` still runs at `now`: read as Postgres writes a timestamptz
 * (`2020-01-01 00:00:00+00`, which new Date() cannot read, or `infinity`) or as ISO 8601. A value
 * that is no time is the row's refusal: guessing either way would make an account active or not
 * without a word.
 */
function runningBan(until: unknown, now: Date): boolean | string {
  const text = typeof until === 'string' ? until.trim().toLowerCase() : until;
  if (text === 'infinity') return true;
  if (text === '-infinity') return false;
  try {
    const end = isoTime(until, 'banned_until');
    return end !== undefined && Date.parse(end) > now.getTime();
  } catch (error) {
    return (error as Error).message;
  }
}

// `firebase auth:export`: createdAt in epoch milliseconds (a string), disabled, and the hash with
// its salt, which become one string with the project's parameters (firebaseHash.ts).
function fromFirebase(config: FirebaseHashConfig) {
  return (u: Record<string, unknown>): Fields | string => {
    let password: string | undefined;
    if (typeof u.passwordHash === 'string' && u.passwordHash !== '') {
      password = firebaseHash(config, typeof u.salt === 'string' ? u.salt : '', u.passwordHash);
      if (!password) return 'passwordHash and salt: expected standard base64';
    }
    const ms = typeof u.createdAt === 'string' || typeof u.createdAt === 'number' ? Number(u.createdAt) : NaN;
    if (u.createdAt !== undefined && !(Number.isSafeInteger(ms) && ms >= 0)) return 'createdAt: expected epoch milliseconds';
    return {
      email: u.email, email_verified: u.emailVerified === true, password_hash: password, is_active: u.disabled !== true,
      created_at: u.createdAt === undefined ? undefined : new Date(ms).toISOString(), external_id: u.localId,
    };
  };
}
