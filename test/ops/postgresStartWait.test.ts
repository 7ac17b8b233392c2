// Start-up waits (CONTRACT §25): a gateway started before its Postgres answers (docker compose,
// a pod scheduled beside its database) waits for it for storage.startTimeout, saying so at each
// attempt, instead of exiting at once and crash-looping; what will not fix itself (a database
// that does not exist) stops the start at once. The built CLI, as an operator runs it.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ensureBuilt, gateway, logLines } from '../helpers/cli.js';
import { closeSql, describeWithServices, newEmail, rawTestConfig, testServices, throwawayDatabase, TEST_JWT_SECRET, type ThrowawayDatabase } from '../helpers/gateway.js';
import { spawnGateway, type GatewayProcess } from '../helpers/gatewayProcess.js';
import { request } from '../helpers/http.js';
import { refusedPort } from '../helpers/ports.js';
import { postgresTarget, startTcpProxy, throughProxy, type TcpProxy } from '../helpers/tcpProxy.js';

describeWithServices('start-up waits for Postgres (storage.startTimeout)', () => {
  let dir: string;
  let db: ThrowawayDatabase | undefined;
  let proxy: TcpProxy | undefined;
  let gw: GatewayProcess | undefined;

  beforeAll(() => {
    ensureBuilt();
    dir = mkdtempSync(path.join(tmpdir(), 'gw-startwait-'));
  }, 120_000);
  afterAll(async () => {
    await gw?.stop();
    await proxy?.close();
    await db?.drop();
    rmSync(dir, { recursive: true, force: true });
    await closeSql();
  });

  /** `gateway start` on a config file: Postgres at `postgres`, a free port, then `extra` (YAML). */
  const start = (name: string, postgres: string, extra = '') => {
    const file = path.join(dir, name);
    writeFileSync(file, [
      'server: { host: 127.0.0.1, port: 0 }',
      `auth: { jwt: { secret: ${JSON.stringify(TEST_JWT_SECRET)} } }`,
      'admin: { port: 0 }',
      `storage: { postgres: ${JSON.stringify(postgres)}${extra} }`,
    ].join('\n'));
    return gateway(['start', '--config', file], { timeout: 40_000 });
  };

  it('a Postgres that answers only later: the start waits, says so, then serves', async () => {
    db = await throwawayDatabase();
    // A port that refuses (the proxy closed) until the first waiting line is read.
    proxy = await startTcpProxy(postgresTarget());
    await proxy.cut();
    const late = proxy;
    let restoring = false;
    gw = await spawnGateway(rawTestConfig({ storage: { ...db.storage, postgres: throughProxy(db.url, late), startTimeout: '30s' } }), {
      onLog: (line) => {
        if (restoring || !line.msg.startsWith('waiting for Postgres')) return;
        restoring = true;
        void late.restore();
      },
    });
    const waiting = gw.logs.filter((l) => l.msg.startsWith('waiting for Postgres'));
    expect(waiting.length).toBeGreaterThanOrEqual(1);
    expect(waiting[0]).toMatchObject({ level: 40, msg: `waiting for Postgres at 127.0.0.1:${late.port} (ECONNREFUSED)`, code: 'ECONNREFUSED' });
    expect((await request(gw.url, 'GET', '/readyz')).status).toBe(200);
    expect((await request(gw.url, 'POST', '/api/v1/auth/register', { json: { email: newEmail(), password: 'long-enough-password' } })).status).toBe(201);
  }, 60_000);

  it('nothing ever answers: exit 1 after startTimeout, with a hint naming DATABASE_URL and no password', async () => {
    const port = await refusedPort();
    const run = await start('never.yaml', `postgres://gateway:pw-never-shown@127.0.0.1:${port}/gateway`, ', startTimeout: 2s');
    expect(run.code).toBe(1);
    expect(run.stderr).toBe('');
    expect(run.stdout).not.toContain('pw-never-shown');
    const lines = logLines(run.stdout);
    expect(lines.filter((l) => l.msg === `waiting for Postgres at 127.0.0.1:${port} (ECONNREFUSED)`).length).toBeGreaterThanOrEqual(1);
    expect(lines.at(-1)).toMatchObject({
      level: 60, msg: `Postgres at 127.0.0.1:${port} did not answer within 2s (ECONNREFUSED)`, code: 'ECONNREFUSED',
      hint: expect.stringContaining('check DATABASE_URL (storage.postgres)'),
    });
  }, 60_000);

  it('a database that does not exist: exit 1 at once (no waiting), with its own message', async () => {
    const url = new URL(testServices!.postgres);
    const { host, port } = postgresTarget();
    url.pathname = '/gw_no_such_database';
    // The default startTimeout (60 s) is more than the run is given: it returns only if nothing waited.
    const run = await start('missing.yaml', url.toString());
    expect(run.code).toBe(1);
    const lines = logLines(run.stdout);
    expect(lines.filter((l) => l.msg.startsWith('waiting for Postgres'))).toEqual([]);
    expect(lines.at(-1)).toMatchObject({
      level: 60, code: '3D000',
      msg: `cannot use Postgres at ${host}:${port}: database "gw_no_such_database" does not exist (3D000)`,
      hint: expect.stringContaining('check DATABASE_URL (storage.postgres)'),
    });
  }, 60_000);

  it('gateway migrate waits the same way: each attempt on stderr, then exit 1 naming DATABASE_URL', async () => {
    const port = await refusedPort();
    const file = path.join(dir, 'migrate.yaml');
    writeFileSync(file, `storage: { postgres: "postgres://gateway:pw-never-shown@127.0.0.1:${port}/gateway", startTimeout: 1s }\n`);
    const run = await gateway(['migrate', '--config', file]);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain(`gateway: waiting for Postgres at 127.0.0.1:${port} (ECONNREFUSED)\n`);
    expect(run.stderr).toContain(`gateway: Postgres at 127.0.0.1:${port} did not answer within 1s (ECONNREFUSED)\ncheck DATABASE_URL (storage.postgres)`);
    expect(run.stderr).not.toContain('pw-never-shown');
  }, 60_000);

  it('gateway check accepts storage.startTimeout', async () => {
    const file = path.join(dir, 'check.yaml');
    writeFileSync(file, 'storage:\n  startTimeout: 60s\n');
    const run = await gateway(['check', '--config', file]);
    expect(run.stderr).not.toMatch(/startTimeout/);
    expect(run.code).toBe(0);
  });
});
