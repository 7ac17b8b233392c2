// `npm run release` (CONTRACT §28, docs/releases.md): the artifacts of one commit, used as a team
// pinning them would, without the checkout. The tarball installed with `npm install --omit=dev`
// in an empty directory (no TypeScript, no build) and started with `npx auth-gateway start` on
// embedded storage: a guarded route refuses without a token (401) and proxies with one (200). The
// OCI archive loaded with `podman load`: its labels, a non-root process, the same 401 then 200.
// `sha256sum -c SHA256SUMS` passes; a second release of the commit gives the same tarball bytes;
// the SBOM is CycloneDX 1.5 of the runtime dependencies the lock pins, and of no dev one.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.js';
import { describeWithPodman, ensureStandins, mustRun, podman, run } from '../helpers/containers.js';
import { docsBlock } from '../helpers/docs.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { guardedThenServed } from '../helpers/firstRequests.js';
import { eventually } from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { sparePort } from '../helpers/ports.js';

const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { name: string; version: string; dependencies: Record<string, string>; devDependencies: Record<string, string> };
const tarball = `${pkg.name}-${pkg.version}.tgz`;
const archive = `${pkg.name}-${pkg.version}.oci.tar`;
const imageTag = `localhost/${pkg.name}:${pkg.version}`;
const container = `gw-release-${process.pid}`;
/** docs/releases.md's block `name`, one command a line, for this version. */
const docsLines = (name: string) => docsBlock('releases', name).replaceAll('1.0.0', pkg.version).split('\n');

// npm, npx and the gateway on the Node running the tests (the machine's own may be older than
// engines.node); none of the gateway's own variables: the installed gateway.yaml's defaults.
const userEnv: NodeJS.ProcessEnv = { ...process.env, PATH: [path.dirname(process.execPath), process.env.PATH ?? ''].join(path.delimiter) };
for (const name of ['HOST', 'PORT', 'ADMIN_PORT', 'GATEWAY_CONFIG', 'DATABASE_URL', 'REDIS_URL', 'JWT_SECRET', 'APP_UPSTREAM']) delete userEnv[name];

function sh(command: string, args: string[], cwd: string, env = userEnv): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(command, args, { cwd, env, timeout: 600_000, maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${command} ${args.join(' ')}: ${stderr || err.message}`));
      else resolve(stdout);
    });
  });
}

/** Starts `command` in `cwd` in a process group of its own (npx and its gateway child), resolved at "gateway listening". */
function startListening(command: string, cwd: string, env: NodeJS.ProcessEnv): Promise<ChildProcess> {
  const child = spawn('bash', ['-c', `exec ${command}`], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let out = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no "gateway listening" line in 90 s:\n${out}`)), 90_000);
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('"msg":"gateway listening"')) {
        clearTimeout(timer);
        resolve(child);
      }
    });
    child.stderr!.on('data', (chunk: Buffer) => { out += chunk.toString(); });
    child.once('exit', (code) => reject(new Error(`exited ${code}:\n${out}`)));
  });
}

let out: string;
let upstream: EchoUpstream;
let installed: ChildProcess | undefined;

