// Accounts imported in batches (CONTRACT §27): each batch one statement in one transaction with
// its audit row, so a run stopped by a storage failure leaves whole batches behind and a second
// run carries on where it stopped. An email already present is skipped, never overwritten.
import { auditWho, insertAuditEvent, type AuditWho } from '../storage/events/index.js';
import type { Database, Queryable } from '../storage/database/index.js';
import { existingEmails, existingExternalIds, insertImportedUsers, recordHashCosts } from '../storage/accounts/index.js';
import { hashCostClass } from '../auth/index.js';
import type { ImportRow, Parsed } from './rows.js';

/** Rows per INSERT: 100,000 users in 100 statements, each well within a statement timeout. */
export const BATCH_SIZE = 1000;
// Waiting for another import's batch (the same emails, on another instance) is no failure.
const BATCH_TIMEOUT_MS = 120_000;

export interface Refusal {
  line: number;
  email?: string;
  reason: string;
}

/** What an import did, or (dry run) would do. */
export interface ImportReport {
  dry_run: boolean;
  created: number;
  skipped_existing: number;
  refused: number;
  refusals: Refusal[];
}

export interface ImportRun {
  dryRun: boolean;
  /** Who imports, for the audit log: `cli` on direct storage, what authenticated through the admin API (an operator by id). */
  actor: AuditWho;
  format: string;
  clock?: () => Date;
  /** Called after each batch: a long import shows its progress. */
  progress?: (report: ImportReport) => void;
}

export const emptyReport = (dryRun: boolean): ImportReport => ({ dry_run: dryRun, created: 0, skipped_existing: 0, refused: 0, refusals: [] });

/**
 * Imports the parsed records into `report` (filled as batches commit: after a storage failure, it
 * says what was done before). The failure itself is thrown.
 */
export async function importUsers(db: Database, records: readonly Parsed[], run: ImportRun, report = emptyReport(run.dryRun)): Promise<ImportReport> {
  // Within one file, the first line of an email or external id wins; later ones are as if present.
  const emails = new Set<string>();
  const externalIds = new Set<string>();
  for (let start = 0; start < records.length; start += BATCH_SIZE) {
    const counts = { created: 0, skipped_existing: 0, refused: 0 };
    const refuse = (r: Refusal) => {
      counts.refused++;
      report.refusals.push(r);
    };
    const rows: Array<{ line: number; row: ImportRow }> = [];
    for (const record of records.slice(start, start + BATCH_SIZE)) {
      if (!('row' in record)) refuse(record);
      else if (emails.has(record.row.email)) counts.skipped_existing++;
      else if (record.row.externalId !== null && externalIds.has(record.row.externalId)) refuse({ line: record.line, email: record.row.email, reason: 'external_id: another line of the file has it' });
      else {
        emails.add(record.row.email);
        if (record.row.externalId !== null) externalIds.add(record.row.externalId);
        rows.push(record);
      }
    }
    // One order for every run: two imports of one file on two instances wait for each other, never deadlock.
    rows.sort((a, b) => (a.row.email < b.row.email ? -1 : a.row.email > b.row.email ? 1 : 0));
    const write = async (tx: Queryable) => {
      const outcome = await (run.dryRun ? wouldInsert(tx, rows) : insert(tx, rows));
      counts.created += outcome.created;
      counts.skipped_existing += outcome.skipped;
      outcome.refused.forEach(refuse);
      if (!run.dryRun) {
        await insertAuditEvent(tx, { type: 'user.imported', ...auditWho(run.actor), data: { format: run.format, ...counts } }, (run.clock ?? (() => new Date()))());
      }
    };
    if (run.dryRun) await write(db);
    else await db.transaction(write, { queryTimeoutMs: BATCH_TIMEOUT_MS });
    report.created += counts.created;
    report.skipped_existing += counts.skipped_existing;
    report.refused += counts.refused;
    run.progress?.(report);
  }
  report.refusals.sort((a, b) => a.line - b.line);
  return report;
}

const takenId = (line: number, row: ImportRow): Refusal => ({ line, email: row.email, reason: 'external_id: another user has it' });

async function insert(tx: Queryable, rows: Array<{ line: number; row: ImportRow }>) {
  const created = new Set(await insertImportedUsers(tx, rows.map((r) => r.row)));
  // The cost of each new kind of hash, in the same transaction: from its commit on, every
  // instance pads failed logins to the dearest (Passwords), so these accounts' wrong passwords
  // take no longer than an unknown email's.
  const hashes = rows.flatMap((r) => (created.has(r.row.email) && r.row.passwordHash !== null ? [r.row.passwordHash] : []));
  await recordHashCosts(tx, hashes.flatMap((h) => hashCostClass(h) ?? []));
  const left = rows.filter((r) => !created.has(r.row.email));
  // Not created: its email is present (skipped), or only its external id is someone else's (refused).
  const present = await existingEmails(tx, left.map((r) => r.row.email));
  return {
    created: created.size,
    skipped: left.filter((r) => present.has(r.row.email)).length,
    refused: left.filter((r) => !present.has(r.row.email)).map((r) => takenId(r.line, r.row)),
  };
}

async function wouldInsert(q: Queryable, rows: Array<{ line: number; row: ImportRow }>) {
  const present = await existingEmails(q, rows.map((r) => r.row.email));
  const fresh = rows.filter((r) => !present.has(r.row.email));
  const taken = await existingExternalIds(q, fresh.flatMap((r) => (r.row.externalId === null ? [] : [r.row.externalId])));
  return {
    created: fresh.filter((r) => r.row.externalId === null || !taken.has(r.row.externalId)).length,
    skipped: rows.length - fresh.length,
    refused: fresh.filter((r) => r.row.externalId !== null && taken.has(r.row.externalId)).map((r) => takenId(r.line, r.row)),
  };
}
