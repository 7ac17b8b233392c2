// API keys imported by their SHA-256 (CONTRACT §27, §21): the gateway stores exactly that digest
// (lower-case hex of the raw key, api_tokens.token_hash) and looks keys up by it, so a customer's
// existing key works unchanged and the raw keys are never needed. `start` stays null: the gateway
// never saw the key. A hash already stored is skipped, whoever holds it.
import { normalizeEmail } from '../credentials/emailAddress.js';
import { auditWho, insertAuditEvent, type AuditWho } from '../storage/events/index.js';
import type { Database } from '../storage/database/index.js';
import { existingKeyHashes, insertImportedKeys, userIdsByEmail, type ImportedKey } from '../storage/accounts/index.js';
import { BATCH_SIZE, emptyReport, type ImportReport, type Refusal } from './users.js';
import { isoTime } from './rows.js';

const SHA256_HEX = /^[0-9a-fA-F]{64}$/;
const MAX_NAME = 64;
const KEY_FIELDS = ['email', 'name', 'sha256', 'scopes', 'expires_at'];

type KeyLine = { line: number; email: string; key: Omit<ImportedKey, 'userId'> } | Refusal;

/** One line of the keys file, checked: `known` are the scopes the routes declare. */
function keyLine(line: number, raw: string, known: ReadonlySet<string>, now: Date): KeyLine {
  let v: Record<string, unknown>;
  try {
    v = JSON.parse(raw) as Record<string, unknown>;
  } catch {
    return { line, reason: 'not JSON' };
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return { line, reason: 'not a JSON object' };
  const rawEmail = typeof v.email === 'string' ? v.email.trim() : undefined;
  const refuse = (reason: string): Refusal => ({ line, ...(rawEmail ? { email: rawEmail } : {}), reason });
  const unknown = Object.keys(v).find((k) => !KEY_FIELDS.includes(k));
  if (unknown !== undefined) return refuse(`unknown field ${JSON.stringify(unknown)}: expected ${KEY_FIELDS.join(', ')}`);
  const email = rawEmail ? normalizeEmail(rawEmail) : undefined;
  if (!email) return refuse('email: expected the owner\'s email');
  if (typeof v.sha256 !== 'string' || !SHA256_HEX.test(v.sha256)) return refuse('sha256: expected the SHA-256 of the key, 64 hex digits');
  const name = v.name ?? 'default';
  if (typeof name !== 'string' || [...name].length < 1 || [...name].length > MAX_NAME || /[\p{Cc}\p{Cf}]/u.test(name)) return refuse('name: expected 1 to 64 printable characters');
  let scopes: string[] | null = null;
  if (v.scopes !== undefined && v.scopes !== null) {
    if (!Array.isArray(v.scopes) || !v.scopes.length || !v.scopes.every((s) => typeof s === 'string')) return refuse('scopes: expected a non-empty list of scopes, or null');
    const stranger = (v.scopes as string[]).find((s) => s !== '*' && !known.has(s));
    if (stranger !== undefined) return refuse(`scopes: no route declares ${JSON.stringify(stranger)}`);
    scopes = [...new Set(v.scopes as string[])];
  }
  let expiresAt: string | null;
  try {
    expiresAt = isoTime(v.expires_at, 'expires_at') ?? null;
  } catch (err) {
    return refuse((err as Error).message);
  }
  if (expiresAt !== null && new Date(expiresAt) <= now) return refuse('expires_at: the key has expired');
  return { line, email, key: { hash: v.sha256.toLowerCase(), name, scopes, expiresAt } };
}

export interface KeyImportRun {
  dryRun: boolean;
  /** The scopes the configuration's routes declare. */
  knownScopes: ReadonlySet<string>;
  /** Who imports, for the audit log (ImportRun's actor). */
  actor: AuditWho;
  clock?: () => Date;
}

/** Imports the keys of a JSON lines file: owners found by email; refused lines reported. */
export async function importKeys(db: Database, text: string, run: KeyImportRun): Promise<ImportReport> {
  const now = (run.clock ?? (() => new Date()))();
  const report = emptyReport(run.dryRun);
  const lines = text.split('\n').flatMap((raw, i) => (raw.trim() === '' ? [] : [keyLine(i + 1, raw, run.knownScopes, now)]));
  const seen = new Set<string>();
  for (let start = 0; start < lines.length; start += BATCH_SIZE) {
    const batch = lines.slice(start, start + BATCH_SIZE);
    const owners = await userIdsByEmail(db, batch.flatMap((l) => ('key' in l ? [l.email] : [])));
    const keys: ImportedKey[] = [];
    const counts = { created: 0, skipped_existing: 0, refused: 0 };
    const refuse = (r: Refusal) => {
      counts.refused++;
      report.refusals.push(r);
    };
    for (const l of batch) {
      if (!('key' in l)) refuse(l);
      else if (!owners.has(l.email)) refuse({ line: l.line, email: l.email, reason: 'no user has this email' });
      else if (seen.has(l.key.hash)) counts.skipped_existing++;
      else {
        seen.add(l.key.hash);
        keys.push({ ...l.key, userId: owners.get(l.email)! });
      }
    }
    counts.created = run.dryRun
      ? keys.length - (await existingKeyHashes(db, keys.map((k) => k.hash))).size
      : await db.transaction(async (tx) => {
        const created = (await insertImportedKeys(tx, keys)).length;
        await insertAuditEvent(tx, { type: 'api_key.imported', ...auditWho(run.actor), data: { ...counts, created, skipped_existing: counts.skipped_existing + keys.length - created } }, now);
        return created;
      });
    counts.skipped_existing += keys.length - counts.created;
    report.created += counts.created;
    report.skipped_existing += counts.skipped_existing;
  }
  report.refused = report.refusals.length;
  return report;
}
