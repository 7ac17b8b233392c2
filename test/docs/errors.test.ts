// docs/errors.md is the error catalog as clients read it: its table is `gateway errors --markdown`
// (src/errors/listing.ts, made from src/errors/catalog.ts), kept equal here.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { catalogTable } from '../../src/errors/listing.js';

const BEGIN = '<!-- catalog: gateway errors --markdown -->';
const END = '<!-- end of catalog -->';

describe('docs/errors.md', () => {
  it('holds the catalog\'s table, entry for entry (regenerate it with `gateway errors --markdown`)', () => {
    const page = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');
    const start = page.indexOf(BEGIN);
    const end = page.indexOf(END);
    expect(start, `docs/errors.md has no "${BEGIN}" line`).toBeGreaterThan(-1);
    expect(page.slice(start + BEGIN.length, end).trim()).toBe(catalogTable());
  });
});
