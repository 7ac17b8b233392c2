// `gateway operators … --admin URL` (CONTRACT §24): the operators commands through a running
// gateway's admin API, with an admin operator's token (GATEWAY_OPERATOR_TOKEN), as an operator runs
// them while the gateway holds its storage: the same outputs as on direct storage, the enrolment link
// built from the console's origin by the gateway, refusals as the API answers them, and the audit
// log naming the operator who acted.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { sha256Hex } from '../../src/credentials/digest.js';
import { gateway } from '../helpers/cli.js';
import { docsBlock } from '../helpers/docs.js';
import { closeSql, describeWithServices, marker, type ThrowawayDatabase } from '../helpers/gateway.js';
import { startOperatorsCli, type OperatorsCli } from '../helpers/operatorsCli.js';

describeWithServices('gateway operators … --admin URL', () => {
  let setup: OperatorsCli;
  let db: ThrowawayDatabase;
  let url: string;
  let token: string;
  let bossId: number;
  const cli = (args: string[], env: Record<string, string> = { GATEWAY_OPERATOR_TOKEN: token }) => gateway([...args, '--config', setup.configFile], { cwd: setup.dir, env });
  const viaAdmin = (...args: string[]) => cli([...args, '--admin', url]);

  beforeAll(async () => {
    // No admin.apiKey: an operator's token is the only way in.
    setup = await startOperatorsCli('gw-cli-ops-admin-', [], async (run, database) => {
      // The first admin and their token on direct storage: someone has to be first.
      const boss = `boss-${marker()}@example.test`;
      expect((await run(['operators', 'add', boss, '--role', 'admin'])).code).toBe(0);
      token = /^gwop_[\w-]{43}$/m.exec((await run(['operators', 'token', boss, '--name', 'cli'])).stdout)![0];
      bossId = Number((await database.sql<{ id: number }>('SELECT id FROM operators WHERE email = $1', [boss]))[0]!.id);
    });
    ({ db, url } = setup);
  }, 120_000);
  afterAll(async () => {
    await setup?.close();
    await closeSql();
  });

  it('add, list, set-role, reset-mfa and remove act through the admin API, audited as the operator', async () => {
    const email = `ada-${marker()}@example.test`;
    const added = await viaAdmin('operators', 'add', email, '--role', 'support');
    expect([added.code, added.stderr]).toEqual([0, '']);
    // The link is the running gateway's: its console's origin, single use, stored hashed for 24 hours.
    const origin = new URL(url).origin.replace(/[.]/g, '\\.');
    const line = new RegExp(`^operator (\\d+) \\(${email}\\), role support: enrolment link, single use, valid 24 hours:\\n${origin}/console/operator\\.html#enrol=([\\w-]{43})\\n$`);
    const [, id, enrol] = line.exec(added.stdout) ?? [];
    expect(enrol, added.stdout).toBeDefined();
    const stored = await db.sql<{ token_hash: string; hours: number }>(
      'SELECT token_hash, round(extract(epoch FROM expires_at - now()) / 3600)::int AS hours FROM operator_enrolments WHERE operator_id = $1', [Number(id)]);
    expect(stored).toEqual([{ token_hash: sha256Hex(enrol!), hours: 24 }]);

    const list = await viaAdmin('operators', 'list', '--json');
    expect(JSON.parse(list.stdout).operators).toContainEqual(expect.objectContaining({ id: Number(id), email, role: 'support', enrolled: false, mfa: false }));
    expect((await viaAdmin('operators', 'list')).stdout).toMatch(new RegExp(`^${id} +${email} +support +no +no +\\S+$`, 'm'));
    expect((await viaAdmin('operators', 'set-role', email, 'viewer')).stdout).toBe(`operator ${id} (${email}): role support → viewer\n`);

    await db.sql("INSERT INTO operator_totp (operator_id, secret_encrypted, confirmed_at) VALUES ($1, 'x', now())", [Number(id)]);
    const reset = await viaAdmin('operators', 'reset-mfa', email);
    const resetLine = `^operator ${id} \\(${email}\\): second factor removed; enrolment link, single use, valid 24 hours:\\n`;
    expect(reset.stdout).toMatch(new RegExp(`${resetLine}${origin}/console/operator\\.html#enrol=[\\w-]{43}\\n$`));
    expect(await db.sql('SELECT 1 FROM operator_totp WHERE operator_id = $1', [Number(id)])).toEqual([]);

    expect((await viaAdmin('operators', 'remove', email)).stdout).toBe(`operator ${id} (${email}): removed, with its tokens and second factor\n`);
    const audit = await db.sql<{ type: string; actor: string; actor_id: string }>("SELECT type, actor, actor_id FROM audit_events WHERE data->>'email' = $1 ORDER BY id", [email]);
    expect(audit.map((e) => [e.type, e.actor, Number(e.actor_id)])).toEqual(
      ['operator.created', 'operator.role_changed', 'operator.mfa_reset', 'operator.removed'].map((type) => [type, 'operator', bossId]));
  });

  it('refusals are the API\'s: a taken email, one\'s own factor, an unknown operator, a token asked for; no credential at all', async () => {
    const email = `twice-${marker()}@example.test`;
    expect((await viaAdmin('operators', 'add', email, '--role', 'viewer')).code).toBe(0);
    const again = await viaAdmin('operators', 'add', email, '--role', 'viewer');
    expect([again.code, again.stderr]).toEqual([1, expect.stringMatching(/answered 409 .*Email déjà enregistré/)]);
    const self = await viaAdmin('operators', 'reset-mfa', (await db.sql<{ email: string }>('SELECT email FROM operators WHERE id = $1', [bossId]))[0]!.email);
    expect([self.code, self.stderr]).toEqual([1, expect.stringMatching(/answered 409 .*Action impossible sur son propre compte/)]);
    expect((await viaAdmin('operators', 'remove', 'nobody@example.test')).stderr).toMatch(/no operator with email nobody@example.test/);
    const mint = await viaAdmin('operators', 'token', email, '--name', 'x');
    expect(mint.code).not.toBe(0);
    const bare = await cli(['operators', 'list', '--admin', url], {});
    expect([bare.code, bare.stderr]).toEqual([1, expect.stringMatching(/--admin needs admin\.apiKey .* or an operator's token in GATEWAY_OPERATOR_TOKEN/)]);
  });

  it('docs/operators.md\'s --admin example runs as written, with this run\'s token and admin listener', async () => {
    const [line] = docsBlock('operators', 'operators-through-admin').split('\n');
    const [assignment, command, ...args] = line!.split(/\s+/);
    expect([assignment, command]).toEqual(['GATEWAY_OPERATOR_TOKEN=gwop_…', 'gateway']);
    const run = await cli(args.map((a) => (a === 'http://127.0.0.1:9090' ? url : a)));
    expect([run.code, run.stderr]).toEqual([0, '']);
    expect(run.stdout).toMatch(/^operator \d+ \(grace@example\.com\), role support: enrolment link, single use, valid 24 hours:\nhttp:\/\/127\.0\.0\.1:\d+\/console\/operator\.html#enrol=[\w-]{43}\n$/);
  });
});
