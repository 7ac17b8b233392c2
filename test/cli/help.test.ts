// The command line itself: help for the whole and for each command, --version, and usage errors
// that name what was wrong. The built CLI, as `npx gateway` / `npx auth-gateway` runs it.
import { execFile } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, gateway, ROOT } from '../helpers/cli.js';

const COMMANDS = [
  'init', 'start', 'migrate', 'check', 'health', 'schema', 'users set-plan', 'users deactivate', 'users activate',
  'keys rotate', 'keys rotate-jwt', 'keys revoke', 'backup', 'restore', 'errors', 'stripe-fake', 'stripe-fake trigger',
];
const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string; bin: Record<string, string> };

describe('gateway --help, --version, usage errors', { timeout: 60_000 }, () => {
  beforeAll(() => ensureBuilt(), 120_000);

  it('--help lists every command; --version prints the package version', async () => {
    const [help, version] = await Promise.all([gateway(['--help']), gateway(['--version'])]);
    expect(help.code).toBe(0);
    expect(help.stderr).toBe('');
    for (const name of COMMANDS) expect(help.stdout).toMatch(new RegExp(`^  ${name}\\b`, 'm'));
    expect(version).toEqual({ code: 0, stdout: `${pkg.version}\n`, stderr: '' });
  });

  it('each command has its own help, the same with `gateway help COMMAND`', async () => {
    const runs = await Promise.all(COMMANDS.flatMap((name) => [gateway([...name.split(' '), '--help']), gateway(['help', ...name.split(' ')])]));
    const texts = new Set<string>();
    COMMANDS.forEach((name, i) => {
      const [flag, word] = [runs[2 * i]!, runs[2 * i + 1]!];
      expect(flag.code, name).toBe(0);
      expect(flag.stdout.startsWith(`Usage: gateway ${name}`), `${name}: ${flag.stdout.slice(0, 80)}`).toBe(true);
      expect(word).toEqual(flag);
      texts.add(flag.stdout);
    });
    expect(texts.size).toBe(COMMANDS.length);
    // A group lists its actions.
    const users = await gateway(['users', '--help']);
    expect(users.code).toBe(0);
    for (const action of ['set-plan EMAIL PLAN', 'deactivate EMAIL', 'activate EMAIL']) expect(users.stdout).toContain(`users ${action}`);
  });

  it('usage errors: exit 1, nothing on stdout, the problem named on stderr with how to do it right', async () => {
    const [unknownOption, unknownCommand, missing, extra, noCommand, noAction, noValue] = await Promise.all([
      gateway(['check', '--frob']),
      gateway(['frob']),
      gateway(['users', 'set-plan', 'a@example.test']),
      gateway(['keys', 'rotate', 'now']),
      gateway([]),
      gateway(['users']),
      gateway(['check', '--config']),
    ]);
    for (const run of [unknownOption, unknownCommand, missing, extra, noCommand, noAction, noValue]) {
      expect(run.code).toBe(1);
      expect(run.stdout).toBe('');
    }
    expect(unknownOption.stderr).toBe('gateway: unknown option --frob; known options: --config FILE, --help\n\nUsage: gateway check [--config FILE]\nRun `gateway check --help` for its help.\n');
    expect(unknownCommand.stderr).toMatch(/^gateway: unknown command "frob"\n\nUsage: gateway <command>/);
    expect(missing.stderr).toMatch(/^gateway: users set-plan needs PLAN\n\nUsage: gateway users set-plan EMAIL PLAN \[--override\] \[--config FILE\] \[--admin URL\]\n/);
    expect(extra.stderr).toMatch(/^gateway: unexpected argument "now"\n/);
    expect(noCommand.stderr).toMatch(/^gateway: a command is needed\n\nUsage: gateway <command>/);
    expect(noAction.stderr).toMatch(/^gateway: users needs one of: set-plan EMAIL PLAN \| deactivate EMAIL \| activate EMAIL \| list \| reset-link EMAIL \| delete EMAIL\n\nUsage: gateway users /);
    expect(noValue.stderr).toMatch(/^gateway: --config needs a FILE\n/);
  });

  it('installs as `gateway` and as `auth-gateway`, both the same CLI', async () => {
    expect(pkg.bin).toEqual({ gateway: 'dist/cli.js', 'auth-gateway': 'dist/cli.js' });
    expect(readFileSync(path.join(ROOT, 'dist/cli.js'), 'utf8').startsWith('#!/usr/bin/env -S node --max-semi-space-size=32\n')).toBe(true);
    // The build marks it executable: npm links the bins at install, before a fresh clone's first
    // build writes dist/cli.js, so without this `npx gateway` answers 'Permission denied'.
    expect(statSync(path.join(ROOT, 'dist/cli.js')).mode & 0o111).toBe(0o111);
    // npx finds the project's own bin by name; `help`, because npx would read --version as its own.
    const stdout = await new Promise<string>((resolve, reject) => {
      execFile('npx', ['--no', 'auth-gateway', 'help'], { cwd: ROOT, timeout: 30_000 }, (err, out) => (err ? reject(err) : resolve(out)));
    });
    expect(stdout).toBe((await gateway(['help'])).stdout);
  });
});
