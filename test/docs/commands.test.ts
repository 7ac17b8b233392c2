// The commands of README.md and docs/ that a reader pastes (issue 27), run as written against a
// gateway started from the repository's gateway.yaml, on a database of its own: curl at the
// public and admin listeners, the `gateway` command, openssl. Only the example ports change (8080
// and 9090, the defaults, may be taken on a shared machine), and the variables a block uses are set
// as the page says to get them. Where a block shows its output as comments (`# {"access_token":
// "eyJ…"…}`, `# user 42 (ada@example.com): plan free → pro`), the output must match, `…` standing
// for anything. The docs' user is ada@example.com, id 42: the database's ids start there.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, CLI, ROOT } from '../helpers/cli.js';
import { docsBlock, docsPages, expectShown, fencedBlocks, shownOutput } from '../helpers/docs.js';
import { closeSql, describeWithServices, throwawayDatabase, type ThrowawayDatabase } from '../helpers/gateway.js';
import { spawnGateway, type GatewayProcess } from '../helpers/gatewayProcess.js';
import { request } from '../helpers/http.js';
import { sparePort } from '../helpers/ports.js';

const ADA = { email: 'ada@example.com', password: 'correct horse' };
/** The blocks this file runs. */
const RUN_HERE = new Set([
  'README.md: register-login', 'docs/http-api.md: login', 'docs/http-api.md: admin-plan', 'docs/operating.md: users-commands',
  'docs/operating.md: users-through-admin', 'docs/console.md: ticket', 'docs/console.md: users-list', 'docs/audit.md: audit-cli',
  'docs/second-factor.md: mfa-reset', 'docs/configuration.md: key-files', 'docs/tls.md: self-signed', 'docs/upstream-identity.md: keys-rotate',
]);