describeWithPodman('the release tests')('npm run release', () => {
  beforeAll(async () => {
    await ensureStandins();
    out = mkdtempSync(path.join(tmpdir(), 'gw-release-'));
    upstream = await startEchoUpstream();
    const started = Date.now();
    // As `npm run release` runs it, into a directory of the test's own rather than release/.
    await mustRun(process.execPath, [path.join(ROOT, 'scripts/release.mjs'), '--out', out], { env: userEnv });
    console.log(`[release] npm run release took ${Math.round((Date.now() - started) / 1000)} s`);
  }, 1_200_000);

  afterAll(async () => {
    if (installed?.pid && installed.exitCode === null && installed.signalCode === null) {
      try {
        process.kill(-installed.pid, 'SIGKILL');
      } catch { /* already gone */ }
    }
    await run('podman', ['rm', '-f', '-t', '0', container]);
    await run('podman', ['volume', 'rm', '-f', container]);
    await upstream?.close();
    if (out) rmSync(out, { recursive: true, force: true });
  });

  it('writes the tarball, the OCI archive, the SBOM and SHA256SUMS, which sha256sum -c accepts', async () => {
    expect(readdirSync(out).sort()).toEqual(['SHA256SUMS', archive, tarball, 'sbom.cdx.json'].sort());
    const listed = readFileSync(path.join(out, 'SHA256SUMS'), 'utf8').trim().split('\n').map((line) => line.split('  ')[1]);
    expect(listed).toEqual([archive, tarball, 'sbom.cdx.json'].sort());
    expect(await sh('bash', ['-e', '-c', docsLines('release-verify')[0]!], out)).toBe(`${archive}: OK\n${tarball}: OK\nsbom.cdx.json: OK\n`);
  });

  it('gives the same tarball bytes when the commit is released again (a fresh build)', { timeout: 300_000 }, async () => {
    const again = path.join(out, 'again');
    await mustRun(process.execPath, [path.join(ROOT, 'scripts/release.mjs'), '--only', 'tarball', '--out', again], { env: userEnv });
    expect(readFileSync(path.join(again, tarball)).equals(readFileSync(path.join(out, tarball)))).toBe(true);
    rmSync(again, { recursive: true, force: true });
  });

  it('ships what runs and no sources: dist, console, migrations, gateway.yaml, LICENSE', async () => {
    const files = (await sh('tar', ['-tzf', tarball], out)).split('\n');
    for (const file of ['dist/cli.js', 'dist/verify/index.js', 'console/index.html', 'migrations/001_initial.sql', 'gateway.yaml', 'gateway.schema.json', 'LICENSE', 'package.json']) {
      expect(files, file).toContain(`package/${file}`);
    }
    expect(files.filter((file) => /^package\/(src|test|bench|scripts)\//.test(file) || file.endsWith('.ts') && !file.endsWith('.d.ts'))).toEqual([]);
  });

  it('lists in a CycloneDX 1.5 SBOM the runtime dependencies at the versions the lock pins, and no dev one', () => {
    interface Component { group?: string; name: string; version: string; components?: Component[] }
    const sbom = JSON.parse(readFileSync(path.join(out, 'sbom.cdx.json'), 'utf8')) as { bomFormat: string; specVersion: string; metadata: { component: Component }; components: Component[] };
    expect([sbom.bomFormat, sbom.specVersion, sbom.metadata.component.name, sbom.metadata.component.version]).toEqual(['CycloneDX', '1.5', pkg.name, pkg.version]);
    const flat = (list: Component[]): Component[] => list.flatMap((c) => [c, ...flat(c.components ?? [])]);
    const versions = new Map(flat(sbom.components).map((c) => [c.group ? `${c.group}/${c.name}` : c.name, c.version]));
    const lock = JSON.parse(readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { version: string }> };
    for (const name of Object.keys(pkg.dependencies)) expect(versions.get(name), name).toBe(lock.packages[`node_modules/${name}`]!.version);
    expect(['vitest', 'typescript', 'eslint', 'puppeteer-core'].filter((name) => versions.has(name))).toEqual([]);
  });

  it('installs with npm install --omit=dev in an empty directory and answers 401 then 200 with npx auth-gateway start', { timeout: 600_000 }, async () => {
    const app = path.join(out, 'app');
    mkdirSync(app);
    copyFileSync(path.join(out, tarball), path.join(app, tarball));
    // docs/releases.md's install block as written: the install and the copy, then its start below.
    const [install, copy, start] = docsLines('release-install');
    expect(install).toBe(`npm install --omit=dev ./${tarball}`);
    await sh('bash', ['-e', '-c', `${install!} --no-audit --no-fund\n${copy!}`], app);
    // Installed without a compiler: nothing of TypeScript's is there to build with.
    expect(readdirSync(path.join(app, 'node_modules')).filter((name) => name === 'typescript' || name === 'typescript-native')).toEqual([]);
    const [port, adminPort] = [await sparePort(), await sparePort()];
    // The shipped file's ports and upstream, moved off what other tests or processes may hold.
    installed = await startListening(start!, app, { ...userEnv, PORT: String(port), ADMIN_PORT: String(adminPort), APP_UPSTREAM: upstream.url });
    await guardedThenServed(`http://127.0.0.1:${port}`, upstream);
    // Embedded storage, in the directory it was started from.
    expect(readdirSync(path.join(app, 'data')).length).toBeGreaterThan(0);
    const closed = new Promise((resolve) => installed!.once('close', resolve));
    process.kill(-installed.pid!, 'SIGTERM');
    await closed;
  });

  it('loads with podman load, labelled, and runs as a non-root user answering 401 then 200', { timeout: 300_000 }, async () => {
    // The release built the image under this tag: removed, so what runs is what the archive holds.
    await run('podman', ['rmi', '-f', imageTag]);
    const load = await run('bash', ['-e', '-c', docsLines('release-verify')[1]!], { cwd: out });
    expect(load.status, load.stderr).toBe(0);
    expect(load.stdout).toContain(`Loaded image: ${imageTag}`);
    const labels = JSON.parse(await podman('image', 'inspect', '--format', '{{json .Labels}}', imageTag)) as Record<string, string>;
    const commit = (await sh('git', ['rev-parse', 'HEAD'], ROOT)).trim();
    const created = new Date(Number((await sh('git', ['log', '-1', '--format=%ct'], ROOT)).trim()) * 1000).toISOString();
    expect(labels).toMatchObject({
      'org.opencontainers.image.version': pkg.version,
      'org.opencontainers.image.revision': commit,
      'org.opencontainers.image.licenses': 'MIT',
      'org.opencontainers.image.created': created,
    });
    expect(labels['org.opencontainers.image.source']).toBeTruthy();
    const [port, adminPort] = [await sparePort(), await sparePort()];
    await podman('run', '-d', '--name', container, '--network', 'host', '--read-only', '--tmpfs', '/tmp', '-v', `${container}:/app/data`,
      '-e', `PORT=${port}`, '-e', `ADMIN_PORT=${adminPort}`, '-e', `APP_UPSTREAM=${upstream.url}`, imageTag);
    const base = `http://127.0.0.1:${port}`;
    await eventually(async () => (await request(base, 'GET', '/healthz').catch(() => null))?.status === 200, 90_000, 250);
    expect((await podman('exec', container, 'id', '-u')).trim()).toBe('1000');
    await guardedThenServed(base, upstream);
  });
});
