// Every error the gateway answers is in the catalog (src/errors/, CONTRACT §20), never spelled
// inline: with one exemption, which CONTRACT §31 makes: "SCIM's errors are SCIM's and stay outside
// the catalog". A directory (Okta, Entra ID) reads RFC 7644 §3.12's shape ({schemas, status as a
// string, scimType, detail}, application/scim+json), which no catalog style (spec body, codes,
// problem details, languages) gives. This keeps the exemption as narrow as its reason: that shape is
// built in src/scim/errors.ts only, used only by the files serving /scim/v2, and nowhere else in
// the gateway; the SCIM token endpoints under /api/v1/orgs answer with the catalog like their neighbours.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = path.resolve(import.meta.dirname, '../../src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith('.ts') ? [path.relative(SRC, full)] : [];
  });
}

const read = (file: string) => readFileSync(path.join(SRC, file), 'utf8');
const FILES = sourceFiles(SRC);

describe('SCIM\'s errors, the one exemption from the catalog', () => {
  it('SCIM\'s error shape and media type appear in src/scim/ only', () => {
    const outside = FILES.filter((f) => !f.startsWith('scim/') && /scim\+json|messages:2\.0:Error/.test(read(f)));
    expect(outside).toEqual([]);
  });

  it('inside it, only errors.ts builds the body; the token endpoints (under /api/v1/orgs) use the catalog', () => {
    const building = FILES.filter((f) => f.startsWith('scim/') && f !== 'scim/errors.ts' && /messages:2\.0:Error|scimType:/.test(read(f)));
    expect(building).toEqual([]);
    const tokens = read('scim/tokens.ts');
    expect(tokens).not.toMatch(/from '\.\/errors\.js'/);
    expect(tokens).toMatch(/sendError\(reply, /);
  });
});
