// docs/errors.md is the error catalog as clients read it: every entry of ERRORS (src/errors.ts)
// appears there verbatim, with its status and name, and the page lists nothing the catalog lacks.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERRORS } from '../../src/errors.js';

interface Row { name: string; status: number; message: string }

/** The rows of the page's "Catalog" table: | status | `message` … | when | `name` |. */
function documentedRows(): Row[] {
  const page = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');
  const section = /^## Catalog\n([\s\S]*?)(?=^## )/m.exec(page)?.[1];
  if (!section) throw new Error('docs/errors.md has no "## Catalog" section');
  return section.split('\n').filter((line) => /^\| \d/.test(line)).map((line) => {
    const row = /^\| (\d{3}) \| `([^`]+)`.*\| `(\w+)` \|$/.exec(line);
    if (!row) throw new Error(`docs/errors.md: a catalog row not in the form | status | \`message\` | when | \`name\` |: ${line}`);
    return { status: Number(row[1]), message: row[2]!, name: row[3]! };
  });
}

const byName = (a: Row, b: Row) => a.name.localeCompare(b.name);

describe('docs/errors.md', () => {
  it('lists every catalog entry verbatim, with its status, and nothing else', () => {
    const catalog = Object.entries(ERRORS).map(([name, { status, message }]) => ({ name, status, message }));
    expect(documentedRows().sort(byName)).toEqual(catalog.sort(byName));
  });
});
