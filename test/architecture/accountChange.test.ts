// The lock order of account changes is written once (docs/architecture.md, "where a new piece
// goes"): src/account/change.ts locks the user's row and hands the change its writers; storage
// defines the lock. A handler that took the lock itself could take it after another row, or
// forget it, and two changes of one account could then deadlock or miss each other.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = path.resolve(import.meta.dirname, '../../src');
const THE_RECIPE = 'account/change.ts';
/** A call or a mention of the storage function as a value: `lockUser(`, `users.lockUser`, `{ lockUser }`. */
const LOCK_USER = /\blockUser\b/;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

/** The lines of `text` that are code, comments left out (a comment may name the lock to say why). */
const codeLines = (text: string) => text.replace(/\/\*[\s\S]*?\*\//g, (comment) => comment.replace(/[^\n]/g, '')).split('\n').map((line) => line.replace(/\/\/.*$/, ''));

describe('account changes', () => {
  it('lock the user\'s row only through src/account/change.ts: no file outside it and storage/ calls lockUser', () => {
    const callers = sourceFiles(SRC).flatMap((file) => {
      const relative = path.relative(SRC, file);
      if (relative === THE_RECIPE || relative.startsWith('storage/')) return [];
      return codeLines(readFileSync(file, 'utf8')).flatMap((line, i) => (LOCK_USER.test(line) ? [`${relative}:${i + 1}`] : []));
    });
    expect(callers).toEqual([]);
  });

  it('the recipe does lock it, with the function storage defines', () => {
    expect(readFileSync(path.join(SRC, THE_RECIPE), 'utf8')).toMatch(/users\.lockUser\(tx, lock\.userId, lock\.mode\)/);
    expect(readFileSync(path.join(SRC, 'storage/accounts/users.ts'), 'utf8')).toMatch(/export async function lockUser\(/);
  });
});
