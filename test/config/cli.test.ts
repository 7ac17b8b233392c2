// `gateway check` through the built CLI, as an operator runs it (npm test builds first).
import { execFile, execFileSync } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CLI = path.join(ROOT, 'dist/cli.js');

/** The newest of the sources `gateway check` reads: the CLI, the config loader and the key loader. */
function newestSource(): number {
  const config = path.join(ROOT, 'src/config');
  const files = [path.join(ROOT, 'src/cli.ts'), path.join(ROOT, 'src/auth/tokens.ts'), ...readdirSync(config).map((f) => path.join(config, f))];
  return Math.max(...files.map((f) => statSync(f).mtimeMs));
}

/** Runs the CLI with only the given environment (no DATABASE_URL or JWT_SECRET leaking in). */
function gateway(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env }, timeout: 20_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

const VALID = `
upstreams:
  app: { url: 'http://127.0.0.1:3000' }
  reports: { url: '\${REPORTS_URL:-http://reports.internal:8000}' }
routes:
  - { path: /api/v1/races, upstream: app, methods: [GET, post], dailyLimit: true }
  - { path: /api/v1/reports, upstream: reports, plans: [premium, pro] }
  - { path: /api/v1/public, upstream: app, auth: none, rewritePrefix: /public }
`;

describe('gateway check', { timeout: 60_000 }, () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'gw-cli-'));
    // `npm test` builds before running; a lone `vitest run` rebuilds when dist is older than src.
    if (!existsSync(CLI) || statSync(CLI).mtimeMs < newestSource()) {
      try {
        execFileSync(process.execPath, [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], { cwd: ROOT, stdio: 'pipe' });
      } catch {
        // tsc still emits when another file has a type error; the tests below judge the result.
      }
    }
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
      ['PATH', 'METHODS', 'AUTH', 'PLANS', 'DAILY', 'UPSTREAM', 'FORWARDED AS'],
      ['/api/v1/public', '*', 'none', '-', '-', 'app (http://127.0.0.1:3000)', '/public/…'],
      ['/api/v1/races', 'GET,POST', 'required', '-', 'yes', 'app (http://127.0.0.1:3000)', '/api/v1/races/…'],
      ['/api/v1/reports', '*', 'required', 'premium,pro', '-', 'reports (http://reports.internal:8000)', '/api/v1/reports/…'],
    ]);
  });

  it('reads $GATEWAY_CONFIG and substitutes the environment', async () => {
    const file = write('env.yaml', VALID);
    const { code, stdout } = await gateway(['check'], { GATEWAY_CONFIG: file, REPORTS_URL: 'https://reports.example.test' });
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
      '  - auth.jwt.secret: expected at least 32 bytes for HS256 (or leave it empty to have one generated)',
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
    expect(b).toEqual({ code: 1, stdout: '', stderr: `${unknown}: invalid configuration\n  - server: unknown key(s) "prot"\n` });
    expect(c).toEqual({ code: 1, stdout: '', stderr: `${missing}: invalid configuration\n  - cannot read the file: ENOENT\n` });
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
});
