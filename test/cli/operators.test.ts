// `gateway operators …` (CONTRACT §24), run as operators run it: the built CLI in its own process,
// on a config file pointing at a database of its own (the run's keeps no operator).
import { afterAll, beforeAll, expect, it } from 'vitest';
import { sha256Hex } from '../../src/credentials/digest.js';
import { gateway } from '../helpers/cli.js';
import { docsBlock } from '../helpers/docs.js';
import { bearer, closeSql, describeWithServices, makeUser, marker, type TestGateway, type ThrowawayDatabase } from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { startOperatorsCli, type OperatorsCli } from '../helpers/operatorsCli.js';

describeWithServices('gateway operators …', () => {
  let setup: OperatorsCli;
  let db: ThrowawayDatabase;
  let gw: TestGateway;
  let url: string;
  const cli = (...args: string[]) => gateway([...args, '--config', setup.configFile], { cwd: setup.dir });

  beforeAll(async () => {
    // No admin.apiKey: operators are the only way into the admin API, so the last admin stays.
    // Migrated by the first command; the gateway after it.
    setup = await startOperatorsCli('gw-cli-ops-', ['  publicUrl: https://gateway-admin.example.test'], async (run) => {
      expect((await run(['operators', 'list'])).code).toBe(0);
    });
    ({ db, gw, url } = setup);
  }, 120_000);
  afterAll(async () => {
    await setup?.close();
    await closeSql();
  });

  it('each operators command has its own help, listed by --help (one at a time: test/cli/help.test.ts runs the others all at once)', async () => {
    const list = await gateway(['--help']);
    for (const name of ['add', 'list', 'set-role', 'remove', 'reset-mfa', 'token']) {
      expect(list.stdout).toMatch(new RegExp(`^  operators ${name}\\b`, 'm'));
      const help = await gateway(['operators', name, '--help']);
      expect([name, help.code, help.stdout.startsWith(`Usage: gateway operators ${name}`)]).toEqual([name, 0, true]);
    }
  });

  it('add prints a single-use enrolment link from the console\'s origin, stored hashed for 24 hours; list shows the operator', async () => {
    const email = `Ops-${marker()}@Example.test`;
    const run = await cli('operators', 'add', email, '--role', 'support');
    expect(run.code).toBe(0);
    const link = /^(https:\/\/gateway-admin\.example\.test\/console\/operator\.html#enrol=)([\w-]{43})$/m.exec(run.stdout);
    expect(link, run.stdout).not.toBeNull();
    expect(run.stdout).toMatch(new RegExp(`^operator \\d+ \\(${email.toLowerCase()}\\), role support: enrolment link, single use, valid 24 hours:$`, 'm'));
    const [stored] = await db.sql<{ token_hash: string; hours: number }>(
      'SELECT e.token_hash, round(extract(epoch FROM e.expires_at - now()) / 3600)::int AS hours FROM operator_enrolments e JOIN operators o ON o.id = e.operator_id WHERE o.email = $1',
      [email.toLowerCase()],
    );
    expect(stored).toEqual({ token_hash: sha256Hex(link![2]!), hours: 24 });
    const list = JSON.parse((await cli('operators', 'list', '--json')).stdout) as { operators: Array<Record<string, unknown>> };
    expect(list.operators).toContainEqual(expect.objectContaining({ email: email.toLowerCase(), role: 'support', enrolled: false, mfa: false }));
    expect((await cli('operators', 'add', email, '--role', 'support')).stderr).toMatch(/exists already/);
    const badRole = await cli('operators', 'add', `x-${email}`, '--role', 'root');
    expect([badRole.code, badRole.stdout, badRole.stderr]).toEqual([1, '', expect.stringMatching(/--role: expected one of viewer, support, admin, got "root"/)]);
  });

  it('token prints a gwop_ token that acts with the current role; set-role and remove apply at once; the last admin stays', async () => {
    const email = `boss-${marker()}@example.test`;
    expect((await cli('operators', 'add', email, '--role', 'admin')).code).toBe(0);
    const minted = await cli('operators', 'token', email, '--name', 'laptop');
    const token = /^gwop_[\w-]{43}$/m.exec(minted.stdout)?.[0];
    expect(token, minted.stdout).toBeDefined();
    const user = await makeUser(gw);
    const plan = () => request(url, 'PUT', `/admin/v1/users/${user.id}/plan`, { headers: bearer(token!), json: { plan: 'pro' } });
    expect((await plan()).status).toBe(200);
    const demote = await cli('operators', 'set-role', email, 'viewer');
    expect([demote.code, demote.stderr]).toEqual([1, expect.stringMatching(/is the last admin and admin.apiKey is empty/)]);
    const other = `deputy-${marker()}@example.test`;
    expect((await cli('operators', 'add', other, '--role', 'admin')).code).toBe(0);
    expect((await cli('operators', 'set-role', email, 'viewer')).stdout).toMatch(/role admin → viewer/);
    expect((await plan()).json).toEqual({ error: 'Rôle insuffisant', required_roles: ['admin'], current_role: 'viewer' });
    expect((await cli('operators', 'remove', email)).code).toBe(0);
    expect((await plan()).status).toBe(401);
    const audit = await db.sql<{ type: string; actor: string }>("SELECT type, actor FROM audit_events WHERE data->>'email' = $1 ORDER BY id", [email]);
    expect(audit.map((e) => `${e.actor} ${e.type}`)).toEqual(['cli operator.created', 'cli operator.token_created', 'cli operator.role_changed', 'cli operator.removed']);
  });

  it('reset-mfa removes the operator\'s TOTP and passkeys', async () => {
    const email = `lost-${marker()}@example.test`;
    expect((await cli('operators', 'add', email, '--role', 'viewer')).code).toBe(0);
    await db.sql("INSERT INTO operator_totp (operator_id, secret_encrypted, confirmed_at) SELECT id, 'x', now() FROM operators WHERE email = $1", [email]);
    await db.sql("INSERT INTO operator_passkeys (operator_id, credential_id, public_key, name) SELECT id, $2, '\\x00', 'Laptop' FROM operators WHERE email = $1", [email, `cred-${marker()}`]);
    expect((await cli('operators', 'reset-mfa', email)).stdout).toMatch(/second factor removed/);
    expect(await db.sql('SELECT 1 FROM operator_totp t JOIN operators o ON o.id = t.operator_id WHERE o.email = $1', [email])).toEqual([]);
    expect(await db.sql('SELECT 1 FROM operator_passkeys p JOIN operators o ON o.id = p.operator_id WHERE o.email = $1', [email])).toEqual([]);
    expect((await cli('operators', 'remove', 'nobody@example.test')).stderr).toMatch(/no operator with email/);
  });

  it('docs/operators.md\'s commands run as written, in order', async () => {
    const outputs: string[] = [];
    for (const line of docsBlock('operators', 'operators-cli').split('\n').filter((l) => l.startsWith('gateway '))) {
      const run = await cli(...line.split(/\s+/).slice(1));
      expect([line, run.code, run.stderr]).toEqual([line, 0, '']);
      outputs.push(run.stdout);
    }
    expect(outputs).toEqual([
      expect.stringMatching(/^operator \d+ \(ada@example\.com\), role admin: enrolment link, single use, valid 24 hours:\nhttps:\/\/gateway-admin\.example\.test\/console\/operator\.html#enrol=[\w-]{43}\n$/),
      expect.stringMatching(/^operator \d+ \(ada@example\.com\): token \d+ "laptop", role admin, expires \S+ \(shown once\):\ngwop_[\w-]{43}\n$/),
      expect.stringMatching(/^ID +EMAIL +ROLE +ENROLLED +MFA +CREATED\n(.*\n)*\d+ +ada@example\.com +admin +no +no +\S+\n/),
      expect.stringMatching(/^operator \d+ \(ada@example\.com\): role admin → support\n$/),
      expect.stringMatching(/^operator \d+ \(ada@example\.com\): second factor was not set; enrolment link, single use, valid 24 hours:\nhttps:\/\/gateway-admin\.example\.test\/console\/operator\.html#enrol=[\w-]{43}\n$/),
    ]);
  });
});
