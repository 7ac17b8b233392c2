// The suite's two tiers (issue 69, vitest.config.ts): every test file is in exactly one, as vitest
// itself resolves each tier's configuration (`vitest list`), so a file excluded from the fast tier
// by mistake is not silently run by neither. A file that starts what belongs to the system tier (a
// browser, a container, nginx/Caddy/PgBouncer, a previous release) is in it: in the fast tier it
// would run twice in CI, beside another file, where its time bounds flake. The system tier runs one
// file at a time.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { SYSTEM_CONVENTION, SYSTEM_FILES } from '../../vitest.config.js';
import systemConfig from '../../vitest.system.config.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const VITEST = path.join(ROOT, 'node_modules/vitest/vitest.mjs');

/**
 * The helpers that start a system tier's part: a file importing one of them is a system test.
 * A helper added for a new such part (SimpleSAMLphp, a pg_auto_failover cluster) is added here.
 */
const SYSTEM_HELPERS = ['browser', 'containers', 'proxies', 'pgbouncer', 'previousRelease', 'kustomize', 'pgAutoFailover'];

/** The files one configuration runs, as vitest resolves its include and exclude. */
function listed(config?: string): string[] {
  const args = [VITEST, 'list', '--filesOnly', ...(config === undefined ? [] : ['--config', config])];
  const out = execFileSync(process.execPath, args, { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
  return out.split('\n').map((line) => line.trim()).filter((line) => line.endsWith('.test.ts')).sort();
}

const allTests = readdirSync(path.join(ROOT, 'test'), { recursive: true, encoding: 'utf8' })
  .filter((file) => file.endsWith('.test.ts'))
  .map((file) => `test/${file.split(path.sep).join('/')}`)
  .sort();

describe('test tiers', () => {
  const fast = listed();
  const system = listed('vitest.system.config.ts');

  it('puts every test file in exactly one tier', () => {
    const both = fast.filter((file) => system.includes(file));
    const neither = allTests.filter((file) => !fast.includes(file) && !system.includes(file));
    expect({ both, neither }).toEqual({ both: [], neither: [] });
    expect(system.length).toBeGreaterThan(0);
    expect(fast.length + system.length).toBe(allTests.length);
  });

  it('names in SYSTEM_FILES only files that exist and that the convention does not already cover', () => {
    const missing = SYSTEM_FILES.filter((file) => !existsSync(path.join(ROOT, file)));
    const covered = SYSTEM_FILES.filter((file) => SYSTEM_CONVENTION.some((glob) => path.matchesGlob(file, glob)));
    expect({ missing, covered }).toEqual({ missing: [], covered: [] });
  });

  it('puts every file that starts a browser, a container, a proxy or a previous release in the system tier', () => {
    const importer = new RegExp(`from '(?:\\.\\./)+helpers/(?:${SYSTEM_HELPERS.join('|')})\\.js'`);
    const misplaced = fast.filter((file) => importer.test(readFileSync(path.join(ROOT, file), 'utf8')));
    expect(misplaced).toEqual([]);
  });

  it('runs the system tier one file at a time', () => {
    expect(systemConfig.test).toMatchObject({ fileParallelism: false, maxWorkers: 1 });
  });
});
