#!/usr/bin/env node
// `npm run release`: the artifacts of one commit, into release/ (CONTRACT §28, docs/releases.md).
//
//   auth-gateway-<version>.tgz      npm pack of the built package: installs with --omit=dev, no build
//   auth-gateway-<version>.oci.tar  the image (podman save --format oci-archive), with OCI labels
//   sbom.cdx.json                   CycloneDX 1.5 of the runtime dependencies (cyclonedx-npm)
//   SHA256SUMS                      over the three, for `sha256sum -c SHA256SUMS`
//
// Built from the commit (HEAD), never from the working tree: `git archive HEAD` into a scratch
// directory, with this checkout's node_modules by symlink, and built there. So uncommitted changes
// are not in a release, a stale dist/ never is either, and a test suite running from this checkout
// meanwhile keeps its own dist/.
//
// Reproducible: npm pack writes every entry with the same mtime (1985-10-26) and owner 0/0, and
// the compiler's output depends on the sources alone, so two runs on one commit give the same
// tarball bytes (test/ship/release.test.ts checks it). SOURCE_DATE_EPOCH is the commit's date:
// the image's `created` label, and the environment of every tool run here.
//
// Options: --out DIR (default release/), --only tarball (skip the image and the SBOM).
// Needs git, Podman (the image; `--runtime runc` where runc is installed, as
// scripts/container-image.sh) and cyclonedx-npm (a devDependency: @cyclonedx/cyclonedx-npm).
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';

const ROOT = path.resolve(import.meta.dirname, '..');
const started = Date.now();
const { values: options } = parseArgs({ options: { out: { type: 'string' }, only: { type: 'string' } } });
if (options.only && options.only !== 'tarball') fail(`--only ${options.only}: only "tarball" is known`);
const out = path.resolve(options.out ?? path.join(ROOT, 'release'));

function fail(message) {
  console.error(`release: ${message}`);
  process.exit(1);
}

function say(message) {
  console.error(`[release ${((Date.now() - started) / 1000).toFixed(0)} s] ${message}`);
}

/**
 * Runs a command, its errors on our stderr and its output kept (podman build's steps are long):
 * the output's last 40 lines are shown only when it fails, which ends the release.
 */
