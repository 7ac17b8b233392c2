// deploy/systemd/auth-gateway.service (CONTRACT §25, §28): what systemd itself says of it
// (`systemd-analyze verify`: no unknown key, no value it would ignore, ExecStart runnable), the
// confinement the contract names, a stop that outlasts the drain, and docs/production.md showing
// the unit as it is. Then the recipe's install steps as printed, from the release tarball, into a
// scratch root (no systemd as PID 1 here: `systemctl --root enable` for `enable --now`, the
// installed unit verified, and its ExecStart run as the unit says: a guarded 401 then 200).
// Without systemd-analyze these are skipped, saying why, unless REQUIRE_SERVICES=1 (CI), where
// that fails the run (.ci/run installs systemd).
import { execFile, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SHUTDOWN_GRACE_MS } from '../../src/cli/start.js';
import { parseConfig } from '../../src/config/load.js';
import { ROOT } from '../helpers/cli.js';
import { docsBlock } from '../helpers/docs.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { guardedThenServed } from '../helpers/firstRequests.js';
import { eventually } from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { sparePort } from '../helpers/ports.js';

const UNIT = path.join(ROOT, 'deploy/systemd/auth-gateway.service');
const unit = readFileSync(UNIT, 'utf8');

/** The unit's `Key=value` settings of a section, a key given more than once keeping each value. */
function settings(section: string, text = unit): Map<string, string[]> {
  const found = new Map<string, string[]>();
  let current = '';
  for (const line of text.split('\n')) {
    const header = /^\[(\w+)\]$/.exec(line);
    if (header) current = header[1]!;
    const setting = /^(\w+)=(.*)$/.exec(line);
    if (setting && current === section) found.set(setting[1]!, [...(found.get(setting[1]!) ?? []), setting[2]!]);
  }
  return found;
}

const analyze = spawnSync('systemd-analyze', ['--version'], { stdio: 'ignore' }).status === 0;
if (!analyze && process.env.REQUIRE_SERVICES === '1') throw new Error('REQUIRE_SERVICES=1 but systemd-analyze is not installed (apt-get install -y systemd; .ci/run installs it)');
if (!analyze) console.warn('\n[tests] systemd-analyze not installed (apt-get install -y systemd): the unit\'s verify skipped\n');

describe('deploy/systemd/auth-gateway.service', () => {
  it.runIf(analyze)('passes systemd-analyze verify without a word', () => {
    const verify = spawnSync('systemd-analyze', ['verify', UNIT], { encoding: 'utf8' });
    expect(verify.stderr).toBe('');
    expect(verify.status).toBe(0);
  });

  it('runs under a user of its own in a read-only system, writing only to its state directory', () => {
    const service = settings('Service');
    expect(Object.fromEntries([...service].filter(([key]) => ['DynamicUser', 'ProtectSystem', 'NoNewPrivileges', 'StateDirectory'].includes(key)))).toEqual({
      DynamicUser: ['yes'], ProtectSystem: ['strict'], NoNewPrivileges: ['yes'], StateDirectory: ['auth-gateway'],
    });
    expect(Number(service.get('LimitNOFILE')?.[0])).toBeGreaterThanOrEqual(65536);
    expect(service.get('EnvironmentFile')).toEqual(['-/etc/auth-gateway/env']);
    expect(service.get('ExecReload')).toEqual(['/bin/kill -HUP $MAINPID']);
  });

  it('stops with SIGTERM and waits longer than the shipped gateway.yaml\'s drain and the time the gateway then gives requests in flight', () => {
    const service = settings('Service');
    expect(service.get('KillSignal')).toEqual(['SIGTERM']);
    const config = parseConfig(readFileSync(path.join(ROOT, 'gateway.yaml'), 'utf8'), 'gateway.yaml');
    expect(Number(service.get('TimeoutStopSec')?.[0]) * 1000).toBeGreaterThan(config.server.shutdownDelay + SHUTDOWN_GRACE_MS);
  });

  it('is the unit docs/production.md shows', () => {
    expect(docsBlock('production', 'systemd-unit')).toBe(unit);
  });
});

// The recipe's install, as printed, from the tarball `npm run release` makes.
const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { name: string; version: string };
const tarball = `${pkg.name}-${pkg.version}.tgz`;
// npm and node of this run (the machine's own may be older than engines.node); none of the gateway's variables.
const userEnv: NodeJS.ProcessEnv = { ...process.env, PATH: [path.dirname(process.execPath), process.env.PATH ?? ''].join(path.delimiter) };
for (const name of ['HOST', 'PORT', 'ADMIN_PORT', 'GATEWAY_CONFIG', 'DATABASE_URL', 'REDIS_URL', 'JWT_SECRET', 'APP_UPSTREAM']) delete userEnv[name];

