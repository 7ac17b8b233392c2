// Embedded storage is one process's (issue 27, CONTRACT §18): with `gateway start` running on
// PGlite, a second start or a CLI command that writes exits 1 naming the holder, instead of
// working on its own copy (the plan change it printed was never seen, and was lost); users
// commands act through the running gateway with --admin URL (keys rotate, which the admin API
// cannot do, says so); a lock left by a killed process is taken over. The built CLI in real
// processes. The lock under contention: test/storage/dirLock.test.ts.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, gateway } from '../helpers/cli.js';
import { ADMIN_KEY, bearer, newEmail, newPassword, TEST_JWT_SECRET } from '../helpers/gateway.js';
import { spawnGateway, type GatewayProcess } from '../helpers/gatewayProcess.js';
import { request } from '../helpers/http.js';
import { sparePort } from '../helpers/ports.js';

describe('embedded storage held by one process', () => {
  let dir: string;
  let configFile: string;
  let config: Record<string, unknown>;
  const running: GatewayProcess[] = [];

  beforeAll(async () => {
    ensureBuilt();
    dir = mkdtempSync(path.join(tmpdir(), 'gw-lock-'));
    config = {
      server: { host: '127.0.0.1', port: 0 },
      storage: { embeddedDir: path.join(dir, 'data') },
      auth: { jwt: { secret: TEST_JWT_SECRET } },
      admin: { host: '127.0.0.1', port: await sparePort(), apiKey: ADMIN_KEY },
    };
    configFile = path.join(dir, 'gateway.yaml');
    writeFileSync(configFile, JSON.stringify(config));
  }, 60_000);
  afterAll(async () => {
    await Promise.all(running.map((g) => g.stop()));
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('refuses a second start and a writing command, acts through --admin, and takes over a dead holder\'s lock', async () => {
    const first = await spawnGateway(config);
    running.push(first);
    const pid = first.child.pid!;
    expect(readFileSync(path.join(dir, 'data', 'gateway.lock'), 'utf8').trim()).toBe(String(pid));

    // A second start on the same directory: exit 1 at once, naming the holder.
    const second = await gateway(['start', '--config', configFile], { cwd: dir });
    expect(second.code).toBe(1);
    expect(second.stdout).toContain(`in use by process ${pid}`);

    const email = newEmail('lock');
    const password = newPassword();
    expect((await request(first.url, 'POST', '/api/v1/auth/register', { json: { email, password } })).status).toBe(201);

    // The CLI on the database directly: refused, and it says how to do it instead.
    const direct = await gateway(['users', 'set-plan', email, 'pro', '--config', configFile], { cwd: dir });
    expect(direct.code).toBe(1);
    expect(direct.stderr).toContain(`in use by process ${pid}`);
    expect(direct.stderr).toContain('--admin');

    // keys rotate writes too: refused the same way, and the lock is still the gateway's.
    const rotate = await gateway(['keys', 'rotate', '--config', configFile], { cwd: dir });
    expect(rotate.code).toBe(1);
    expect(rotate.stderr).toContain(`in use by process ${pid}`);
    expect(rotate.stdout).toBe('');
    expect(readFileSync(path.join(dir, 'data', 'gateway.lock'), 'utf8')).toBe(`${pid}\n`);

    // Through the running gateway's admin API: done, and the gateway enforces it at once.
    const viaAdmin = await gateway(['users', 'set-plan', email, 'pro', '--config', configFile, '--admin', first.adminUrl!], { cwd: dir });
    expect(viaAdmin).toMatchObject({ code: 0, stderr: '' });
    expect(viaAdmin.stdout).toMatch(new RegExp(`^user \\d+ \\(${email.replace(/[.+]/g, '\\$&')}\\): plan free → pro\\n$`));
    const login = await request(first.url, 'POST', '/api/v1/auth/login', { json: { email, password } });
    expect((await request(first.url, 'GET', '/api/v1/user/me', { headers: bearer(login.json.access_token) })).json).toMatchObject({ email, plan: 'pro' });

    // What the admin API cannot do is refused, saying why.
    const link = await gateway(['users', 'reset-link', email, '--config', configFile, '--admin', first.adminUrl!], { cwd: dir });
    expect(link.code).toBe(1);
    expect(link.stderr).toContain('the admin API does not make reset links');
    const rotateViaAdmin = await gateway(['keys', 'rotate', '--config', configFile, '--admin', first.adminUrl!], { cwd: dir });
    expect(rotateViaAdmin.code).toBe(1);
    expect(rotateViaAdmin.stdout).toBe('');
    expect(rotateViaAdmin.stderr).toContain('the admin API does not rotate keys');
    expect(rotateViaAdmin.stderr).toContain('with the gateway stopped');

    // Killed without a chance to let go: the next start takes the stale lock over.
    first.child.kill('SIGKILL');
    await first.exited;
    expect(existsSync(path.join(dir, 'data', 'gateway.lock'))).toBe(true);
    const third = await spawnGateway(config);
    running.push(third);
    expect(readFileSync(path.join(dir, 'data', 'gateway.lock'), 'utf8').trim()).toBe(String(third.child.pid));
    await third.stop();
    // Stopped cleanly: the lock is gone with it, and a command may open the directory again.
    expect(existsSync(path.join(dir, 'data', 'gateway.lock'))).toBe(false);
    const after = await gateway(['users', 'deactivate', email, '--config', configFile], { cwd: dir });
    expect(after.code, after.stderr).toBe(0);
  }, 120_000); // several processes that each load PGlite (a WebAssembly Postgres) from cold
});
