// Expand, then contract (docs/operating.md, "Upgrading a running fleet"). During a rolling upgrade
// the first new instance migrates the database while instances of the previous release still
// serve it (test/ops/rollingUpgrade.test.ts), so a migration may only add what the old code
// ignores. Removing or changing what the old code reads (a column, a table, a name, a type, a
// NULL it writes) is a contract step: it ships in a later release, once no instance of the
// release that used the thing runs, and is written into CONTRACT_STEPS below, with why it is safe.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { MIGRATIONS_DIR, migrationFiles, splitStatements } from '../../src/storage/database/migrations.js';
import { ROOT } from '../helpers/cli.js';
import { PREVIOUS_RELEASE, previousReleaseMigrations } from '../helpers/previousRelease.js';

type Rule =
  | 'drop-table' | 'drop-column' | 'drop-constraint' | 'drop-index' | 'rename' | 'column-type' | 'set-not-null' | 'drop-default'
  | 'add-not-null-without-default' | 'alter-type';

/**
 * Contract steps reviewed and let through: file → the rules it may break, and why no running
 * instance depends on what it removes (the release that stopped using it has fully rolled out).
 */
const CONTRACT_STEPS: Record<string, Array<{ rule: Rule; why: string }>> = {
  '026_billing.sql': [{
    rule: 'drop-constraint',
    why: 'audit_events_actor_check is replaced in the same transaction by a wider one (NOT VALID: the rows already there hold the old, '
      + 'narrower set): every actor the previous release writes still passes, and no ON CONFLICT relies on a check',
  }],
  '043_managed_accounts.sql': [{
    rule: 'drop-constraint',
    why: 'the same widening as 026: audit_events_actor_check is replaced in the same transaction by a check that adds `scim` '
      + '(NOT VALID); every actor the previous release writes still passes, and no ON CONFLICT relies on a check',
  }],
};

const WHY: Record<Rule, string> = {
  'drop-table': 'the previous release reads and writes the table',
  'drop-column': 'the previous release selects or inserts the column',
  'drop-constraint': 'the previous release may rely on it (ON CONFLICT needs its unique index)',
  'drop-index': 'the previous release may rely on it (ON CONFLICT needs a unique index)',
  rename: 'the previous release uses the old name',
  'column-type': 'the previous release reads and writes values of the old type (and the rewrite locks the table)',
  'set-not-null': 'the previous release may still write NULL there',
  'drop-default': 'the previous release inserts rows without the column, counting on its default',
  'add-not-null-without-default': 'the previous release inserts rows without the column',
  'alter-type': 'the previous release uses the type as it was',
};

/** Splits an ALTER TABLE's actions on the commas outside parentheses and quotes. */
function actions(text: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let quoted = false;
  let current = '';
  for (const ch of text) {
    if (ch === "'") quoted = !quoted;
    if (!quoted && ch === '(') depth++;
    if (!quoted && ch === ')') depth--;
    if (!quoted && depth === 0 && ch === ',') {
      out.push(current.trim());
      current = '';
    } else current += ch;
  }
  return [...out, current.trim()];
}

/** The rules one ALTER TABLE action breaks. */
function actionRules(action: string): Rule[] {
  if (/^DROP\s+CONSTRAINT\b/.test(action)) return ['drop-constraint'];
  if (/^DROP\b/.test(action)) return ['drop-column'];
  if (/^RENAME\b/.test(action)) return ['rename'];
  if (/^ALTER\s+(COLUMN\s+)?\S+\s+(SET\s+DATA\s+)?TYPE\b/.test(action)) return ['column-type'];
  if (/^ALTER\s+(COLUMN\s+)?\S+\s+SET\s+NOT\s+NULL\b/.test(action)) return ['set-not-null'];
  if (/^ALTER\s+(COLUMN\s+)?\S+\s+DROP\s+DEFAULT\b/.test(action)) return ['drop-default'];
  const column = /^ADD\s+(?!CONSTRAINT\b|PRIMARY\b|UNIQUE\b|CHECK\b|FOREIGN\b|EXCLUDE\b)/.test(action);
  if (column && /\bNOT\s+NULL\b/.test(action) && !/\b(DEFAULT|GENERATED)\b/.test(action)) return ['add-not-null-without-default'];
  return [];
}

/** The rules a statement of a migration breaks; none for what only adds. */
function contractRules(statement: string): Rule[] {
  // Upper case, one space, without comments and string literals (a default's text is no keyword).
  const s = statement.replace(/--.*$/gm, ' ').replace(/'(?:[^']|'')*'/g, "''").replace(/\s+/g, ' ').trim().toUpperCase();
  if (/^DROP\s+TABLE\b/.test(s)) return ['drop-table'];
  if (/^DROP\s+INDEX\b/.test(s)) return ['drop-index'];
  if (/^ALTER\s+TYPE\b/.test(s)) return /\bADD\s+VALUE\b/.test(s) ? [] : ['alter-type'];
  if (/^ALTER\s+INDEX\b.*\bRENAME\b/.test(s)) return ['rename'];
  const table = /^ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?(?:"[^"]+"|[\w.]+)\s+(.*?);?$/.exec(s);
  return table ? [...new Set(actions(table[1]!).flatMap(actionRules))] : [];
}

