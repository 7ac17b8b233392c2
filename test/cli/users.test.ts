// `gateway users set-plan|deactivate|activate EMAIL`, run as operators run it: the built CLI
// (dist/cli.js) in its own process, on a config file pointing at the run's database.
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bearer, closeSql, describeWithServices, eventually, makeUser, sql, startTestGateway, testConfig, testServices, TEST_JWT_SECRET, type TestGateway } from '../helpers/gateway.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const CLI = path.join(ROOT, 'dist/cli.js');

function newestSource(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestSource(full) : statSync(full).mtimeMs);
  }
  return newest;
}

/** `npm test` builds first; a run of this file alone builds when dist is missing or older than src. */
function ensureBuilt(): void {
  let built = 0;
  try { built = statSync(CLI).mtimeMs; } catch { /* not built */ }
  if (built < newestSource(path.join(ROOT, 'src'))) execFileSync('npm', ['run', 'build'], { cwd: ROOT, stdio: 'ignore' });
}

interface Run { code: number; stdout: string; stderr: string }

describeWithServices('gateway users …', () => {
  let dir: string;
  let configFile: string;
  let gw: TestGateway;

  const cli = (...args: string[]): Promise<Run> => new Promise((resolve) => {
    const env = { ...process.env };
    for (const name of ['GATEWAY_CONFIG', 'PORT', 'HOST', 'DATABASE_URL', 'REDIS_URL']) delete env[name];
    execFile(process.execPath, [CLI, ...args, '--config', configFile], { cwd: dir, env, timeout: 30_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
  });

  beforeAll(async () => {
    ensureBuilt();
    dir = mkdtempSync(path.join(tmpdir(), 'gw-cli-'));
    configFile = path.join(dir, 'gateway.yaml');
    writeFileSync(configFile, [
      'storage:',
      `  postgres: ${JSON.stringify(testServices!.postgres)}`,
      'auth:',
      '  jwt:',
      `    secret: ${JSON.stringify(TEST_JWT_SECRET)}`,
      'admin:',
      '  port: 0',
      '',
    ].join('\n'));
    gw = await startTestGateway(testConfig());
  }, 120_000);
  afterAll(async () => {
    await gw?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
    await closeSql();
  });

  it('set-plan changes the user and the subscription, and running gateways follow within a second', async () => {
    const user = await makeUser(gw);
    const headers = bearer(user.access);
    expect((await gw.post('/api/v1/user/api-token', {}, { headers })).status).toBe(403);

    const run = await cli('users', 'set-plan', `  ${user.email.toUpperCase()} `, 'pro');
    expect(run).toEqual({ code: 0, stdout: `user ${user.id} (${user.email}): plan free → pro\n`, stderr: '' });
    expect(await sql('SELECT u.plan, s.plan AS subscription FROM users u JOIN subscriptions s ON s.user_id = u.id WHERE u.id = $1', [user.id]))
      .toEqual([{ plan: 'pro', subscription: 'pro' }]);
    await eventually(async () => (await gw.post('/api/v1/user/api-token', {}, { headers })).status === 201, 1000);
  });

  it('deactivate and activate, seen by a running gateway within a second', async () => {
    const user = await makeUser(gw);
    const headers = bearer(user.access);
    expect((await gw.get('/api/v1/user/me', { headers })).status).toBe(200);

    const off = await cli('users', 'deactivate', user.email);
    expect(off).toEqual({ code: 0, stdout: `user ${user.id} (${user.email}): inactive\n`, stderr: '' });
    expect(await sql('SELECT is_active FROM users WHERE id = $1', [user.id])).toEqual([{ is_active: 0 }]);
    await eventually(async () => (await gw.get('/api/v1/user/me', { headers })).status === 401, 1000);

    const on = await cli('users', 'activate', user.email);
    expect(on).toEqual({ code: 0, stdout: `user ${user.id} (${user.email}): active\n`, stderr: '' });
    expect(await sql('SELECT is_active FROM users WHERE id = $1', [user.id])).toEqual([{ is_active: 1 }]);
    await eventually(async () => (await gw.get('/api/v1/user/me', { headers })).status === 200, 1000);
  });

  it('says clearly when the email or the plan is unknown, and exits 1 changing nothing', async () => {
    const user = await makeUser(gw);
    // Independent runs, in parallel: each CLI start costs a second or more on a busy machine.
    const [badPlan, unknownForPlan, unknownForDeactivate, noEmail] = await Promise.all([
      cli('users', 'set-plan', user.email, 'gold'),
      cli('users', 'set-plan', 'nobody@example.test', 'pro'),
      cli('users', 'deactivate', 'nobody@example.test'),
      cli('users', 'deactivate'),
    ]);
    expect(badPlan.code).toBe(1);
    expect(badPlan.stdout).toBe('');
    expect(badPlan.stderr).toContain('gateway: unknown plan "gold": expected one of free, premium, pro');
    for (const run of [unknownForPlan, unknownForDeactivate]) {
      expect(run.code).toBe(1);
      expect(run.stdout).toBe('');
      expect(run.stderr).toContain('gateway: no user with email nobody@example.test');
    }
    expect(noEmail.code).toBe(1);
    expect(noEmail.stderr).toContain('users needs: set-plan EMAIL PLAN | deactivate EMAIL | activate EMAIL');
    expect(await sql('SELECT plan, is_active FROM users WHERE id = $1', [user.id])).toEqual([{ plan: 'free', is_active: 1 }]);
  });
});