// Blocks run elsewhere, by name (test/ops/dockerRun.test.ts, test/decisions/twoInstances.test.ts,
// test/auth/oidcDocs.test.ts, test/auth/tokenRotation.test.ts, test/ship/image.test.ts).
const RUN_ELSEWHERE = new Set([
  'docs/operating.md: docker-run', 'docs/decisions.md: two-instances', 'docs/identity-providers.md: local-idp',
  'docs/operating.md: rotate-jwt', // test/auth/tokenRotation.test.ts
  'docs/operating.md: backup-embedded', 'docs/operating.md: backup-postgres', // test/ops/backup.test.ts
  'docs/operating.md: install-package', // test/ops/npmPack.test.ts
  'docs/releases.md: release-verify', 'docs/releases.md: release-install', // test/ship/release.test.ts
  'docs/api-keys.md: keys-revoke', // test/admin/apiKeys.test.ts
  'docs/enterprise-sso.md: domain-claim', 'docs/enterprise-sso.md: domain-verify', // test/orgs/domains.test.ts
  'docs/api-keys.md: key-roll', 'docs/api-keys.md: key-usage', // test/user/keyRoll.test.ts, test/user/keyUsage.test.ts
  'docs/production.md: image-run', // test/ship/image.test.ts
  // test/ship/systemd.test.ts, from the release tarball (scripts/release.mjs --only tarball), into a
  // scratch root: no systemd as PID 1 here, so `daemon-reload` is skipped, `enable --now` is
  // `systemctl --root enable` plus the unit's ExecStart run as the unit says, and the installed
  // unit is checked by `systemd-analyze verify`.
  'docs/production.md: systemd-install',
  // test/ship/compose.test.ts, as printed with a project name of its own; the `podman build` line is
  // the image test's build of the same Dockerfile, tagged (built once per change, not per file), and
  // the base images' line is checked against the images used, not run (the other tests use them).
  'docs/production.md: podman-containers-conf', 'docs/production.md: compose-podman', 'docs/production.md: compose-podman-down',
  'docs/production.md: kubernetes-apply', // test/ship/kubernetes.test.ts, in podman kube play's terms
  'docs/production.md: kubernetes-monitoring', // test/ship/kubernetes.test.ts renders the overlay (no cluster, no Prometheus operator here)
  'docs/operating.md: promtool', // test/ship/monitoring.test.ts
  'docs/migrating.md: import-csv', 'docs/migrating.md: import-auth0', 'docs/migrating.md: import-supabase', // test/import/import.test.ts
  'docs/migrating.md: import-firebase', 'docs/migrating.md: import-keys',
  'README.md: init', // test/cli/init.test.ts
  'docs/operators.md: operators-cli', // test/cli/operators.test.ts
  'docs/operators.md: operators-through-admin', // test/cli/operatorsAdmin.test.ts
  'docs/billing.md: stripe-fake-start', 'docs/billing.md: stripe-fake-gateway', 'docs/billing.md: stripe-fake-pay', // test/docs/billingFake.system.test.ts
  'docs/billing.md: stripe-fake-fail', 'docs/billing.md: stripe-fake-lapse', 'docs/billing.md: stripe-fake-secrets', 'docs/billing.md: stripe-fake-receiver',
  'docs/billing.md: stripe-fake-support-paid', 'docs/billing.md: stripe-fake-support-grace', 'docs/billing.md: stripe-fake-override',
  'docs/billing.md: stripe-fake-support-lapsed',
  'docs/enterprise-sso.md: scim-token', 'docs/enterprise-sso.md: scim-users', // test/scim/docs.test.ts
  'docs/enterprise-sso.md: enforce-login', 'docs/enterprise-sso.md: enforce-break-glass', // test/sso/enforce.test.ts
]);
// Shell blocks not run as written, by their first line, and why.
const NOT_RUN: Record<string, string> = {
  'README.md: npm install': 'installs and starts the demo: test/demo runs the demo',
  'README.md: npm install && npm start   # the gateway on http://0.0.0.0:8080 with ./gateway.yaml, embedded Postgres in ./data': 'the install and start: .ci/newcomer runs it on a clean clone with the machine\'s Node, registers and logs in',
  'README.md: APP_UPSTREAM=http://127.0.0.1:5000 npm start': 'npm start, the command CI\'s newcomer check runs, with the variable test/ops/dockerRun.test.ts passes',
  'docs/accounts.md: curl -s -XPOST localhost:8080/api/v1/auth/password/forgot -H \'content-type: application/json\' \\':
    'the reset token comes from a mail (Zm9v… stands for it): test/auth/accountsDocs.test.ts runs the page\'s flow',
  'docs/production.md: export POSTGRES_PASSWORD="$(openssl rand -hex 24)"   # on the first `up`: it initialises the volume':
    'block compose-up, Docker\'s: no Docker daemon here; test/ship/compose.test.ts runs the same file with podman-compose '
      + '(the Podman blocks as printed: up, register, login, the guarded GET, down -v and the clean-up)',
  'docs/portal.md: node scripts/portal-screenshots.mjs http://localhost:8080/portal/ customer@example.com \'their password\'':
    'the script on an operator\'s own portal: test/browser/portalPages.browser.test.ts runs it against a portal and a customer of its own',
  'docs/benchmark.md: npm run bench          # ~20 minutes; uses Postgres and Redis when they answer, else embedded': 'twenty minutes of load',
};

describe('the docs\' shell blocks', () => {
  it('are each run as written by a test, or say here why not', () => {
    const blocks = docsPages().flatMap((file) => fencedBlocks(file).filter((b) => b.lang === 'sh').map((b) => ({ file, ...b })));
    const unaccounted = blocks.filter((b) => {
      if (b.name && (RUN_HERE.has(`${b.file}: ${b.name}`) || RUN_ELSEWHERE.has(`${b.file}: ${b.name}`))) return false;
      return !(`${b.file}: ${b.text.split('\n', 1)[0]}` in NOT_RUN);
    });
    expect(unaccounted.map((b) => `${b.file}:${b.line}`)).toEqual([]);
    expect(blocks.every((b) => !['bash', 'shell', 'console'].includes(b.lang))).toBe(true);
  });
});

