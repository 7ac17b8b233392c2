// `gateway import users|keys` and POST /admin/v1/import/users (CONTRACT §27), run as operators run
// them: the built CLI in its own process on a database of this file's own (the docs' example
// files name fixed people), the docs' commands as written, their shown output checked.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CLI, ensureBuilt, gateway, type CliRun } from '../helpers/cli.js';
import { docsBlock, docsExample, expectShown, shownOutput } from '../helpers/docs.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import {
  ADMIN_KEY, closeSql, describeWithServices, marker, queriesDuring, startTestGateway, whileFeedTrusted, testConfig, testConfigFromYaml, throwawayDatabase, TEST_JWT_SECRET,
  type TestGateway, type ThrowawayDatabase,
} from '../helpers/gateway.js';
import { importUsers, readUsers } from '../../src/import/index.js';
import type { Database } from '../../src/storage/database/db.js';
import { request } from '../helpers/http.js';
import { sparePort } from '../helpers/ports.js';

const RAW_KEY = 'gw_legacy_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6';
const FILES: Record<string, string> = {
  'users.csv': 'users-csv', 'auth0.json': 'auth0-export', 'supabase.csv': 'supabase-export', 'users.json': 'firebase-export', 'keys.jsonl': 'keys-export',
};

const FIREBASE_KEY = 'jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA==';

