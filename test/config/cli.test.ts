// `gateway check` through the built CLI, as an operator runs it (npm test builds first): the
// configuration, and every file it names, validated as `start` would read them.
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, gateway } from '../helpers/cli.js';
import { makeCertificate } from '../helpers/certificate.js';

const VALID = `
apiKeys: { prefix: acme }
upstreams:
  app: { url: 'http://127.0.0.1:3000' }
  reports: { url: '\${REPORTS_URL:-http://reports.internal:8000}' }
routes:
  - { path: /api/v1/races, upstream: app, methods: [GET, post], dailyLimit: true }
  - { path: /api/v1/reports, upstream: reports, plans: [premium, pro] }
  - { path: /api/v1/public, upstream: app, auth: none, rewritePrefix: /public }
`;
/** CONTRACT §21: what gateway check says while new API keys start with the default gw_. */
const PREFIX_WARNING = 'apiKeys.prefix: new API keys start with the default gw_, which every gateway shares: set a prefix of your own (apiKeys.prefix: acme) '
  + 'so that secret scanners can tell your keys from others\'; keys made before keep working';

const NO_FILE = 'no such file: write one with `npx gateway init` (`--profile public-api` for a public API), or name another with --config FILE or GATEWAY_CONFIG';

describe('gateway check', { timeout: 60_000 }, () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'gw-cli-'));
    ensureBuilt();
  }, 120_000);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const write = (name: string, text: string) => {
    const file = path.join(dir, name);
    writeFileSync(file, text);
    return file;
  };

  it('a valid file: exit 0, "valid", and the route table sorted by path', async () => {
    const file = write('valid.yaml', VALID);
    const { code, stdout, stderr } = await gateway(['check', '--config', file]);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    const lines = stdout.trimEnd().split('\n');
    expect(lines[0]).toBe(`${file}: valid`);
    expect(lines[1]).toBe('');
    const table = lines.slice(2).map((l) => l.split(/ {2,}/));
    expect(table).toEqual([
      ['PATH', 'METHODS', 'AUTH', 'PLANS', 'SCOPES', 'ORG', 'DAILY', 'PER MINUTE', 'UPSTREAM', 'FORWARDED AS'],
      ['/api/v1/public', '*', 'none', '-', '-', '-', '-', '-', 'app (http://127.0.0.1:3000)', '/public/…'],
      ['/api/v1/races', 'GET,POST', 'required', '-', '-', '-', 'yes', '-', 'app (http://127.0.0.1:3000)', '/api/v1/races/…'],
      ['/api/v1/reports', '*', 'required', 'premium,pro', '-', '-', '-', '-', 'reports (http://reports.internal:8000)', '/api/v1/reports/…'],
    ]);
  });

  it('CONTRACT §22: warns about org routes without organizations and CORS without Gateway-Org; never of the retired aware header (§33)', async () => {
    const ORGS = 'organizations: { enabled: true }\nmail: { resetUrl: \'https://a.example/r?token={token}\', verifyUrl: \'https://a.example/v?token={token}\', invitationUrl: \'https://a.example/j?token={token}\' }\n';
    const orgRoute = '  - { path: /api/v1/team, upstream: app, roles: [owner, admin] }\n';
    const off = await gateway(['check', '--config', write('orgs-off.yaml', `${VALID}${orgRoute}`)]);
    expect(off.code).toBe(0);
    expect(off.stderr).toContain('warning: routes /api/v1/team declare org or roles but organizations.enabled is off: nothing acts for an organization, org: required refuses every request');
    const on = await gateway(['check', '--config', write('orgs-on.yaml', `${ORGS}decisions: { port: 9191 }\ncors: { origins: ['https://app.example.com'] }\n${VALID}${orgRoute}`)]);
    expect(on.code).toBe(0);
    expect(on.stderr).toContain('warning: cors.headers does not list Gateway-Org: browser pages cannot act for an organization (add gateway-org)');
    expect(on.stderr).not.toContain('warning: organizations');
    expect(on.stderr).not.toMatch(/org-aware/i);
    const listed = await gateway(['check', '--config', write('orgs-cors.yaml', `${ORGS}cors: { origins: ['https://app.example.com'], headers: [authorization, gateway-org] }\n${VALID}${orgRoute}`)]);
    expect(listed.stderr).not.toContain('warning: cors');
    expect(listed.stderr).not.toContain('warning: organizations');
  });

  it('shows a decision-only route (no upstream, decisions.port set) as such', async () => {
    const file = write('decisions.yaml', `decisions: { port: 9191 }\n${VALID}  - { path: /downloads, plans: [pro] }\n`);
    const { code, stdout } = await gateway(['check', '--config', file]);
    expect(code).toBe(0);
    const row = stdout.split('\n').find((l) => l.startsWith('/downloads'))!.split(/ {2,}/);
    expect(row).toEqual(['/downloads', '*', 'required', 'pro', '-', '-', '-', '-', '- (decision only)', '-']);
  });

  it('shows a route that asks for a second factor (mfa: required) in its AUTH column', async () => {
    const file = write('mfa.yaml', `${VALID}  - { path: /api/v1/billing, upstream: app, mfa: required }
`);
    const { code, stdout } = await gateway(['check', '--config', file]);
    expect(code).toBe(0);
    expect(stdout.split('\n').find((l) => l.startsWith('/api/v1/billing'))!.split(/ {2,}/)[2]).toBe('required (mfa)');
  });

  it('shows the scopes an API key needs and what the route asks of an organization', async () => {
    const file = write('scopes.yaml', `organizations: { enabled: true }\nmail: { resetUrl: 'https://a.example/r?token={token}', verifyUrl: 'https://a.example/v?token={token}', invitationUrl: 'https://a.example/j?token={token}' }\n${VALID}`
      + '  - { path: /api/v1/exports, upstream: app, scopes: [reports:read, exports:write] }\n  - { path: /api/v1/team, upstream: app, roles: [owner, admin] }\n'
      + '  - { path: /api/v1/maybe-team, upstream: app, org: optional }\n');
    const { code, stdout } = await gateway(['check', '--config', file]);
    expect(code).toBe(0);
    const row = (path: string) => stdout.split('\n').find((l) => l.startsWith(`${path} `))!.split(/ {2,}/).slice(0, 6);
    expect(row('/api/v1/exports')).toEqual(['/api/v1/exports', '*', 'required', '-', 'reports:read,exports:write', '-']);
    expect(row('/api/v1/team')).toEqual(['/api/v1/team', '*', 'required', '-', '-', 'required (owner,admin)']);
    expect(row('/api/v1/maybe-team')).toEqual(['/api/v1/maybe-team', '*', 'required', '-', '-', 'optional']);
  });

  it('shows a route on / as forwarded to /…, not //…', async () => {
    const file = write('root.yaml', `${VALID}  - { path: /, upstream: app, auth: none }\n  - { path: /old, upstream: app, auth: none, rewritePrefix: / }\n`);
    const { code, stdout } = await gateway(['check', '--config', file]);
    expect(code).toBe(0);
    const forwardedAs = (path: string) => stdout.split('\n').find((l) => l.startsWith(`${path} `))!.split(/ {2,}/).at(-1);
    expect(forwardedAs('/')).toBe('/…');
    expect(forwardedAs('/old')).toBe('/…');
  });

  it('reads $GATEWAY_CONFIG and substitutes the environment', async () => {
    const file = write('env.yaml', VALID);
    const { code, stdout } = await gateway(['check'], { env: { GATEWAY_CONFIG: file, REPORTS_URL: 'https://reports.example.test' } });
    expect(code).toBe(0);
    expect(stdout).toContain('reports (https://reports.example.test)');
  });

  it('an invalid file: exit 1 and the precise message (file, key path, what is wrong) on stderr', async () => {
    const file = write('bad.yaml', `${VALID}  - { path: /api/v1/x, upstream: nope }\nauth:\n  jwt:\n    secret: short\n`);
    const { code, stdout, stderr } = await gateway(['check', '--config', file]);
    expect(code).toBe(1);
    expect(stdout).toBe('');
    expect(stderr).toBe([
      `${file}: invalid configuration`,
      '  - auth.jwt.secret: expected at least 32 characters for HS256 (or leave it empty to have one generated)',
      '  - routes[3].upstream: unknown upstream "nope"; declared: app, reports',
      '',
    ].join('\n'));
  });

  it('an unset variable, an unknown key, a missing file: exit 1 naming each', async () => {
    const unset = write('unset.yaml', 'admin:\n  apiKey: ${ADMIN_KEY}\n');
    const unknown = write('unknown.yaml', 'server:\n  prot: 80\n');
    const missing = path.join(dir, 'nope.yaml');
    // Started together: each run loads the whole CLI, which is slow on a busy machine.
    const [a, b, c] = await Promise.all([unset, unknown, missing].map((file) => gateway(['check', '--config', file])));
    expect(a).toEqual({
      code: 1, stdout: '',
      stderr: `${unset}: invalid configuration\n  - admin.apiKey: \${ADMIN_KEY}: environment variable ADMIN_KEY is not set and has no default (write \${ADMIN_KEY:-default})\n`,
    });
    expect(b).toEqual({ code: 1, stdout: '', stderr: `${unknown}: invalid configuration\n  - server: unknown key(s) "prot" (did you mean "port"?)\n` });
    expect(c).toEqual({ code: 1, stdout: '', stderr: `${missing}: invalid configuration\n  - ${NO_FILE}\n` });
  });

  it('reads auth.jwt.privateKeyFile: a key that cannot sign with the algorithm is an invalid configuration', async () => {
    const ed25519 = path.join(dir, 'ed25519.pem');
    writeFileSync(ed25519, generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }));
    const notAKey = write('not-a-key.pem', 'hello\n');
    const missingKey = path.join(dir, 'missing.pem');
    const config = (algorithm: string, key: string) => write(`${algorithm}-${path.basename(key)}.yaml`, `${VALID}auth:\n  jwt:\n    algorithm: ${algorithm}\n    privateKeyFile: ${key}\n`);
    const check = (file: string) => gateway(['check', '--config', file]);
    const files = { ok: config('EdDSA', ed25519), wrongType: config('ES256', ed25519), garbage: config('EdDSA', notAKey), missing: config('RS256', missingKey) };
    const [ok, wrongType, garbage, missing] = await Promise.all([check(files.ok), check(files.wrongType), check(files.garbage), check(files.missing)]);
    expect(ok.stderr).toBe('');
    expect(ok.code).toBe(0);
    for (const [result, file, key] of [[wrongType, files.wrongType, ed25519], [garbage, files.garbage, notAKey], [missing, files.missing, missingKey]] as const) {
      expect(result.code).toBe(1);
      expect(result.stdout).toBe('');
      expect(result.stderr.startsWith(`${file}: invalid configuration\n  - auth.jwt.privateKeyFile: ${key}: `)).toBe(true);
    }
    expect(missing.stderr).toContain('ENOENT');
  });

  it('reads webhooks.caFile, relative to the config file: PEM certificates that all parse', async () => {
    const cert = makeCertificate();
    try {
      const lines = cert.cert.trim().split('\n');
      writeFileSync(path.join(dir, 'bundle.pem'), `${cert.cert}${cert.cert}`);
      const truncated = write('truncated.pem', `${cert.cert}${[lines[0], lines[1], lines.at(-1)].join('\n')}\n`);
      const junk = write('junk.pem', 'hello\n');
      const missing = path.join(dir, 'missing-ca.pem');
      const check = (name: string, ca: string) => gateway(['check', '--config', write(name, `${VALID}webhooks:\n  caFile: ${ca}\n`)]);
      const [ok, bad, none, absent] = await Promise.all([
        check('ca-ok.yaml', './bundle.pem'), check('ca-truncated.yaml', truncated), check('ca-junk.yaml', junk), check('ca-missing.yaml', missing),
      ]);
      expect(ok.stderr).toBe('');
      expect(ok.code).toBe(0);
      const problem = (run: typeof ok) => {
        expect(run.code).toBe(1);
        expect(run.stdout).toBe('');
        return run.stderr.split('\n')[1];
      };
      expect(problem(bad)).toMatch(new RegExp(`^  - webhooks\\.caFile: ${truncated}: certificate 2 of 2 does not parse: .+`));
      expect(problem(none)).toBe(`  - webhooks.caFile: ${junk}: no PEM certificate in the file (expected -----BEGIN CERTIFICATE----- blocks)`);
      expect(problem(absent)).toBe(`  - webhooks.caFile: ${missing}: cannot read the file: ENOENT`);
    } finally {
      cert.remove();
    }
  });

  it('checks LOG_LEVEL as start reads it', async () => {
    const file = write('levels.yaml', VALID);
    const check = (LOG_LEVEL: string) => gateway(['check', '--config', file], { env: { LOG_LEVEL } });
    const [loud, debug] = await Promise.all([check('loud'), check('debug')]);
    expect(loud).toEqual({
      code: 1, stdout: '',
      stderr: `${file}: invalid configuration\n  - LOG_LEVEL: unknown level "loud"; expected one of trace, debug, info, warn, error, fatal, silent\n`,
    });
    expect(debug.code).toBe(0);
  });

  it('warns while API keys start with the default gw_, only where some plan may create them, and refuses an unfit prefix', async () => {
    const plain = VALID.replace('apiKeys: { prefix: acme }\n', '');
    const files = {
      byDefault: write('prefix-default.yaml', plain),
      allPlans: write('prefix-all.yaml', `${plain}apiKeys: { plans: all, prefix: gw }\n`),
      noPlan: write('prefix-none.yaml', `${plain}apiKeys: { plans: [nobody] }\n`),
      unfit: write('prefix-unfit.yaml', `${plain}apiKeys: { prefix: Acme_ }\n`),
    };
    const check = (file: string) => gateway(['check', '--config', file]);
    const [byDefault, allPlans, noPlan, unfit] = await Promise.all([check(files.byDefault), check(files.allPlans), check(files.noPlan), check(files.unfit)]);
    expect(byDefault).toMatchObject({ code: 0, stderr: `${files.byDefault}: warning: ${PREFIX_WARNING}\n` });
    expect(allPlans).toMatchObject({ code: 0, stderr: `${files.allPlans}: warning: ${PREFIX_WARNING}\n` });
    // No plan that exists may create keys: there is no key to scan for.
    expect(noPlan).toMatchObject({ code: 0, stderr: '' });
    expect(unfit.code).toBe(1);
    expect(unfit.stderr).toContain('  - apiKeys.prefix: expected 2 to 10 lower-case letters and digits, starting with a letter');
  });

  // CONTRACT §26: on every address the console has no origin of its own unless admin.publicUrl gives one.
  it('says why the console is off on every address without admin.publicUrl, and is quiet with it', async () => {
    const cert = makeCertificate();
    try {
      const admin = (host: string, extra = '') => `admin:\n  host: '${host}'\n  port: 9443\n  apiKey: ${'k'.repeat(32)}\n  tls: { certFile: ${cert.certFile}, keyFile: ${cert.keyFile} }\n${extra}`;
      const files = { v4: write('console-v4.yaml', `${VALID}${admin('0.0.0.0')}`), v6: write('console-v6.yaml', `${VALID}${admin('::')}`), named: write('console-named.yaml', `${VALID}${admin('::', '  publicUrl: https://gateway-admin.example.com:9443\n')}`) };
      const [v4, v6, named] = await Promise.all([gateway(['check', '--config', files.v4]), gateway(['check', '--config', files.v6]), gateway(['check', '--config', files.named])]);
      for (const [result, file, host] of [[v4, files.v4, '0.0.0.0'], [v6, files.v6, '::']] as const) {
        expect(result.code).toBe(0);
        expect(result.stdout.split('\n')[0]).toBe(`${file}: valid`);
        expect(result.stderr).toBe(`${file}: warning: the console (/console/) is off: admin.host "${host}" is every address and admin.publicUrl is not set: the console has no origin to build its sign-in links from and to accept pages of (set admin.publicUrl to the address operators open, such as https://gateway-admin.example.com)\n`);
      }
      expect(named).toMatchObject({ code: 0, stderr: '' });
    } finally {
      cert.remove();
    }
  });
});