describeWithServices('the docs\' commands, pasted', () => {
  let db: ThrowawayDatabase;
  let gw: GatewayProcess;
  let work: string;
  let env: Record<string, string>;
  let ports: { public: number; admin: number };
  const adminKey = randomBytes(32).toString('base64');

  /** Runs a block in bash, as a terminal would (stopping at the first failing command), with only the example ports changed. */
  function run(block: string, extra: Record<string, string> = {}, cwd = ROOT): Promise<{ code: number; stdout: string; stderr: string }> {
    const script = block.replaceAll('localhost:8080', `localhost:${ports.public}`).replaceAll(':9090', `:${ports.admin}`);
    return new Promise((resolve) => {
      execFile('bash', ['-e', '-o', 'pipefail', '-c', script], { cwd, env: { ...env, ...extra }, timeout: 60_000 }, (err, stdout, stderr) => {
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
      });
    });
  }
  const login = async () => (await request(`http://127.0.0.1:${ports.public}`, 'POST', '/api/v1/auth/login', { json: ADA })).json.access_token as string;

  beforeAll(async () => {
    ensureBuilt();
    db = await throwawayDatabase({ migrated: true });
    ports = { public: await sparePort(), admin: await sparePort() };
    work = mkdtempSync(path.join(tmpdir(), 'gw-docs-commands-'));
    // `gateway` as installed: the package's bin on the PATH; node (and npx) of this run first.
    const bin = path.join(work, 'bin');
    mkdirSync(bin);
    symlinkSync(CLI, path.join(bin, 'gateway'));
    env = {
      PATH: [path.dirname(process.execPath), bin, process.env.PATH ?? ''].join(path.delimiter),
      HOME: process.env.HOME ?? work,
      DATABASE_URL: db.url, REDIS_URL: '', JWT_SECRET: randomBytes(48).toString('base64'), GATEWAY_ADMIN_KEY: adminKey,
      PORT: String(ports.public),
    };
    const config = readFileSync(path.join(ROOT, 'gateway.yaml'), 'utf8').replace(/^( {2}port: )9090\b/m, `$1${ports.admin}`);
    gw = await spawnGateway(config, { env });
    await db.sql("SELECT setval('users_id_seq', 41)");
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await db?.drop();
    if (work) rmSync(work, { recursive: true, force: true });
    await closeSql();
  });

  it('README: registers and logs in', async () => {
    const { code, stdout } = await run(docsBlock('README', 'register-login'));
    expect(code).toBe(0);
    expect(stdout).toMatch(/^\{"message":"Utilisateur créé","user_id":42\}\{"access_token":"eyJ[^"]+","refresh_token":"eyJ[^"]+","token_type":"Bearer","plan":"free"\}$/);
  });

  it('http-api.md: logs in, and reads the user with the access token', async () => {
    const block = docsBlock('http-api', 'login');
    const { code, stdout } = await run(block, { ACCESS_TOKEN: await login() });
    expect(code).toBe(0);
    expectShown(stdout, shownOutput(block));
    expect(stdout).toContain('"email":"ada@example.com"');
  });

  it('operating.md: changes the plan through a running gateway\'s admin API', async () => {
    const block = docsBlock('operating', 'users-through-admin');
    const { code, stdout, stderr } = await run(block);
    expect(code, stderr).toBe(0);
    expectShown(stdout, shownOutput(block));
  });

  it('http-api.md: reads the user and sets its plan with the admin key', async () => {
    const { code, stdout } = await run(docsBlock('http-api', 'admin-plan'));
    expect(code).toBe(0);
    const answers = stdout.split(/(?<=\})(?=\{)/).map((text) => JSON.parse(text) as Record<string, unknown>);
    expect(answers.map((a) => [a.id, a.email, a.plan])).toEqual([[42, ADA.email, 'pro'], [42, ADA.email, 'pro']]);
  });

  it('console.md: lists users from the command line, and mints a one-time console link', async () => {
    const list = await run(docsBlock('console', 'users-list'));
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toContain(ADA.email);
    expect(list.stdout).toContain('{"users":[{"id":42,"email":"ada@example.com","plan":"pro"');
    const ticket = await run(docsBlock('console', 'ticket'), { ADMIN_KEY: adminKey });
    expect(ticket.code).toBe(0);
    expect(JSON.parse(ticket.stdout)).toEqual({ url: expect.stringMatching(new RegExp(`^http://127\\.0\\.0\\.1:${ports.admin}/console/#ticket=[\\w-]+$`)), expires_at: expect.any(String) });
  });

  it('audit.md: finds a failed login with the CLI; second-factor.md: removes the second factor', async () => {
    expect((await request(`http://127.0.0.1:${ports.public}`, 'POST', '/api/v1/auth/login', { json: { ...ADA, password: 'wrong horse' } })).status).toBe(401);
    const audit = await run(docsBlock('audit', 'audit-cli'));
    expect(audit.code, audit.stderr).toBe(0);
    expect(audit.stdout).toMatch(/^AT\s+TYPE\s+ACTOR\s+USER\s+IP\s+DATA\n\S+Z\s+login\.failed\s+user\s+42\s+127\.0\.0\.1\s+\{"reason":"wrong_password"\}\n$/);
    const reset = await run(docsBlock('second-factor', 'mfa-reset'), { ADMIN_KEY: adminKey });
    expect(reset.code).toBe(0);
    expect(reset.stdout).not.toContain('"error"');
  });

  it('operating.md: the users commands, one after the other, as shown', async () => {
    await db.sql("UPDATE users SET plan = 'free' WHERE id = 42");
    // reset-link makes its link from mail.resetUrl: the repository's file with its mail section
    // uncommented, as the page says (smtp empty: nothing is sent).
    // A project with the gateway installed (node_modules/.bin/gateway), where npx finds it.
    const withMail = path.join(work, 'with-mail');
    mkdirSync(path.join(withMail, 'node_modules/.bin'), { recursive: true });
    symlinkSync(CLI, path.join(withMail, 'node_modules/.bin/gateway'));
    writeFileSync(path.join(withMail, 'gateway.yaml'), readFileSync(path.join(ROOT, 'gateway.yaml'), 'utf8').replace(/^# (mail:.*| {2}(?:smtp|from|resetUrl|verifyUrl):.*)$/gm, '$1'));
    const block = docsBlock('operating', 'users-commands');
    const { code, stdout, stderr } = await run(block, {}, withMail);
    expect(code, stdout + stderr).toBe(0);
    expectShown(stdout, shownOutput(block));
    expect(await db.sql('SELECT id FROM users WHERE email = $1', [ADA.email])).toEqual([]);
  });

  it('upstream-identity.md: rotates the assertion keys', async () => {
    const before = await db.sql<{ kid: string }>("SELECT kid FROM assertion_keys WHERE state = 'current'");
    const { code, stdout, stderr } = await run(docsBlock('upstream-identity', 'keys-rotate'));
    expect(code, stdout + stderr).toBe(0);
    const after = await db.sql<{ kid: string }>("SELECT kid FROM assertion_keys WHERE state = 'current'");
    expect(after).toHaveLength(1);
    expect(after).not.toEqual(before);
  });

  it('configuration.md and tls.md: the key and certificate files OpenSSL writes', async () => {
    const dir = mkdtempSync(path.join(work, 'keys-'));
    expect((await run(docsBlock('configuration', 'key-files'), {}, dir)).code).toBe(0);
    expect(readFileSync(path.join(dir, 'jwt.pem'), 'utf8')).toMatch(/^-----BEGIN PRIVATE KEY-----\n/);
    expect((await run(docsBlock('tls', 'self-signed'), {}, dir)).code).toBe(0);
    expect(existsSync(path.join(dir, 'certs/gateway.pem')) && existsSync(path.join(dir, 'certs/gateway-key.pem'))).toBe(true);
  });
});
