// `gateway import users|keys FILE` (CONTRACT §27): accounts and API keys from the system a product
// already has, on the configured storage or through a running gateway's admin API (--admin).
import { readFileSync } from 'node:fs';
import { loadConfig } from '../config/load.js';
import { knownPlans } from '../pipeline/plans.js';
import type { FirebaseHashConfig, Format, ImportReport, Parsed } from '../import/index.js';
import type { Config } from '../config/schema.js';
import { adminKeyFor, callAdmin, type JsonLines } from './adminClient.js';
import { CommandError, UsageError, withDatabase, type Args } from './command.js';

/** Lines per request through the admin API: well below its body limit. */
const ADMIN_CHUNK = 5000;

function readText(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new CommandError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

/** The report as the command prints it: each refused line, then the summary; exit 1 when a line was refused. */
export function printReport(report: ImportReport): number {
  for (const r of report.refusals) console.log(`line ${r.line}${r.email ? ` (${r.email})` : ''}: refused: ${r.reason}`);
  console.log(`created: ${report.created}\nskipped_existing: ${report.skipped_existing}\nrefused: ${report.refused}${report.dry_run ? '\n(dry run: nothing was written)' : ''}`);
  return report.refused > 0 ? 1 : 0;
}

// The import room is loaded by these commands alone: every other command starts without it.
const importRoom = () => import('../import/index.js');

function firebaseOptions(values: Args['values'], standardBase64: (value: string) => string | undefined): FirebaseHashConfig {
  const [hashKey, saltSeparator, rounds, memCost] = [values['hash-key'], values['salt-separator'], values.rounds, values['mem-cost']] as Array<string | undefined>;
  if (hashKey === undefined || saltSeparator === undefined || rounds === undefined || memCost === undefined) {
    throw new UsageError('--format firebase needs --hash-key, --salt-separator, --rounds and --mem-cost (the project\'s password hash parameters)');
  }
  if (!standardBase64(hashKey)) throw new UsageError('--hash-key: expected the base64 signer key');
  if (standardBase64(saltSeparator) === undefined) throw new UsageError('--salt-separator: expected base64');
  if (!/^\d{1,2}$/.test(rounds) || !/^\d{1,2}$/.test(memCost)) throw new UsageError('--rounds and --mem-cost: expected small numbers (8 and 14 in most projects)');
  return { hashKey, saltSeparator, rounds: Number(rounds), memCost: Number(memCost) };
}

export async function importUsersCommand({ operands: [file], config: configPath, admin, values }: Args): Promise<number> {
  const { emptyReport, FORMATS, ImportFileError, importUsers, readUsers, standardBase64 } = await importRoom();
  const format = (values.format as string | undefined) ?? 'csv';
  if (!(FORMATS as readonly string[]).includes(format)) throw new UsageError(`--format: expected one of ${FORMATS.join(', ')}`);
  const firebase = format === 'firebase' ? firebaseOptions(values, standardBase64) : undefined;
  const dryRun = values['dry-run'] === true;
  const { config } = loadConfig(configPath);
  let records: Parsed[];
  try {
    records = readUsers(readText(file!), format as Format, { plans: knownPlans(config), firebase });
  } catch (err) {
    if (err instanceof ImportFileError) throw new CommandError(`${file}: ${err.message}`);
    throw err;
  }
  if (admin) return printReport(await throughAdmin(records, emptyReport(dryRun), admin, config));
  const report = emptyReport(dryRun);
  try {
    await withDatabase(config, (db) => importUsers(db, records, { dryRun, actor: 'cli', format }, report));
  } catch (err) {
    printReport(report);
    throw new CommandError(`the import stopped on a storage failure (the summary above is what was written before it): ${(err as Error).message}`);
  }
  return printReport(report);
}

/** One chunk of JSON lines to an import endpoint of the admin API; its report. */
async function postChunk(admin: { base: string; key: string }, path: string, lines: string, dryRun: boolean): Promise<ImportReport> {
  const answer = await callAdmin(admin.base, admin.key, 'POST', `${path}${dryRun ? '?dry_run=true' : ''}`, { lines, timeoutMs: 300_000 } satisfies JsonLines);
  if (answer.status !== 200) throw new CommandError(`the admin API at ${admin.base} answered ${answer.status} ${JSON.stringify(answer.json)}`);
  return answer.json as unknown as ImportReport;
}

/** A chunk's report added to the file's: `lineOf` turns the chunk's line numbers into the file's. */
function addChunk(report: ImportReport, answer: ImportReport, lineOf: (line: number) => number): void {
  report.created += answer.created;
  report.skipped_existing += answer.skipped_existing;
  report.refused += answer.refused;
  report.refusals.push(...answer.refusals.map((r) => ({ ...r, line: lineOf(r.line) })));
}

/**
 * The import through a running gateway's admin API (on embedded storage while it runs, or from
 * another machine): the file is read here, and its accounts sent as the contract's JSON lines in
 * chunks; the lines refused here and there make one report with the file's line numbers.
 */
async function throughAdmin(records: Parsed[], report: ImportReport, base: string, config: Config): Promise<ImportReport> {
  const admin = { base, key: adminKeyFor(config) };
  const rows = records.flatMap((r) => ('row' in r ? [r] : []));
  for (const r of records) if (!('row' in r)) report.refusals.push(r);
  report.refused = report.refusals.length;
  for (let start = 0; start < rows.length; start += ADMIN_CHUNK) {
    const chunk = rows.slice(start, start + ADMIN_CHUNK);
    const lines = chunk.map(({ row: u }) => JSON.stringify({
      email: u.email, password_hash: u.passwordHash, email_verified: u.emailVerifiedAt !== null, email_verified_at: u.emailVerifiedAt,
      plan: u.plan, is_active: u.isActive, created_at: u.createdAt, external_id: u.externalId,
    })).join('\n');
    addChunk(report, await postChunk(admin, '/admin/v1/import/users', lines, report.dry_run), (line) => chunk[line - 1]!.line);
  }
  report.refusals.sort((a, b) => a.line - b.line);
  return report;
}

export async function importKeysCommand({ operands: [file], config: configPath, admin, values }: Args): Promise<number> {
  const { config } = loadConfig(configPath);
  const text = readText(file!);
  const dryRun = values['dry-run'] === true;
  const { emptyReport, importKeys } = await importRoom();
  if (admin) {
    // Sent as they are, ADMIN_CHUNK lines at a time (blank ones too): a line's number in its chunk, plus the chunk's start, is its number in the file.
    const adminApi = { base: admin, key: adminKeyFor(config) };
    const lines = text.split('\n');
    const report = emptyReport(dryRun);
    for (let start = 0; start < lines.length; start += ADMIN_CHUNK) {
      const chunk = lines.slice(start, start + ADMIN_CHUNK).join('\n');
      if (chunk.trim()) addChunk(report, await postChunk(adminApi, '/admin/v1/import/keys', chunk, dryRun), (line) => start + line);
    }
    return printReport(report);
  }
  const knownScopes = new Set(config.routes.flatMap((route) => route.scopes ?? []));
  return printReport(await withDatabase(config, (db) => importKeys(db, text, { dryRun, knownScopes, actor: 'cli' })));
}
