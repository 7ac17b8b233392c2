// docs/enterprise-sso.md's SCIM commands, run as written (curl, bash) against a gateway with
// organizations, on a database of its own: only the example port changes, and the variables the
// page names are set as a reader gets them (ORG_ID and ACCESS_TOKEN from the API, SCIM_TOKEN from
// the first block's answer). Each block's shown output (its `# …` comments) must match.
import { execFile } from 'node:child_process';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { docsBlock, expectShown, shownOutput } from '../helpers/docs.js';
import { describeWithServices, type TestGateway } from '../helpers/gateway.js';
import { startHookSetup, type HookSetup } from '../helpers/hookReceiver.js';
import { createOrg, verifiedUser, type Sql } from './helpers.js';

describeWithServices('docs/enterprise-sso.md: provisioning (SCIM), as written', () => {
  let setup: HookSetup;
  let gw: TestGateway;
  let env: Record<string, string>;

  function run(block: string, extra: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
    const script = block.replaceAll('localhost:8080', gw.url.replace(/^http:\/\//, ''));
    return new Promise((resolve) => {
      execFile('bash', ['-e', '-o', 'pipefail', '-c', script], { env: { PATH: process.env.PATH ?? '', ...env, ...extra }, timeout: 60_000 }, (err, stdout, stderr) => {
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
      });
    });
  }

  beforeAll(async () => {
    setup = await startHookSetup({ organizations: 'sso' });
    gw = setup.gateways[0]!;
    const q: Sql = (text, params = []) => setup.db.sql(text, params);
    const owner = await verifiedUser(gw, q);
    const orgId = await createOrg(gw, owner);
    // The page's domain, verified for this organization (its own database: no other test's organization has it).
    await q("INSERT INTO org_domains (org_id, domain, status, txt_value, verified_by, verified_at, expires_at) VALUES ($1, 'corp.example', 'verified', 'x', 'operator', now(), now())", [orgId]);
    env = { ORG_ID: String(orgId), ACCESS_TOKEN: owner.access };
  });
  afterAll(async () => {
    await setup?.close();
  });

  it('scim-token, then scim-users with the token it printed', async () => {
    const tokenBlock = docsBlock('enterprise-sso', 'scim-token');
    const made = await run(tokenBlock);
    expect(made.code, made.stderr).toBe(0);
    expectShown(made.stdout, shownOutput(tokenBlock));
    const token = /"token":"(gwscim_[\w-]+)"/.exec(made.stdout)![1]!;
    const usersBlock = docsBlock('enterprise-sso', 'scim-users');
    const used = await run(usersBlock, { SCIM_TOKEN: token });
    expect(used.code, used.stderr).toBe(0);
    expectShown(used.stdout, shownOutput(usersBlock));
  });
});
