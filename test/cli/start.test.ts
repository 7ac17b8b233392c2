// `gateway start` speaks only JSON on stdout, and whatever stops it is one fatal log line with a
// hint, exit status 1, nothing on stderr: what an operator's log pipeline and orchestrator rely on.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { migrationFiles } from '../../src/storage/database/migrations.js';
import { ensureBuilt, gateway, logLines, type CliRun } from '../helpers/cli.js';
import { closeSql, describeWithServices, rawTestConfig, testServices, throwawayDatabase, TEST_JWT_SECRET } from '../helpers/gateway.js';
import { spawnGateway } from '../helpers/gatewayProcess.js';

describeWithServices('gateway start: fatal start-up errors', () => {
  let dir: string;
  const cleanups: Array<() => Promise<unknown> | void> = [];

  beforeAll(() => {
    ensureBuilt();
    dir = mkdtempSync(path.join(tmpdir(), 'gw-start-'));
  }, 120_000);
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
    rmSync(dir, { recursive: true, force: true });
    await closeSql();
  });

  /** A config file: the run's Postgres, a free port on 127.0.0.1, no admin listener, then `extra` (YAML). */
  const config = (name: string, extra = '', port = 0) => {
    const file = path.join(dir, name);
    writeFileSync(file, [
      `server: { host: 127.0.0.1, port: ${port} }`,
      `auth: { jwt: { secret: ${JSON.stringify(TEST_JWT_SECRET)} } }`,
      'admin: { port: 0 }',
      extra,
    ].join('\n'));
    return file;
  };
  const start = (file: string, env: Record<string, string> = {}) => gateway(['start', '--config', file], { env });

  /** Exit 1, nothing on stderr, only JSON on stdout, and the last line the one fatal line; returns it. */
  function fatal(run: CliRun) {
    expect(run.stderr).toBe('');
    expect(run.code).toBe(1);
    const lines = logLines(run.stdout);
    expect(lines.filter((l) => l.level === 60)).toHaveLength(1);
    expect(lines.at(-1)!.level).toBe(60);
    expect(lines.at(-1)!.hint).toEqual(expect.any(String));
    return lines.at(-1)!;
  }

  it('a port in use, an unknown LOG_LEVEL, a file that cannot be read, an invalid configuration', async () => {
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise((resolve) => taken.close(resolve)));
    const port = (taken.address() as net.AddressInfo).port;
    const postgres = `storage: { postgres: ${JSON.stringify(testServices!.postgres)} }`;
    const missing = path.join(dir, 'missing-ca.pem');
    const invalid = config('invalid.yaml', 'plans: { freeDailyLimit: 0 }');
    const [inUse, level, unreadable, bad, notYaml] = await Promise.all([
      start(config('in-use.yaml', postgres, port)),
      start(config('level.yaml', postgres), { LOG_LEVEL: 'loud' }),
      start(config('unreadable.yaml', `${postgres}\nwebhooks: { caFile: ${missing} }`)),
      start(invalid),
      start(config('not-yaml.yaml', 'routes: [')),
    ]);
    expect(fatal(inUse)).toMatchObject({
      msg: `cannot listen on 127.0.0.1:${port}: EADDRINUSE`, code: 'EADDRINUSE', port,
      hint: `another process listens on 127.0.0.1:${port}: stop it, or change server.port (PORT) or admin.port`,
    });
    expect(fatal(level)).toMatchObject({ msg: expect.stringContaining('LOG_LEVEL: unknown level "loud"'), hint: expect.stringContaining('set LOG_LEVEL to one of') });
    expect(fatal(unreadable)).toMatchObject({
      msg: 'invalid configuration', problems: [`webhooks.caFile: ${missing}: cannot read the file: ENOENT`],
      hint: expect.stringContaining('`gateway check --config'),
    });
    // The problems `check` lists, in the JSON line; YAML that does not parse is one of them.
    expect(fatal(bad)).toMatchObject({ msg: 'invalid configuration', file: invalid, problems: [expect.stringMatching(/^plans\.freeDailyLimit: /)] });
    expect(fatal(notYaml)).toMatchObject({ msg: 'invalid configuration', problems: [expect.stringMatching(/^YAML: /)] });
  });

  it('storage.migrate: false on a database that lacks migrations: the hint is `gateway migrate`, which fixes it', async () => {
    const fresh = await throwawayDatabase();
    cleanups.push(() => fresh.drop());
    const file = config('unmigrated.yaml', `storage: { postgres: ${JSON.stringify(fresh.url)}, migrate: false }`);
    expect(fatal(await start(file))).toMatchObject({
      msg: `the database lacks ${migrationFiles().length} migration(s): ${migrationFiles().join(', ')}`,
      pending: migrationFiles(),
      hint: expect.stringContaining('run `gateway migrate`'),
    });

    const migrate = await gateway(['migrate', '--config', file]);
    expect(migrate).toEqual({ code: 0, stdout: `applied: ${migrationFiles().join(', ')}\n`, stderr: '' });
    // Now it starts; every stdout line is JSON (spawnGateway parses each one) and the listening one carries the URL.
    const gw = await spawnGateway(rawTestConfig({ storage: { postgres: fresh.url, migrate: false } }));
    cleanups.push(() => gw.stop());
    const listening = await gw.waitForLog((l) => l.msg === 'gateway listening');
    expect(listening).toMatchObject({ level: 30, url: gw.url });
    expect((await fetch(`${gw.url}/healthz`)).status).toBe(200);
  });
});
