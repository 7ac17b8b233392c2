// The previous release, for the upgrade tests (docs/operating.md, "Upgrading a running fleet").
// 1.0.0 is the first release (CHANGELOG.md); until a later version exists the previous release is
// the last build before it (CONTRACT §28): the last commit before 1.0's first new migration,
// 022_user_locale.sql, i.e. the parent of `git log --diff-filter=A -- migrations/022_user_locale.sql`.
// Once 1.1.0 exists, this becomes 1.0.0's commit (or its release tarball). Its code is what a running fleet
// has when this round's code rolls out; every migration added since must be safe for it.
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, realpathSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ROOT } from './cli.js';

export const PREVIOUS_RELEASE = '1528fc78a061a28cdaf78d0d4797fe44ba737ca7';

function run(command: string, args: string[], cwd: string, timeout = 150_000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(command, args, { cwd, timeout, maxBuffer: 64 << 20, encoding: 'buffer' }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${command} ${args.join(' ')}: ${stderr.toString() || err.message}`));
      else resolve(stdout.toString());
    });
  });
}

/** The names of the migrations the previous release had (from git: the test needs the repository's history). */
export async function previousReleaseMigrations(): Promise<string[]> {
  const listing = await run('git', ['ls-tree', '--name-only', `${PREVIOUS_RELEASE}:migrations`], ROOT)
    .catch((err: Error) => { throw new Error(`the previous release ${PREVIOUS_RELEASE} is not in this clone's history (a shallow clone?): ${err.message}`); });
  return listing.split('\n').filter((f) => /^\d+_.+\.sql$/.test(f)).sort();
}

/**
 * The previous release's tree, built, and the path of its CLI. Built once per machine and kept
 * outside the repository (the commit never changes; the key includes which node_modules it runs
 * on): `git archive` of the commit, this checkout's node_modules by symlink (its package.json and
 * lock are the current ones, so no install is needed: an `npm ci` would cost a minute or more),
 * then the compiler. Built in a directory of its own and renamed into place, so two test files, or two
 * checkouts, building at once never see half a build.
 */
export async function previousReleaseCli(): Promise<string> {
  const modules = realpathSync(path.join(ROOT, 'node_modules'));
  const key = createHash('sha256').update(`${PREVIOUS_RELEASE}\n${modules}`).digest('hex').slice(0, 16);
  const dir = path.join(tmpdir(), `auth-gateway-release-${key}`);
  const cli = path.join(dir, 'dist/cli.js');
  if (existsSync(path.join(dir, '.built'))) return cli;
  const building = `${dir}.${randomBytes(4).toString('hex')}`;
  mkdirSync(building);
  try {
    await run('bash', ['-o', 'pipefail', '-c', `git -C "$1" archive "$2" | tar -x -C "$3"`, 'archive', ROOT, PREVIOUS_RELEASE, building], ROOT);
    symlinkSync(modules, path.join(building, 'node_modules'));
    // The native TypeScript compiler of this checkout's node_modules (the one `npm run typecheck`
    // runs), run by the Node running the tests: the same JavaScript as tsc's, byte for byte (its
    // .d.ts and source maps differ), in a quarter of tsc's time (about 5 s of CPU against 18 s).
    await run(process.execPath, [path.join(modules, 'typescript-native/bin/tsc'), '-p', 'tsconfig.build.json'], building);
    writeFileSync(path.join(building, '.built'), `${PREVIOUS_RELEASE}\n`);
    try {
      renameSync(building, dir);
    } catch {
      // Another run finished first: its build is the same one.
      rmSync(building, { recursive: true, force: true });
    }
  } catch (err) {
    rmSync(building, { recursive: true, force: true });
    throw err;
  }
  return cli;
}
