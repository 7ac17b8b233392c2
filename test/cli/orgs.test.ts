// `gateway orgs list|show|set-plan` (CONTRACT §22, operators), run as operators run it: the built
// CLI in its own process, on a config file pointing at the run's database.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { cliFolder, type CliFolder } from '../helpers/cliFolder.js';
import { ADMIN_KEY, bearer, closeSql, describeWithServices, everywhereWithin, marker, sql, startTestGateway, testServices, type TestGateway } from '../helpers/gateway.js';
import { buildAdminApp } from '../../src/admin/app.js';
import { request } from '../helpers/http.js';
import { startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { createOrg, invite, join, organizationsConfig, verifiedUser } from '../orgs/helpers.js';

describeWithServices('gateway orgs …', () => {
  let folder: CliFolder;
  let smtp: SmtpCatcher;
  let gw: TestGateway;

  const cli = (...args: string[]) => folder.cli(args);

  beforeAll(async () => {
    folder = cliFolder('gw-cli-orgs-', testServices!.postgres);
    smtp = await startSmtpCatcher();
    gw = await startTestGateway(organizationsConfig(smtp));
  }, 120_000);
  afterAll(async () => {
    await gw?.close();
    await smtp?.close();
    folder?.remove();
    await closeSql();
  });

  it('lists, shows and sets the plan of an organization; the plan is audited and seen by the running gateway', async () => {
    const [owner, member] = [await verifiedUser(gw, smtp), await verifiedUser(gw, smtp)];
    const tag = marker();
    const id = await createOrg(gw, owner, `${tag} "Quoted" Co`);
    expect(await join(gw, member, await invite(gw, smtp, id, owner, member, 'admin'))).toBe(200);

    const listed = await cli('orgs', 'list', '--query', tag, '--json');
    expect(listed.code, listed.stderr).toBe(0);
    expect(JSON.parse(listed.stdout)).toEqual({ orgs: [{ id, name: `${tag} "Quoted" Co`, plan: 'free', created_at: expect.any(String), member_count: 2 }] });
    const table = await cli('orgs', 'list', '--query', tag);
    expect(table.stdout.split('\n')[0]).toMatch(/^ID\s+NAME\s+PLAN\s+MEMBERS\s+CREATED$/);
    expect(table.stdout).toContain(JSON.stringify(`${tag} "Quoted" Co`));

    const shown = await cli('orgs', 'show', String(id), '--json');
    expect(JSON.parse(shown.stdout)).toMatchObject({
      id, plan: 'free', daily_usage: null, monthly_usage: null, members: [{ user_id: owner.id, role: 'owner' }, { user_id: member.id, role: 'admin' }],
    });
    const text = await cli('orgs', 'show', String(id));
    expect(text.stdout).toContain(`organization ${id}`);
    expect(text.stdout).toContain(member.email);

    const set = await cli('orgs', 'set-plan', String(id), 'pro');
    expect(set).toEqual({ code: 0, stdout: `organization ${id} ${JSON.stringify(`${tag} "Quoted" Co`)}: plan free → pro\n`, stderr: '' });
    await everywhereWithin([gw], async (g) => (await g.get('/api/v1/orgs', { headers: bearer(owner.access) })).json.orgs[0]?.plan === 'pro', 1000);
    const [event] = await sql<{ actor: string; data: unknown }>("SELECT actor, data FROM audit_events WHERE type = 'admin.org_plan_changed' AND data->>'org_id' = $1", [String(id)]);
    expect(event).toEqual({ actor: 'cli', data: { org_id: id, plan: 'pro', previous: 'free' } });
    expect(JSON.parse((await cli('orgs', 'list', '--query', tag, '--plan', 'pro', '--json')).stdout).orgs).toHaveLength(1);

    // The admin API reads the same organization.
    const adminApp = await buildAdminApp(gw.services);
    try {
      const url = await adminApp.listen({ host: '127.0.0.1', port: 0 });
      expect((await request(url, 'GET', `/admin/v1/orgs/${id}`, { headers: bearer(ADMIN_KEY) })).json.plan).toBe('pro');
    } finally {
      await adminApp.close();
    }
  });

  it('refuses an unknown plan, a malformed or unknown id, a bad limit', async () => {
    expect(await cli('orgs', 'set-plan', '1', 'gold')).toMatchObject({ code: 1, stderr: expect.stringContaining('unknown plan "gold"') });
    expect(await cli('orgs', 'set-plan', 'abc', 'pro')).toMatchObject({ code: 1, stderr: expect.stringContaining('expected an organization id') });
    expect(await cli('orgs', 'set-plan', '999999999', 'pro')).toMatchObject({ code: 1, stderr: expect.stringContaining('no organization with id 999999999') });
    expect(await cli('orgs', 'show', '999999999')).toMatchObject({ code: 1, stderr: expect.stringContaining('no organization with id 999999999') });
    expect(await cli('orgs', 'list', '--limit', '500')).toMatchObject({ code: 1, stderr: expect.stringContaining('--limit') });
    expect(await cli('orgs', 'list', '--plan', 'gold')).toMatchObject({ code: 1, stderr: expect.stringContaining('unknown plan') });
  });
});
