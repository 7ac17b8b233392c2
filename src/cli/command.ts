// What every `gateway` command shares: its arguments, how it fails, how it prints, and the
// configuration and database it opens. Commands import heavy modules (fastify, storage) themselves.
import { levels } from 'pino';
import { checkFiles } from '../config/files.js';
import { ConfigError, loadConfig } from '../config/load.js';
import type { Config } from '../config/schema.js';
import type { Database } from '../storage/database/index.js';

export const LOG_LEVELS = [...Object.keys(levels.values), 'silent'];

/** Wrong words on the command line: the message, then how to use what was asked (by default, the command list). */
export class UsageError extends Error {
  constructor(message: string, readonly usage?: string) {
    super(message);
  }
}

/** A well-formed command that cannot be carried out (unknown email): its message alone, no usage text. */
export class CommandError extends Error {}

export interface Args {
  /** The words after the command's name (EMAIL, PLAN). */
  operands: string[];
  /** --config, when given. */
  config?: string;
  /** --admin URL: act through a running gateway's admin API (users and keys commands). */
  admin?: string;
  /** The command's own options (Command.options), as given. */
  values: Record<string, string | boolean | undefined>;
}

export interface Command {
  /** One word, or a group and an action: `users set-plan`. */
  name: string;
  operands?: string[];
  /** One line, for the command list. */
  summary: string;
  /** The command's own help, after its usage line. */
  help: string;
  /** Takes --config (every command but `schema`). */
  config: boolean;
  /** Takes --admin URL (the commands that change accounts or keys). */
  admin?: boolean;
  /** Options of this command alone (`users list --json`). */
  options?: Record<string, { type: 'string' | 'boolean' }>;
  run(args: Args): Promise<number>;
}

export function print(text: string): number {
  console.log(text);
  return 0;
}

/** LOG_LEVEL, as `start` reads it; a problem line for `check`, or nothing. */
export function logLevelProblem(): string | undefined {
  const level = process.env.LOG_LEVEL;
  return level === undefined || LOG_LEVELS.includes(level) ? undefined : `LOG_LEVEL: unknown level ${JSON.stringify(level)}; expected one of ${LOG_LEVELS.join(', ')}`;
}

/** The configuration, every file it names read and parsed, and LOG_LEVEL: all `start` checks before the network. */
export async function loadChecked(configPath: string | undefined): Promise<{ config: Config; file: string }> {
  const { config, file } = loadConfig(configPath);
  const problems = [...await checkFiles(config), logLevelProblem()].filter((p) => p !== undefined);
  if (problems.length) throw new ConfigError(file, problems);
  return { config, file };
}

/** Opens the configured database, brought up to date (or checked, with storage.migrate: false). */
export async function withDatabase<T>(config: Config, work: (db: Database) => Promise<T>, { migrated = true } = {}): Promise<T> {
  const [{ openDatabase }, { assertMigrated, migrate }] = await Promise.all([import('../storage/database/index.js'), import('../storage/database/migrations.js')]);
  const db = await openDatabase(config.storage);
  try {
    if (migrated) await (config.storage.migrate ? migrate(db) : assertMigrated(db));
    return await work(db);
  } finally {
    await db.close();
  }
}

/** Rows as aligned columns, the first row the heading. */
export function columns(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  return rows.map((row) => row.map((cell, i) => cell.padEnd(widths[i]!)).join('  ').trimEnd()).join('\n');
}
