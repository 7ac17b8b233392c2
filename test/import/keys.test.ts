// API keys imported by their SHA-256 (CONTRACT §27, §21; src/import/keys.ts), in this process on the
// run's database: each line's checks with the reason an operator reads, owners found by email, a
// hash stored lower-case and never twice, the dry run writing nothing, the batch's audit row.
import { createHash, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { importKeys } from '../../src/import/keys.js';
import { closeSql, describeWithServices, makeUser, sql, startTestGateway, testConfig, type TestGateway, type TestUser } from '../helpers/gateway.js';

const NOW = new Date('2026-06-01T12:00:00Z');
const hash = () => createHash('sha256').update(randomUUID()).digest('hex');

describeWithServices('importing API keys by their SHA-256', () => {
  let gw: TestGateway;
  let owner: TestUser;
  beforeAll(async () => {
    gw = await startTestGateway(testConfig());
    owner = await makeUser(gw);
  });
  afterAll(async () => {
    await gw?.close();
    await closeSql();
  });

  const run = (lines: unknown[], dryRun = false) => importKeys(gw.services.db, lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n'), {
    dryRun, knownScopes: new Set(['reports:read', 'reports:write']), actor: 'cli', clock: () => NOW,
  });
  const stored = (digest: string) => sql<{ user_id: number; name: string; scopes: string[] | null; expires_at: Date | null; start: string | null }>(
    'SELECT user_id, name, scopes, expires_at, start FROM api_tokens WHERE token_hash = $1', [digest]);

  it('refuses each line that is not a key, with its line, its email when it had one, and why', async () => {
    const good = { email: owner.email, sha256: hash() };
    const report = await run([
      'not json', '[1]', 'null', { ...good, owner: 'x' }, { sha256: hash() }, { email: 'not an email', sha256: hash() },
      { ...good, sha256: 'abc' }, { ...good, sha256: `x${hash()}` }, { ...good, sha256: `${hash()}0` }, { ...good, sha256: 'g'.repeat(64) },
      { ...good, name: '' }, { ...good, name: 'n'.repeat(65) }, { ...good, name: 'a\u202eb' }, { ...good, name: 7 },
      { ...good, scopes: [] }, { ...good, scopes: 'reports:read' }, { ...good, scopes: ['reports:read', 3] }, { ...good, scopes: ['reports:read', 'admin:all'] },
      { ...good, expires_at: 'soon' }, { ...good, expires_at: '2026-06-01T11:59:59Z' }, { ...good, expires_at: NOW.toISOString() },
      { email: `nobody-${randomUUID()}@example.test`, sha256: hash() },
    ]);
    const email = owner.email;
    expect(report.refusals).toEqual([
      { line: 1, reason: 'not JSON' }, { line: 2, reason: 'not a JSON object' }, { line: 3, reason: 'not a JSON object' },
      { line: 4, email, reason: 'unknown field "owner": expected email, name, sha256, scopes, expires_at' },
      { line: 5, reason: 'email: expected the owner\'s email' }, { line: 6, email: 'not an email', reason: 'email: expected the owner\'s email' },
      ...[7, 8, 9, 10].map((line) => ({ line, email, reason: 'sha256: expected the SHA-256 of the key, 64 hex digits' })),
      ...[11, 12, 13, 14].map((line) => ({ line, email, reason: 'name: expected 1 to 64 printable characters' })),
      ...[15, 16, 17].map((line) => ({ line, email, reason: 'scopes: expected a non-empty list of scopes, or null' })),
      { line: 18, email, reason: 'scopes: no route declares "admin:all"' },
      { line: 19, email, reason: 'expires_at: expected an ISO 8601 time such as 2024-01-15T10:30:00Z' },
      { line: 20, email, reason: 'expires_at: the key has expired' }, { line: 21, email, reason: 'expires_at: the key has expired' },
      { line: 22, email: expect.stringMatching(/^nobody-/), reason: 'no user has this email' },
    ]);
    expect(report).toMatchObject({ created: 0, skipped_existing: 0, refused: 22 });
  });

  it('stores the digest lower-case with its name (default "default"), scopes (deduplicated, * kept) and expiry; never twice, in a file or across runs', async () => {
    const [a, b, c] = [hash().toUpperCase(), hash(), hash()];
    const lines = [
      { email: ` ${owner.email.toUpperCase()} `, sha256: a },
      { email: owner.email, name: 'n'.repeat(64), sha256: b, scopes: ['reports:read', 'reports:read', '*'], expires_at: '2027-01-01T00:00:00Z' },
      { email: owner.email, sha256: c, scopes: null },
      { email: owner.email, name: 'again', sha256: b.toUpperCase() },
    ];
    expect(await run(lines, true)).toEqual({ dry_run: true, created: 3, skipped_existing: 1, refused: 0, refusals: [] });
    expect(await stored(a.toLowerCase())).toEqual([]);
    expect(await run(lines)).toEqual({ dry_run: false, created: 3, skipped_existing: 1, refused: 0, refusals: [] });
    expect(await stored(a.toLowerCase())).toEqual([{ user_id: owner.id, name: 'default', scopes: null, expires_at: null, start: null }]);
    expect(await stored(b)).toEqual([{ user_id: owner.id, name: 'n'.repeat(64), scopes: ['reports:read', '*'], expires_at: new Date('2027-01-01T00:00:00Z'), start: null }]);
    expect(await stored(c)).toMatchObject([{ scopes: null }]);
    const [audited] = await sql<{ data: Record<string, unknown> }>("SELECT data FROM audit_events WHERE type = 'api_key.imported' ORDER BY id DESC LIMIT 1");
    expect(audited!.data).toEqual({ created: 3, skipped_existing: 1, refused: 0 });
    // Again: every hash is stored already, whoever holds it.
    expect(await run(lines)).toMatchObject({ created: 0, skipped_existing: 4, refused: 0 });
    expect(await run(lines, true)).toMatchObject({ created: 0, skipped_existing: 4 });
  });
});