function sh(script: string, cwd: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('bash', ['-e', '-o', 'pipefail', '-c', script], { cwd, env: userEnv, timeout: 600_000, maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${script}\n${stdout}\n${stderr || err.message}`));
      else resolve(stdout);
    });
  });
}

/**
 * The printed install block in a scratch root: `sudo` dropped (the test runs as the user who owns
 * the scratch root), /etc and /opt under the root, and the two commands that need systemd running
 * replaced by their closest equivalents: daemon-reload by nothing (no manager to reload; the unit
 * is verified below), `enable --now` by `systemctl --root enable` (the symlink) and the test's
 * own start of ExecStart.
 */
function inScratch(block: string, root: string): string {
  return block.replaceAll('1.0.0', pkg.version).split('\n').map((line) => {
    const command = line.replace(/^sudo /, '').replace(/(^|\s)\/(opt|etc)\//g, `$1${root}/$2/`);
    if (command === 'systemctl daemon-reload') return ': daemon-reload';
    if (command === 'systemctl enable --now auth-gateway') return `systemctl --root=${root} enable auth-gateway`;
    return command;
  }).join('\n');
}

describe.runIf(analyze)('the systemd recipe, from the release tarball, into a scratch root', () => {
  let work: string;
  let root: string;
  let upstream: EchoUpstream;
  beforeAll(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'gw-systemd-'));
    root = path.join(work, 'root');
    // What the recipe takes for granted on a machine with systemd: the directory of local units.
    mkdirSync(path.join(root, 'etc/systemd/system'), { recursive: true });
    upstream = await startEchoUpstream();
    const started = Date.now();
    // The tarball of `npm run release` (the commit's, built; the image and the SBOM are not needed here).
    await sh(`node ${JSON.stringify(path.join(ROOT, 'scripts/release.mjs'))} --only tarball --out ${JSON.stringify(work)}`, ROOT);
    console.log(`[systemd] release tarball in ${Math.round((Date.now() - started) / 1000)} s`);
  }, 600_000);
  afterAll(async () => {
    await upstream?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('installs as printed with npm install --omit=dev, no compiler, the unit enabled and verified', { timeout: 600_000 }, async () => {
    const block = docsBlock('production', 'systemd-install');
    expect(block).not.toMatch(/npm (ci|run build)/);
    expect(readdirSync(work)).toContain(tarball);
    const started = Date.now();
    await sh(inScratch(block, root), work);
    console.log(`[systemd] install steps in ${Math.round((Date.now() - started) / 1000)} s`);
    const opt = path.join(root, 'opt/auth-gateway');
    expect(readdirSync(path.join(opt, 'node_modules')).filter((name) => name === 'typescript' || name === 'typescript-native')).toEqual([]);
    expect(existsSync(path.join(opt, 'node_modules/auth-gateway/dist/cli.js'))).toBe(true);
    const installed = path.join(root, 'etc/systemd/system/auth-gateway.service');
    expect(readFileSync(installed, 'utf8')).toBe(unit);
    expect(readlinkSync(path.join(root, 'etc/systemd/system/multi-user.target.wants/auth-gateway.service'))).toBe('/etc/systemd/system/auth-gateway.service');
    expect((spawnSync('stat', ['-c', '%a', path.join(root, 'etc/auth-gateway/env')], { encoding: 'utf8' }).stdout).trim()).toBe('600');
    const verify = spawnSync('systemd-analyze', ['verify', installed], { encoding: 'utf8' });
    expect(verify.stderr).toBe('');
    expect(verify.status).toBe(0);
  });

  it('runs as the unit says (WorkingDirectory, Environment, EnvironmentFile, ExecStart): 401, then 200 with a token', { timeout: 120_000 }, async () => {
    const service = settings('Service', readFileSync(path.join(root, 'etc/systemd/system/auth-gateway.service'), 'utf8'));
    const inRoot = (file: string) => path.join(root, file);
    // On embedded storage, as the section says: storage.embeddedDir is the state directory.
    const config = inRoot('etc/auth-gateway/gateway.yaml');
    writeFileSync(config, readFileSync(config, 'utf8').replace(/^( {2}embeddedDir:) \.\/data$/m, `$1 ${inRoot('var/lib/auth-gateway')}`));
    const environment = Object.fromEntries(service.get('Environment')![0]!.split(' ').map((pair) => pair.split('=') as [string, string]));
    expect(environment).toEqual({ NODE_ENV: 'production', GATEWAY_CONFIG: '/etc/auth-gateway/gateway.yaml' });
    const file = readFileSync(inRoot(service.get('EnvironmentFile')![0]!.replace(/^-/, '')), 'utf8');
    expect(file).toBe('');
    const [port, adminPort] = [await sparePort(), await sparePort()];
    const env = { ...userEnv, ...environment, GATEWAY_CONFIG: inRoot(environment.GATEWAY_CONFIG!), PORT: String(port), ADMIN_PORT: String(adminPort), APP_UPSTREAM: upstream.url };
    const [command, ...args] = service.get('ExecStart')![0]!.split(' ');
    const gateway = spawn(command!, args, { cwd: inRoot(service.get('WorkingDirectory')![0]!), env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    gateway.stdout.on('data', (chunk: Buffer) => { output += chunk.toString(); });
    gateway.stderr.on('data', (chunk: Buffer) => { output += chunk.toString(); });
    const exited = new Promise<number | null>((resolve) => gateway.once('exit', resolve));
    try {
      const base = `http://127.0.0.1:${port}`;
      await eventually(async () => gateway.exitCode === null && (await request(base, 'GET', '/healthz').catch(() => null))?.status === 200, 90_000, 250)
        .catch(() => { throw new Error(`the gateway did not answer /healthz:\n${output}`); });
      await guardedThenServed(base, upstream);
      expect(readdirSync(inRoot('var/lib/auth-gateway')).length).toBeGreaterThan(0);
    } finally {
      // KillSignal=SIGTERM: the drain, then exit 0.
      gateway.kill('SIGTERM');
    }
    expect(await exited, output).toBe(0);
  });
});
