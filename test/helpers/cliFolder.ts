// A CLI test's folder: the gateway.yaml an operator would write for the run's database, and the
// built CLI bound to it (test/cli/*.test.ts). Apart from cli.ts, which the global set-up imports
// before any test's context exists (gateway.ts's inject() cannot load there).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ensureBuilt, gateway, type CliRun } from './cli.js';
import { TEST_JWT_SECRET } from './gateway.js';

/** A folder with the gateway.yaml a CLI test runs on, and the CLI bound to it. */
export interface CliFolder {
  dir: string;
  configFile: string;
  /** `gateway ARGS --config <the file>`, run in the folder, with only PATH and `env`. */
  cli(args: string[], env?: Record<string, string>): Promise<CliRun>;
  remove(): void;
}

/**
 * A new folder (named from `prefix`) whose gateway.yaml holds the storage `postgres` URL, the test
 * runs' JWT secret and an admin listener on port 0, then `moreLines` (YAML, top level), as an
 * operator's file would; the CLI built first when src is newer than dist.
 */
export function cliFolder(prefix: string, postgres: string, moreLines: string[] = []): CliFolder {
  ensureBuilt();
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  const configFile = path.join(dir, 'gateway.yaml');
  const lines = ['storage:', `  postgres: ${JSON.stringify(postgres)}`, 'auth:', '  jwt:', `    secret: ${JSON.stringify(TEST_JWT_SECRET)}`, 'admin:', '  port: 0'];
  writeFileSync(configFile, [...lines, ...moreLines, ''].join('\n'));
  return {
    dir, configFile,
    cli: (args, env = {}) => gateway([...args, '--config', configFile], { cwd: dir, env }),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