function run(command, args, cwd, env = process.env) {
  const result = spawnSync(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8', maxBuffer: 256 << 20 });
  if (result.error) fail(`${command}: ${result.error.message}`);
  if (result.status !== 0) {
    console.error(result.stdout?.split('\n').slice(-40).join('\n') ?? '');
    fail(`${command} ${args.join(' ')} exited ${result.status ?? result.signal}`);
  }
  return result.stdout;
}

const git = (...args) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();
const commit = git('rev-parse', 'HEAD');
const epoch = git('log', '-1', '--format=%ct', commit);
if (git('status', '--porcelain', '--untracked-files=no')) say(`uncommitted changes are not in the release: it is ${commit.slice(0, 12)}'s`);
const env = { ...process.env, SOURCE_DATE_EPOCH: epoch };

// The commit's tree, built with the compiler of this checkout's node_modules (the lock is the commit's).
const stage = mkdtempSync(path.join(tmpdir(), 'auth-gateway-release-'));
process.on('exit', () => rmSync(stage, { recursive: true, force: true }));
execFileSync('bash', ['-o', 'pipefail', '-c', 'git -C "$1" archive "$2" | tar -x -C "$3"', 'archive', ROOT, commit, stage]);
symlinkSync(realpathSync(path.join(ROOT, 'node_modules')), path.join(stage, 'node_modules'));
const pkg = JSON.parse(readFileSync(path.join(stage, 'package.json'), 'utf8'));
const tarball = `${pkg.name}-${pkg.version}.tgz`;
const image = `${pkg.name}-${pkg.version}.oci.tar`;
const made = options.only === 'tarball' ? [tarball] : [tarball, image, 'sbom.cdx.json'];

// The tools the whole release needs, asked before the build rather than after it.
const cyclonedx = existsSync(path.join(ROOT, 'node_modules/.bin/cyclonedx-npm')) ? path.join(ROOT, 'node_modules/.bin/cyclonedx-npm') : 'cyclonedx-npm';
if (options.only !== 'tarball') {
  if (spawnSync(cyclonedx, ['--version'], { stdio: 'ignore' }).error) {
    fail('cyclonedx-npm not found: it is the devDependency @cyclonedx/cyclonedx-npm (npm install --save-dev @cyclonedx/cyclonedx-npm)');
  }
  if (spawnSync('podman', ['--version'], { stdio: 'ignore' }).error) fail('podman not found: the image needs Podman (apt-get install -y podman runc)');
}

mkdirSync(out, { recursive: true });
for (const file of [...made, 'SHA256SUMS']) rmSync(path.join(out, file), { force: true });

say(`${pkg.name} ${pkg.version} from ${commit.slice(0, 12)}: building`);
run('npm', ['run', '--silent', 'build'], stage, env);
run('npm', ['pack', '--silent', '--pack-destination', out], stage, env);
if (!existsSync(path.join(out, tarball))) fail(`npm pack did not write ${tarball}`);
say(`${tarball} written`);

if (options.only !== 'tarball') {
  sbom();
  say('sbom.cdx.json written');
  containerImage();
  say(`${image} written`);
}

// SHA256SUMS in sha256sum's own format (two spaces, then the name), sorted by name.
const sums = made.sort().map((file) => `${createHash('sha256').update(readFileSync(path.join(out, file))).digest('hex')}  ${file}\n`);
writeFileSync(path.join(out, 'SHA256SUMS'), sums.join(''));
say(`done: ${[...made, 'SHA256SUMS'].join(', ')} in ${path.relative(process.cwd(), out) || '.'}`);

/**
 * The runtime dependencies as the commit's package-lock.json pins them (--package-lock-only: not
 * whatever node_modules holds), in CycloneDX 1.5 JSON, without a timestamp or a random serial
 * number (--output-reproducible) so that it too is the same for one commit.
 */
function sbom() {
  const args = ['--omit', 'dev', '--package-lock-only', '--spec-version', '1.5', '--output-reproducible',
    '--output-format', 'JSON', '--output-file', path.join(out, 'sbom.cdx.json')];
  run(cyclonedx, args, stage, env);
}

/** The image of the Dockerfile, built from the commit's tree and labelled, saved as an OCI archive. */
function containerImage() {
  // crun cannot set rlimits on some machines (these ones): runc where it is installed (test/helpers/containers.ts).
  const runtime = spawnSync('runc', ['--version'], { stdio: 'ignore' }).status === 0 ? ['--runtime', 'runc'] : [];
  const labels = {
    version: pkg.version,
    revision: commit,
    source: sourceUrl(),
    licenses: pkg.license,
    created: new Date(Number(epoch) * 1000).toISOString(),
    title: pkg.name,
    description: pkg.description,
  };
  const tag = `localhost/${pkg.name}:${pkg.version}`;
  // --timestamp: the image's creation date and its files' dates are the commit's, so the image's
  // id is the same for two releases of one commit as long as its layers are (on one machine, with
  // the layer cache, they are); the archive's own tar headers still differ from run to run.
  const build = ['build', '--format', 'docker', '--timestamp', epoch, '-t', tag, '-f', 'Dockerfile',
    ...Object.entries(labels).flatMap(([key, value]) => ['--label', `org.opencontainers.image.${key}=${value}`]), stage];
  const previous = spawnSync('podman', ['image', 'inspect', '--format', '{{.Id}}', tag], { encoding: 'utf8' }).stdout?.trim();
  run('podman', [...runtime, ...build], stage, env);
  run('podman', [...runtime, 'save', '--format', 'oci-archive', '-o', path.join(out, image), tag], stage, env);
  // The image this tag named before (an earlier release of the version) is left untagged, 459 MB
  // each time: removed, unless a container still uses it (then podman refuses, and it stays).
  if (previous && !run('podman', ['image', 'inspect', '--format', '{{.Id}}', tag], stage, env).includes(previous)) {
    spawnSync('podman', ['rmi', previous], { stdio: 'ignore' });
  }
}

/** Where the source is: package.json's repository, else the git remote; the label is required. */
function sourceUrl() {
  const declared = typeof pkg.repository === 'string' ? pkg.repository : pkg.repository?.url;
  if (declared) return declared.replace(/^git\+/, '');
  const remote = spawnSync('git', ['remote', 'get-url', 'origin'], { cwd: ROOT, encoding: 'utf8' });
  if (remote.status === 0 && remote.stdout.trim()) return remote.stdout.trim();
  say('no repository in package.json and no git remote: the source label says "unknown"');
  return 'unknown';
}
