// Backups (CONTRACT §25), as docs/operating.md's two blocks say, run as written: embedded storage
// with `gateway backup` and `gateway restore` (the built CLI), Postgres with pg_dump and pg_restore.
// Either way the users, keys, usage and audit survive, and the restored gateway accepts the tokens
// and API keys issued before the backup.
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, ensureBuilt, gateway } from '../helpers/cli.js';
import { docsBlock } from '../helpers/docs.js';
import {
  bearer, closeSql, describeWithServices, makeUser, startTestGateway, testConfig, throwawayDatabase, TEST_JWT_SECRET, type TestGateway, type TestUser,
} from '../helpers/gateway.js';

interface Seeded {
  user: TestUser;
  key: string;
}

/** A pro user with an API key, a counted use, and audit events. */
async function seed(gw: TestGateway): Promise<Seeded> {
  const user = await makeUser(gw, { plan: 'pro' });
  const key = (await gw.post('/api/v1/user/api-token', {}, { headers: bearer(user.access) })).json.api_token as string;
  expect(key).toBeTruthy();
  await gw.services.db.query('UPDATE users SET daily_usage = 7, last_usage_date = CURRENT_DATE WHERE id = $1', [user.id]);
  return { user, key };
}

/** What must have survived, seen through the restored gateway. */
async function expectSurvived(gw: TestGateway, { user, key }: Seeded): Promise<void> {
  const me = await gw.get('/api/v1/user/me', { headers: bearer(user.access) });
  expect(me.status, me.text).toBe(200);
  expect(me.json).toMatchObject({ user_id: user.id, email: user.email, plan: 'pro', daily_usage: 7 });
  expect((await gw.get('/api/v1/user/me', { headers: { 'x-api-key': key } })).status).toBe(200);
  expect((await gw.post('/api/v1/auth/login', { email: user.email, password: user.password })).status).toBe(200);
  const audit = await gw.services.db.query<{ type: string }>('SELECT type FROM audit_events WHERE user_id = $1', [user.id]);
  expect(audit.map((e) => e.type)).toEqual(expect.arrayContaining(['user.registered', 'api_key.created']));
}

/** Runs a docs block in bash as a terminal would, stopping at the first failing command. */
function runBlock(block: string, cwd: string, env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('bash', ['-e', '-o', 'pipefail', '-c', block], { cwd, env, timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

describeWithServices('backups (docs/operating.md#backups)', () => {
  let work: string;
  let env: Record<string, string>;

  beforeAll(() => {
    ensureBuilt();
    work = mkdtempSync(path.join(tmpdir(), 'gw-backup-'));
    const bin = path.join(work, 'bin');
    mkdirSync(bin);
    symlinkSync(CLI, path.join(bin, 'gateway'));
    env = { PATH: [path.dirname(process.execPath), bin, process.env.PATH ?? ''].join(path.delimiter), HOME: process.env.HOME ?? work };
  });
  afterAll(async () => {
    rmSync(work, { recursive: true, force: true });
    await closeSql();
  });

  describe('embedded storage', () => {
    let cwd: string;
    const embedded = () => testConfig({ storage: { postgres: '', embeddedDir: path.join(cwd, 'data'), redis: '' } });

    beforeAll(() => {
      cwd = path.join(work, 'embedded');
      // A project with the gateway installed, as npx finds it: node_modules/.bin/gateway.
      mkdirSync(path.join(cwd, 'node_modules/.bin'), { recursive: true });
      symlinkSync(CLI, path.join(cwd, 'node_modules/.bin/gateway'));
      // The file the CLI reads: the same storage and signing key as the gateways of this test.
      writeFileSync(path.join(cwd, 'gateway.yaml'), `storage: { postgres: "", redis: "", embeddedDir: ./data }\nauth: { jwt: { secret: "${TEST_JWT_SECRET}" } }\n`);
    });

    it('backs up with the gateway stopped, restores into a new directory, and the restored gateway knows everyone', { timeout: 120_000 }, async () => {
      let gw = await startTestGateway(embedded());
      const seeded = await seed(gw);
      // While the gateway holds the directory, a backup is refused rather than copied mid-write.
      const busy = await gateway(['backup', '--out', 'busy.backup'], { cwd, env });
      expect(busy.code).toBe(1);
      expect(busy.stderr).toMatch(/in use by process/);
      expect(existsSync(path.join(cwd, 'busy.backup'))).toBe(false);
      await gw.close();

      const { code, stdout, stderr } = await runBlock(docsBlock('operating', 'backup-embedded'), cwd, env);
      expect(code, stderr).toBe(0);
      expect(stdout).toMatch(/^backed up .*data to gateway\.backup \(\d+ bytes\)\nrestored gateway\.backup into .*data\n$/);

      gw = await startTestGateway(embedded());
      try {
        await expectSurvived(gw, seeded);
      } finally {
        await gw.close();
      }
    });

    it('never restores over a database, and refuses a file that is not a backup, leaving nothing behind', async () => {
      const over = await gateway(['restore', 'gateway.backup'], { cwd, env });
      expect(over.code).toBe(1);
      expect(over.stderr).toMatch(/already holds a database/);
      writeFileSync(path.join(cwd, 'junk.backup'), 'not a backup');
      writeFileSync(path.join(cwd, 'junk.yaml'), 'storage: { postgres: "", redis: "", embeddedDir: ./data-junk }\n');
      const junk = await gateway(['restore', 'junk.backup', '--config', 'junk.yaml'], { cwd, env });
      expect(junk.code).toBe(1);
      expect(junk.stderr).toMatch(/junk\.backup is not a backup this gateway can restore/);
      expect(existsSync(path.join(cwd, 'data-junk')) ? readdirSync(path.join(cwd, 'data-junk')) : []).toEqual([]);
      writeFileSync(path.join(cwd, 'pg.yaml'), 'storage: { postgres: "postgres://127.0.0.1:5432/none" }\n');
      const onPostgres = await gateway(['backup', '--out', 'x', '--config', 'pg.yaml'], { cwd, env });
      expect(onPostgres.code).toBe(1);
      expect(onPostgres.stderr).toMatch(/back it up with pg_dump/);
    });
  });

  it('Postgres: pg_dump and pg_restore as documented, and the restored gateway accepts the same tokens and keys', async () => {
    const source = await throwawayDatabase();
    const target = await throwawayDatabase();
    try {
      const gw = await startTestGateway(testConfig({ storage: source.storage }));
      let seeded: Seeded;
      try {
        seeded = await seed(gw);
      } finally {
        await gw.close();
      }
      const cwd = path.join(work, 'postgres');
      mkdirSync(cwd);
      const { code, stderr } = await runBlock(docsBlock('operating', 'backup-postgres'), cwd, { ...env, DATABASE_URL: source.url, RESTORE_URL: target.url });
      expect(code, stderr).toBe(0);
      const restored = await startTestGateway(testConfig({ storage: target.storage }));
      try {
        await expectSurvived(restored, seeded);
      } finally {
        await restored.close();
      }
    } finally {
      await source.drop();
      await target.drop();
    }
  });
});