describeWithServices('gateway import', () => {
  let db: ThrowawayDatabase;
  let dir: string;
  let configFile: string;
  let upstream: EchoUpstream;
  let plain: TestGateway;
  let forwarding: TestGateway;

  const cli = (...args: string[]) => gateway([...args, '--config', configFile], { cwd: dir, timeout: 120_000 });
  const users = () => db.sql<Record<string, unknown>>('SELECT email, password_hash, plan, is_active, email_verified_at, created_at, external_id FROM users ORDER BY id');
  const write = (name: string, text: string) => writeFileSync(path.join(dir, name), text);

  /** A docs block of `gateway` commands run as written (each with --config), its output checked against the comments. */
  async function runBlock(name: string): Promise<CliRun[]> {
    const block = docsBlock('migrating', name);
    const runs: CliRun[] = [];
    for (const line of block.split('\n')) {
      const command = line.replace(/\s{2,}#.*$/, '').trim();
      if (!command || command.startsWith('#')) continue;
      const [program, ...args] = command.split(/\s+/);
      expect(program).toBe('gateway');
      runs.push(await cli(...args));
    }
    expectShown(runs.map((r) => r.stdout).join(''), shownOutput(block));
    return runs;
  }

  beforeAll(async () => {
    ensureBuilt();
    db = await throwawayDatabase({ migrated: true });
    dir = mkdtempSync(path.join(tmpdir(), 'gw-import-'));
    configFile = path.join(dir, 'gateway.yaml');
    write('gateway.yaml', [
      'storage:', `  postgres: ${JSON.stringify(db.url)}`, 'admin:', `  apiKey: ${JSON.stringify(ADMIN_KEY)}`, 'auth:', '  jwt:', `    secret: ${JSON.stringify(TEST_JWT_SECRET)}`,
      'routes:', '  - path: /reports', '    upstream: app', '    scopes: [reports:read]', 'upstreams:', '  app:', '    url: http://127.0.0.1:9', '',
    ].join('\n'));
    for (const [file, block] of Object.entries(FILES)) write(file, docsBlock('migrating', block));
    upstream = await startEchoUpstream();
    const routes = { upstreams: { app: { url: upstream.url } }, routes: [{ path: '/private', upstream: 'app', auth: 'required' }] };
    plain = await startTestGateway(testConfig({ storage: db.storage, admin: { host: '127.0.0.1', port: await sparePort() }, ...routes }));
    const yaml = `${docsExample('migrating', 'forward-external-id')}upstreams:\n  app:\n    url: ${upstream.url}\nroutes:\n  - path: /private\n    upstream: app\n    auth: required\n`;
    const config = testConfigFromYaml(yaml);
    forwarding = await startTestGateway({ ...config, storage: { ...config.storage, ...db.storage } } as typeof config);
  }, 120_000);

  afterAll(async () => {
    await Promise.all([plain?.close(), forwarding?.close()]);
    await upstream?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
    await db?.drop();
    await closeSql();
  });

  it('imports the docs\' files as the page shows: CSV, Auth0, Supabase, Firebase; hashes verbatim, audited per batch without them', async () => {
    const [dry, first, second] = await runBlock('import-csv');
    expect([dry!.code, first!.code, second!.code]).toEqual([1, 1, 1]);
    expect((await runBlock('import-auth0'))[0]!.code).toBe(0);
    expect((await runBlock('import-supabase'))[0]!.code).toBe(0);
    expect((await runBlock('import-firebase'))[0]!.code).toBe(1);
    const rows = await users();
    expect(rows.map((r) => r.email)).toEqual(expect.arrayContaining(['ada@example.com', 'alan@example.com', 'ken@example.com', 'hedy@example.com']));
    expect(rows).toHaveLength(4 + 3 + 3 + 2);
    expect(rows.find((r) => r.email === 'ada@example.com')).toMatchObject({
      password_hash: '$2b$10$SoU5.WPa.McB32Izq0bK2eh4fKPgMx2Z4vnTM9AoSuZ4GgDVItELm', plan: 'pro', is_active: 1, external_id: 'cust_1001',
    });
    expect(rows.find((r) => r.email === 'margaret@example.com')).toMatchObject({ password_hash: null, plan: 'premium', is_active: 0 });
    expect(rows.find((r) => r.email === 'hedy@example.com')!.password_hash).toMatch(/^\$firebase-scrypt\$rounds=8,mem=14,sep=Bw,key=jxspr8Ki0RY[^$]*\$42xEC\+ixf3L2lw\$lSrfV15/);
    expect(await db.sql('SELECT u.plan, s.plan AS subscription FROM users u JOIN subscriptions s ON s.user_id = u.id WHERE u.email = $1', ['ada@example.com']))
      .toEqual([{ plan: 'pro', subscription: 'pro' }]);
    const audit = await db.sql<{ actor: string; user_id: number | null; data: Record<string, unknown> }>("SELECT actor, user_id, data FROM audit_events WHERE type = 'user.imported' ORDER BY id");
    expect(audit.slice(0, 2)).toEqual([
      { actor: 'cli', user_id: null, data: { format: 'csv', created: 4, skipped_existing: 0, refused: 2 } },
      { actor: 'cli', user_id: null, data: { format: 'csv', created: 0, skipped_existing: 4, refused: 2 } },
    ]);
    expect(JSON.stringify(audit)).not.toMatch(/\$2b\$|\$argon2|firebase-scrypt/);
  });

  it('a second run of every file changes nothing: same rows, same hashes, all skipped', async () => {
    const before = await users();
    for (const [file, format, extra] of [['users.csv', 'csv'], ['auth0.json', 'auth0'], ['supabase.csv', 'supabase'],
      // The project's signer key as the docs give it: a key no login could check (too short) is refused at import.
      ['users.json', 'firebase', ['--hash-key', FIREBASE_KEY, '--salt-separator', 'Bw==', '--rounds', '8', '--mem-cost', '14']]] as Array<[string, string, string[]?]>) {
      const run = await cli('import', 'users', file, '--format', format, ...(extra ?? []));
      expect(run.stdout).toMatch(/(^|\n)created: 0\nskipped_existing: [234]\n/);
    }
    expect(await users()).toEqual(before);
  });

  it('--dry-run reports what a run would do and writes nothing; exit 1 only when a line is refused', async () => {
    const tag = marker();
    write(`${tag}.csv`, `email,external_id\n${tag}-1@example.test,${tag}-1\n${tag}-2@example.test,${tag}-2\nada@example.com,\n${tag}-3@example.test,cust_1001\n`);
    const auditBefore = await db.sql('SELECT id FROM audit_events');
    const dry = await cli('import', 'users', `${tag}.csv`, '--dry-run');
    const refusal = `line 5 (${tag}-3@example.test): refused: external_id: another user has it\n`;
    expect(dry).toMatchObject({ code: 1, stdout: `${refusal}created: 2\nskipped_existing: 1\nrefused: 1\n(dry run: nothing was written)\n` });
    expect(await db.sql('SELECT email FROM users WHERE email LIKE $1', [`${tag}%`])).toEqual([]);
    expect(await db.sql('SELECT id FROM audit_events')).toEqual(auditBefore);
    const real = await cli('import', 'users', `${tag}.csv`);
    expect(real).toMatchObject({ code: 1, stdout: `${refusal}created: 2\nskipped_existing: 1\nrefused: 1\n` });
    write(`${tag}-ok.csv`, `email\n${tag}-4@example.test\n`);
    expect(await cli('import', 'users', `${tag}-ok.csv`)).toMatchObject({ code: 0, stdout: 'created: 1\nskipped_existing: 0\nrefused: 0\n' });
    expect(await cli('import', 'users', `${tag}-ok.csv`, '--format', 'firebase')).toMatchObject({ code: 1, stderr: expect.stringContaining('--format firebase needs --hash-key') });
  });

  it('imports keys by SHA-256: the raw key then authenticates; a second run skips it', async () => {
    await runBlock('import-keys');
    expect(await db.sql('SELECT name, start, scopes, token_hash FROM api_tokens')).toEqual([
      { name: 'production', start: null, scopes: null, token_hash: createHash('sha256').update(RAW_KEY).digest('hex') },
    ]);
    const m = marker();
    expect((await plain.get(`/private/${m}`, { headers: { 'x-api-key': RAW_KEY } })).status).toBe(200);
    const [ada] = await db.sql<{ id: number }>('SELECT id FROM users WHERE email = $1', ['ada@example.com']);
    expect(upstream.last(m)!.headers['x-user-id']).toBe(String(ada!.id));
    expect((await cli('import', 'keys', 'keys.jsonl')).stdout).toMatch(/\ncreated: 0\nskipped_existing: 1\nrefused: 1\n$/);
    expect(await db.sql("SELECT actor, user_id, data FROM audit_events WHERE type = 'api_key.imported' ORDER BY id")).toEqual([
      { actor: 'cli', user_id: null, data: { created: 1, skipped_existing: 0, refused: 1 } },
      { actor: 'cli', user_id: null, data: { created: 0, skipped_existing: 1, refused: 1 } },
    ]);
    write('bad-keys.jsonl', '{"email":"ada@example.com","sha256":"abc"}\n{"email":"ada@example.com","sha256":"' + 'b'.repeat(64) + '","scopes":["admin:all"]}\n');
    expect((await cli('import', 'keys', 'bad-keys.jsonl')).stdout).toBe('line 1 (ada@example.com): refused: sha256: expected the SHA-256 of the key, 64 hex digits\n'
      + 'line 2 (ada@example.com): refused: scopes: no route declares "admin:all"\ncreated: 0\nskipped_existing: 0\nrefused: 2\n');
  });

  it('upstreams receive x-user-external-id only with import.forwardExternalId, never a client\'s copy', async () => {
    const forged = { 'x-api-key': RAW_KEY, 'x-user-external-id': 'forged', X_User_External_Id: 'forged' };
    const [on, off] = [marker(), marker()];
    expect((await forwarding.get(`/private/${on}`, { headers: forged })).status).toBe(200);
    expect((await plain.get(`/private/${off}`, { headers: forged })).status).toBe(200);
    expect(upstream.last(on)!.headers['x-user-external-id']).toBe('cust_1001');
    expect(upstream.last(off)!.headers['x-user-external-id']).toBeUndefined();
    expect(upstream.last(off)!.rawHeaders.filter((h) => /external/i.test(h))).toEqual([]);
    // The external id comes with the cached user record: a request of a known key and user makes no query.
    await whileFeedTrusted(forwarding, async () => {
      const again = marker();
      expect(await queriesDuring(forwarding, () => forwarding.get(`/private/${again}`, { headers: { 'x-api-key': RAW_KEY } }))).toEqual([]);
      expect(upstream.last(again)!.headers['x-user-external-id']).toBe('cust_1001');
    });
  });

  it('the admin API imports the same JSON lines and finds users by external_id', async () => {
    const tag = marker();
    const admin = (method: string, url: string, options: Parameters<typeof request>[3] = {}) =>
      request(plain.adminUrl!, method, url, { ...options, headers: { authorization: `Bearer ${ADMIN_KEY}`, ...options.headers } });
    const body = `{"email":"${tag}-a@example.test","external_id":"${tag}-a","plan":"pro"}\n{"email":"${tag}-b@example.test","plan":"gold"}\n{"email":"ada@example.com"}\n`;
    const ndjson = { 'content-type': 'application/x-ndjson' };
    const dry = await admin('POST', '/admin/v1/import/users?dry_run=true', { body, headers: ndjson });
    expect(dry.status).toBe(200);
    const refusals = [{ line: 2, email: `${tag}-b@example.test`, reason: 'unknown plan "gold": expected one of free, premium, pro' }];
    expect(dry.json).toEqual({ dry_run: true, created: 1, skipped_existing: 1, refused: 1, refusals });
    const done = await admin('POST', '/admin/v1/import/users', { body, headers: { 'content-type': 'text/plain' } });
    expect(done.json).toMatchObject({ dry_run: false, created: 1, skipped_existing: 1, refused: 1 });
    expect((await db.sql("SELECT actor, data FROM audit_events WHERE type = 'user.imported' ORDER BY id DESC LIMIT 1"))[0])
      .toEqual({ actor: 'admin', data: { format: 'json', created: 1, skipped_existing: 1, refused: 1 } });
    const found = await admin('GET', `/admin/v1/users?query=${tag}-a`);
    expect(found.json.users).toEqual([expect.objectContaining({ email: `${tag}-a@example.test`, plan: 'pro', external_id: `${tag}-a` })]);
    expect((await admin('GET', `/admin/v1/users/${found.json.users[0].id}`)).json.external_id).toBe(`${tag}-a`);
    // Not text, or a dry_run of another word: the catalog's refusal.
    for (const bad of [admin('POST', '/admin/v1/import/users', { json: { email: 'x@example.test' } }), admin('POST', '/admin/v1/import/users?dry_run=yes', { body, headers: ndjson })]) {
      expect(await bad).toMatchObject({ status: 400, json: { error: 'Import invalide : des lignes JSON attendues (dry_run true ou false)' } });
    }
    expect((await request(plain.adminUrl!, 'POST', '/admin/v1/import/users', { body, headers: ndjson })).status).toBe(401);
  });

  it('--admin reads the file here and reports with the file\'s lines; the audit says admin, the key it used (CONTRACT §33)', async () => {
    const tag = marker();
    write(`${tag}.csv`, `email,plan\n${tag}-1@example.test,free\nnot mail,free\n${tag}-2@example.test,gold\n${tag}-3@example.test,pro\n`);
    const run = await gateway(['import', 'users', `${tag}.csv`, '--admin', plain.adminUrl!, '--config', configFile], { cwd: dir });
    expect(run).toMatchObject({
      code: 1,
      stdout: 'line 3 (not mail): refused: email is not a single mailbox the gateway accepts (CONTRACT §19)\n'
        + `line 4 (${tag}-2@example.test): refused: unknown plan "gold": expected one of free, premium, pro\ncreated: 2\nskipped_existing: 0\nrefused: 2\n`,
    });
    expect((await db.sql("SELECT actor FROM audit_events WHERE type = 'user.imported' ORDER BY id DESC LIMIT 1"))[0]).toEqual({ actor: 'admin' });
  });

  it('import keys --admin: through POST /admin/v1/import/keys, with the file\'s lines, audited by admin, the key it used (CONTRACT §33); the key then authenticates', async () => {
    const tag = marker();
    const raw = `sk_live_${tag}`;
    const sha256 = createHash('sha256').update(raw).digest('hex');
    write(`${tag}-keys.jsonl`, `\n{"email":"ada@example.com","name":"through the admin API","sha256":"${sha256}"}\n{"email":"${tag}@example.test","sha256":"${'c'.repeat(64)}"}\n`);
    const shown = `line 3 (${tag}@example.test): refused: no user has this email\ncreated: 1\nskipped_existing: 0\nrefused: 1\n`;
    const viaAdmin = (...more: string[]) => gateway(['import', 'keys', `${tag}-keys.jsonl`, '--admin', plain.adminUrl!, ...more, '--config', configFile], { cwd: dir });
    const dry = await viaAdmin('--dry-run');
    expect(dry, dry.stderr).toMatchObject({ code: 1, stdout: `${shown}(dry run: nothing was written)\n` });
    expect(await db.sql('SELECT name FROM api_tokens WHERE token_hash = $1', [sha256])).toEqual([]);
    expect(await viaAdmin()).toMatchObject({ code: 1, stdout: shown });
    expect(await db.sql('SELECT name, start FROM api_tokens WHERE token_hash = $1', [sha256])).toEqual([{ name: 'through the admin API', start: null }]);
    expect((await db.sql("SELECT actor, data FROM audit_events WHERE type = 'api_key.imported' ORDER BY id DESC LIMIT 1"))[0])
      .toEqual({ actor: 'admin', data: { created: 1, skipped_existing: 0, refused: 1 } });
    expect((await plain.get(`/private/${tag}`, { headers: { 'x-api-key': raw } })).status).toBe(200);
    // The endpoint itself: the admin key's caller is audited as admin; a second run skips; not JSON lines, or no key: refused.
    const body = `{"email":"ada@example.com","sha256":"${sha256}"}\n`;
    const again = await request(plain.adminUrl!, 'POST', '/admin/v1/import/keys', { body, headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/x-ndjson' } });
    expect([again.status, again.json]).toEqual([200, { dry_run: false, created: 0, skipped_existing: 1, refused: 0, refusals: [] }]);
    expect((await db.sql("SELECT actor FROM audit_events WHERE type = 'api_key.imported' ORDER BY id DESC LIMIT 1"))[0]).toEqual({ actor: 'admin' });
    const notLines = await request(plain.adminUrl!, 'POST', '/admin/v1/import/keys', { json: { email: 'ada@example.com' }, headers: { authorization: `Bearer ${ADMIN_KEY}` } });
    expect(notLines).toMatchObject({ status: 400, json: { error: 'Import invalide : des lignes JSON attendues (dry_run true ou false)' } });
    expect((await request(plain.adminUrl!, 'POST', '/admin/v1/import/keys', { body, headers: { 'content-type': 'application/x-ndjson' } })).status).toBe(401);
  });

  it('a storage failure stops the import and throws; the report holds the batches written before it, and a second run carries on', async () => {
    const tag = marker();
    const records = readUsers(Array.from({ length: 1500 }, (_, i) => JSON.stringify({ email: `${tag}-${i}@example.test` })).join('\n'), 'json', { plans: ['free'] });
    const real = plain.services.db;
    let batches = 0;
    // The second batch's transaction fails as a lost connection would (the one stub: a failure).
    const transaction: Database['transaction'] = (fn, options) => (++batches === 2 ? Promise.reject(new Error('connection lost')) : real.transaction(fn, options));
    const failing = { ...real, kind: real.kind, query: real.query.bind(real), transaction } as Database;
    const report = { dry_run: false, created: 0, skipped_existing: 0, refused: 0, refusals: [] };
    await expect(importUsers(failing, records, { dryRun: false, actor: 'cli', format: 'json' }, report)).rejects.toThrow('connection lost');
    expect(report).toMatchObject({ created: 1000, skipped_existing: 0, refused: 0 });
    expect(await db.sql('SELECT count(*)::int AS n FROM users WHERE email LIKE $1', [`${tag}-%`])).toEqual([{ n: 1000 }]);
    expect(await importUsers(real, records, { dryRun: false, actor: 'cli', format: 'json' })).toMatchObject({ created: 500, skipped_existing: 1000, refused: 0 });
  });

  it('two imports of one file at once, in two processes, create each user once', async () => {
    const tag = marker();
    const n = 2500;
    write(`${tag}.jsonl`, Array.from({ length: n }, (_, i) => JSON.stringify({ email: `${tag}-${i}@example.test`, external_id: `${tag}-${i}` })).join('\n'));
    const both = await Promise.all([0, 1].map(() => new Promise<CliRun>((resolve) => {
      execFile(process.execPath, [CLI, 'import', 'users', `${tag}.jsonl`, '--format', 'json', '--config', configFile], { cwd: dir, env: { PATH: process.env.PATH ?? '' }, timeout: 120_000 },
        (err, stdout, stderr) => resolve({ code: err ? Number(err.code) : 0, stdout, stderr }));
    })));
    const counts = both.map((r) => Object.fromEntries([...r.stdout.matchAll(/^(\w+): (\d+)$/gm)].map((m) => [m[1], Number(m[2])])));
    expect(both.map((r) => r.code)).toEqual([0, 0]);
    expect(counts[0]!.created! + counts[1]!.created!).toBe(n);
    expect(counts[0]!.skipped_existing! + counts[1]!.skipped_existing!).toBe(n);
    expect(await db.sql('SELECT count(*)::int AS n, count(DISTINCT email)::int AS emails FROM users WHERE email LIKE $1', [`${tag}-%`])).toEqual([{ n, emails: n }]);
  }, 120_000);
});
