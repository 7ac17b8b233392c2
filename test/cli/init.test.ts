// `gateway init` (CONTRACT §28): a newcomer's first file. Each profile is written where asked,
// never over an existing file, passes `gateway check` with nothing in the environment, and the
// public-api one answers as a public API should (codes, English on request, keys for free users).
// `gateway start` without a file says how to make one.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { configSchema } from '../../src/config/schema.js';
import { CLI, ensureBuilt, gateway, logLines, ROOT } from '../helpers/cli.js';
import { docsBlock } from '../helpers/docs.js';

describe('gateway init', { timeout: 60_000 }, () => {
  let dir: string;
  beforeAll(() => {
    ensureBuilt();
    dir = mkdtempSync(path.join(tmpdir(), 'gateway-init-'));
  }, 120_000);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('writes ./gateway.yaml with the spec profile by default: the shipped file, which check passes', async () => {
    const cwd = mkdtempSync(path.join(dir, 'spec-'));
    const run = await gateway(['init'], { cwd });
    expect(run).toMatchObject({ code: 0, stderr: '' });
    expect(run.stdout).toBe(`${path.join(cwd, 'gateway.yaml')}: written (profile spec); next: \`npx gateway check\` shows its routes, \`npx gateway start\` serves them\n`);
    expect(readFileSync(path.join(cwd, 'gateway.yaml'), 'utf8')).toBe(readFileSync(path.join(ROOT, 'gateway.yaml'), 'utf8'));
    const check = await gateway(['check'], { cwd });
    expect(check.code).toBe(0);
    expect(check.stdout.split('\n')[0]).toBe(`${path.join(cwd, 'gateway.yaml')}: valid`);
  });

  it('never overwrites a file: exit 1, the file untouched', async () => {
    const file = path.join(dir, 'mine.yaml');
    writeFileSync(file, 'plans: { freeDailyLimit: 4 }\n');
    const run = await gateway(['init', '--profile', 'public-api', '--config', file]);
    expect(run).toEqual({ code: 1, stdout: '', stderr: `gateway: ${file} exists: init never overwrites a configuration (move it away, or name another file with --config)\n` });
    expect(readFileSync(file, 'utf8')).toBe('plans: { freeDailyLimit: 4 }\n');
  });

  it('refuses an unknown profile', async () => {
    const run = await gateway(['init', '--profile', 'enterprise', '--config', path.join(dir, 'x.yaml')]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('--profile: unknown profile "enterprise"; expected spec or public-api');
  });

  it('public-api: check passes, and the file sets what a public API needs', async () => {
    const file = path.join(dir, 'public.yaml');
    expect((await gateway(['init', '--profile', 'public-api', '--config', file])).code).toBe(0);
    const check = await gateway(['check', '--config', file]);
    expect(check.code).toBe(0);
    expect(check.stdout).toMatch(/^\/v1 +\* +required +- +- +- +yes +yes +api \(http:\/\/127\.0\.0\.1:3000\)/m);
    const config = parseConfig(readFileSync(file, 'utf8'), file, {});
    expect(config.errors).toMatchObject({ codes: true, language: 'negotiate' });
    expect(config.apiKeys.plans).toBe('all');
    expect(config.plans.limits.free).toEqual({ daily: 100, monthly: 1000, perMinute: 60 });
  });

  it('README\'s block runs as printed, in a project where the package is installed', async () => {
    const cwd = mkdtempSync(path.join(dir, 'readme-'));
    // What `npm install auth-gateway` leaves for npx to find: the package's bin in node_modules/.bin.
    mkdirSync(path.join(cwd, 'node_modules/.bin'), { recursive: true });
    symlinkSync(CLI, path.join(cwd, 'node_modules/.bin/gateway'));
    writeFileSync(path.join(cwd, 'package.json'), '{"private": true}\n');
    const out = await new Promise<{ code: number; stdout: string }>((resolve) => {
      execFile('bash', ['-e', '-c', docsBlock('README', 'init')], { cwd, env: { PATH: `${path.dirname(process.execPath)}:${process.env.PATH ?? ''}`, HOME: cwd }, timeout: 60_000 },
        (err, stdout) => resolve({ code: err ? 1 : 0, stdout }));
    });
    expect(out.code).toBe(0);
    expect(out.stdout.split('\n')[0]).toBe(`${path.join(cwd, 'gateway.yaml')}: written (profile public-api); next: \`npx gateway check\` shows its routes, \`npx gateway start\` serves them`);
    expect(out.stdout).toContain(`${path.join(cwd, 'gateway.yaml')}: valid`);
  });

  it('the shipped gateway.yaml and the public-api profile show every top-level block of the configuration (commented where off)', () => {
    const blocks = Object.keys(configSchema.shape);
    for (const file of [path.join(ROOT, 'gateway.yaml'), path.join(ROOT, 'profiles/public-api.yaml')]) {
      const text = readFileSync(file, 'utf8');
      const shown = new Set([...text.matchAll(/^#? ?([a-zA-Z]+):/gm)].map((m) => m[1]!));
      const missing = blocks.filter((block) => !shown.has(block) && (file.endsWith('gateway.yaml') || PUBLIC_API_BLOCKS.includes(block)));
      expect(missing, file).toEqual([]);
    }
  });

  it('gateway start without a configuration file says to run gateway init', async () => {
    const cwd = mkdtempSync(path.join(dir, 'empty-'));
    const run = await gateway(['start'], { cwd });
    expect(run.code).toBe(1);
    expect(logLines(run.stdout).at(-1)).toMatchObject({
      level: 60, msg: 'no configuration file', file: path.join(cwd, 'gateway.yaml'),
      hint: '`npx gateway init` writes a commented gateway.yaml here (`--profile public-api` for a public API); then `npx gateway start`',
    });
  });
});

// A public API's profile shows the blocks a public API decides on; listeners and telemetry keep their defaults.
const PUBLIC_API_BLOCKS = ['server', 'storage', 'auth', 'errors', 'apiKeys', 'plans', 'organizations', 'mail', 'billing', 'hooks', 'admin', 'upstreams', 'routes'];
