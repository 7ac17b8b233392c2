// `gateway users set-plan|deactivate|activate EMAIL`, run as operators run it: the built CLI
// (dist/cli.js) in its own process, on a config file pointing at the run's database.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { gateway } from '../helpers/cli.js';
import { cliFolder, type CliFolder } from '../helpers/cliFolder.js';
import { bearer, closeSql, describeWithServices, eventually, makeUser, sql, startTestGateway, testConfig, testServices, type TestGateway } from '../helpers/gateway.js';

describeWithServices('gateway users …', () => {
  let folder: CliFolder;
  let gw: TestGateway;

  const cli = (...args: string[]) => folder.cli(args);

  beforeAll(async () => {
    folder = cliFolder('gw-cli-', testServices!.postgres, [
      // No SMTP: `users reset-link` is how such a deployment hands out reset links.
      'mail:',
      '  resetUrl: https://app.example.test/reset-password?token={token}',
      '  verifyUrl: https://app.example.test/verify-email?token={token}',
    ]);
    gw = await startTestGateway(testConfig());
  }, 120_000);
  afterAll(async () => {
    await gw?.close();
    folder?.remove();
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

  it('list searches newest first, as a table or --json (CONTRACT §16)', async () => {
    const [older, newer] = [await makeUser(gw), await makeUser(gw)];
    const tag = older.email.slice(0, 4);
    const json = await cli('users', 'list', '--query', older.email.toUpperCase(), '--json');
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout).users).toEqual([expect.objectContaining({ id: older.id, email: older.email, plan: 'free', is_active: 1 })]);
    const both = JSON.parse((await cli('users', 'list', '--query', tag, '--limit', '200', '--json')).stdout).users.map((u: { id: number }) => u.id);
    expect(both.indexOf(newer.id)).toBeLessThan(both.indexOf(older.id));
    const table = await cli('users', 'list', '--query', String(newer.id), '--plan', 'free');
    expect(table.stdout).toMatch(/^ID\s+EMAIL\s+PLAN\s+ACTIVE\s+CREATED\n/);
    expect(table.stdout).toContain(newer.email);
    expect((await cli('users', 'list', '--limit', '0')).code).not.toBe(0);
  });

  it('set-plan takes any plan the configuration names (CONTRACT §12)', async () => {
    const user = await makeUser(gw);
    const teamFile = path.join(folder.dir, 'team.yaml');
    writeFileSync(teamFile, `${readFileSync(folder.configFile, 'utf8')}plans:\n  limits:\n    team: { daily: 5 }\n`);
    const refused = await cli('users', 'set-plan', user.email, 'team');
    expect(refused.stderr).toContain('gateway: unknown plan "team": expected one of free, premium, pro');
    const run = await gateway(['users', 'set-plan', user.email, 'team', '--config', teamFile], { cwd: folder.dir });
    expect(run).toEqual({ code: 0, stdout: `user ${user.id} (${user.email}): plan free → team\n`, stderr: '' });
    expect(await sql('SELECT u.plan, s.plan AS subscription FROM users u JOIN subscriptions s ON s.user_id = u.id WHERE u.id = $1', [user.id]))
      .toEqual([{ plan: 'team', subscription: 'team' }]);
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
    expect(noEmail.stderr).toContain('gateway: users deactivate needs EMAIL');
    expect(await sql('SELECT plan, is_active FROM users WHERE id = $1', [user.id])).toEqual([{ plan: 'free', is_active: 1 }]);
  });

  it('reset-link prints a single-use link that a running gateway accepts', async () => {
    const user = await makeUser(gw);
    const run = await cli('users', 'reset-link', user.email.toUpperCase());
    expect(run.code).toBe(0);
    expect(run.stderr).toBe('');
    const [line, link, ...rest] = run.stdout.split('\n');
    expect(line).toBe(`user ${user.id} (${user.email}): password reset link, single use, valid 30 minutes:`);
    expect(rest).toEqual(['']);
    expect(link).toMatch(/^https:\/\/app\.example\.test\/reset-password\?token=[A-Za-z0-9_-]{43}$/);
    const token = new URL(link!).searchParams.get('token');
    const reset = await gw.post('/api/v1/auth/password/reset', { token, new_password: 'a-new-password' });
    expect(reset.status).toBe(200);
    expect((await gw.post('/api/v1/auth/login', { email: user.email, password: 'a-new-password' })).status).toBe(200);
    expect((await gw.post('/api/v1/auth/password/reset', { token, new_password: 'another-password' })).status).toBe(400);
  });

  it('reset-link needs mail.resetUrl, and an existing user', async () => {
    const bare = path.join(folder.dir, 'bare.yaml');
    writeFileSync(bare, `storage:\n  postgres: ${JSON.stringify(testServices!.postgres)}\nadmin:\n  port: 0\n`);
    const user = await makeUser(gw);
    const [noMail, unknown] = await Promise.all([
      gateway(['users', 'reset-link', user.email, '--config', bare], { cwd: folder.dir }),
      cli('users', 'reset-link', 'nobody@example.test'),
    ]);
    expect(noMail.code).toBe(1);
    expect(noMail.stdout).toBe('');
    expect(noMail.stderr).toContain('mail.resetUrl is not set');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('gateway: no user with email nobody@example.test');
    expect(await sql('SELECT 1 FROM email_tokens WHERE user_id = $1 AND purpose = $2', [user.id, 'reset'])).toEqual([]);
  });

  it('delete erases the user; a running gateway refuses its token within a second; the email is free', async () => {
    const user = await makeUser(gw);
    const headers = bearer(user.access);
    expect((await gw.get('/api/v1/user/me', { headers })).status).toBe(200);
    const run = await cli('users', 'delete', user.email);
    expect(run).toEqual({ code: 0, stdout: `user ${user.id} (${user.email}): deleted, with its sessions, API keys, webhook and links\n`, stderr: '' });
    expect(await sql('SELECT 1 FROM users WHERE id = $1', [user.id])).toEqual([]);
    await eventually(async () => (await gw.get('/api/v1/user/me', { headers })).status === 401, 1000);
    expect((await gw.post('/api/v1/auth/register', { email: user.email, password: user.password })).status).toBe(201);
  });
});