describe('expand, then contract', () => {
  it.each<[string, Rule[]]>([
    ['ALTER TABLE users DROP COLUMN locale;', ['drop-column']],
    ['ALTER TABLE users DROP locale;', ['drop-column']],
    ['ALTER TABLE users ADD COLUMN a text, DROP COLUMN IF EXISTS b;', ['drop-column']],
    ['ALTER TABLE api_tokens DROP CONSTRAINT api_tokens_user_id_key;', ['drop-constraint']],
    ['DROP TABLE webhooks;', ['drop-table']],
    ['DROP INDEX api_tokens_active_by_user;', ['drop-index']],
    ['ALTER TABLE users RENAME COLUMN plan TO tier;', ['rename']],
    ['ALTER TABLE users RENAME TO accounts;', ['rename']],
    ['ALTER TABLE users ALTER COLUMN daily_usage TYPE bigint;', ['column-type']],
    ['ALTER TABLE users ALTER daily_usage SET DATA TYPE bigint;', ['column-type']],
    ['ALTER TABLE users ALTER COLUMN locale SET NOT NULL;', ['set-not-null']],
    ['ALTER TABLE users ADD COLUMN tier text NOT NULL;', ['add-not-null-without-default']],
    ['ALTER TABLE refresh_tokens ALTER COLUMN device DROP DEFAULT;', ['drop-default']],
    ['ALTER TYPE plan_kind RENAME VALUE \'a\' TO \'b\';', ['alter-type']],
    // What only adds, or only relaxes:
    ["ALTER TABLE api_tokens ADD COLUMN name text NOT NULL DEFAULT 'default';", []],
    ["ALTER TABLE users ADD COLUMN note text DEFAULT 'DROP COLUMN x';", []],
    ['ALTER TABLE users ADD COLUMN locale text;', []],
    ['ALTER TABLE users ALTER COLUMN locale DROP NOT NULL, ALTER COLUMN plan SET DEFAULT \'free\';', []],
    ['ALTER TABLE users ADD CONSTRAINT users_locale_check CHECK (locale IS NOT NULL) NOT VALID;', []],
    ['CREATE INDEX api_tokens_by_start ON api_tokens (start);', []],
    ['ALTER TYPE plan_kind ADD VALUE \'team\';', []],
  ])('%s → %j', (statement, rules) => {
    expect(contractRules(statement)).toEqual(rules);
  });

  it(`every migration added since the previous release (${PREVIOUS_RELEASE.slice(0, 12)}) only expands the schema`, async () => {
    const previous = new Set(await previousReleaseMigrations());
    const added = migrationFiles().filter((file) => !previous.has(file));
    expect(added.length).toBeGreaterThan(0);
    const found: string[] = [];
    const allowedUsed = new Set<string>();
    for (const file of added) {
      const allowed = CONTRACT_STEPS[file] ?? [];
      for (const statement of splitStatements(readFileSync(path.join(MIGRATIONS_DIR, file), 'utf8'))) {
        for (const rule of contractRules(statement)) {
          if (allowed.some((a) => a.rule === rule)) allowedUsed.add(`${file}: ${rule}`);
          else found.push(`${file}: ${rule} (${WHY[rule]}): ${statement.replace(/\s+/g, ' ')}`);
        }
      }
    }
    const advice = 'A rolling upgrade runs the previous release on the migrated database: expand now, contract in a later release, '
      + 'as docs/operating.md ("Upgrading a running fleet") says; a reviewed contract step goes in CONTRACT_STEPS with why it is safe.';
    expect(found, advice).toEqual([]);
    const listed = Object.entries(CONTRACT_STEPS).flatMap(([file, steps]) => steps.map((s) => `${file}: ${s.rule}`));
    expect(listed.filter((entry) => !allowedUsed.has(entry)), 'CONTRACT_STEPS entries that match nothing').toEqual([]);
  });

  it('the previous release\'s migrations are unchanged: an edit would never reach a database already past them', async () => {
    for (const file of await previousReleaseMigrations()) {
      const then = execFileSync('git', ['show', `${PREVIOUS_RELEASE}:migrations/${file}`], { cwd: ROOT, encoding: 'utf8' });
      expect(readFileSync(path.join(MIGRATIONS_DIR, file), 'utf8'), file).toBe(then);
    }
  });
});
