// The gateway refuses a Node older than package.json's engines (issue 27: Node 20 ran silently),
// with one line naming the version needed, before any command runs.
import { execFile, execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { nodeVersionProblem } from '../../src/cli/nodeVersion.js';
import { CLI, ensureBuilt, ROOT } from '../helpers/cli.js';
import { describeWithServices, rawTestConfig } from '../helpers/gateway.js';
import { spawnGateway } from '../helpers/gatewayProcess.js';

const ENGINES = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } }).engines.node;
const FLOOR = ENGINES.replace('>=', '');

/** `file --version`, or undefined when there is no such Node. */
function versionOf(file: string): string | undefined {
  try {
    return execFileSync(file, ['--version'], { encoding: 'utf8', timeout: 10_000 }).trim();
  } catch {
    return undefined;
  }
}

/** The built CLI with process.versions.node made to read `version` before it loads (an older Node, as far as the gateway can tell). */
function cliAs(version: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const pretend = `data:text/javascript,Object.defineProperty(process.versions,"node",{value:${JSON.stringify(version)}})`;
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', pretend, CLI, ...args], { env: { PATH: process.env.PATH ?? '' }, timeout: 30_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

describe('the Node version', () => {
  it('compares with engines part by part', () => {
    expect(ENGINES).toMatch(/^>=\d+\.\d+\.\d+$/);
    for (const older of ['20.20.2', 'v22.12.9', '22.12.0', '8.0.0']) expect(nodeVersionProblem(older, '>=22.13.0'), older).toMatch(/^gateway: Node\.js 22\.13\.0 or newer is needed, this is v/);
    for (const ok of ['22.13.0', 'v22.13.1', '22.14.0', '26.10.0', '100.0.0']) expect(nodeVersionProblem(ok, '>=22.13.0'), ok).toBeUndefined();
  });

  it('gateway start and check refuse an older Node with one line, exit 1, before reading anything', async () => {
    ensureBuilt();
    for (const args of [['start', '--config', '/nonexistent.yaml'], ['check', '--config', '/nonexistent.yaml'], ['--version']]) {
      const run = await cliAs('20.20.2', args);
      expect(run.code, args.join(' ')).toBe(1);
      expect(run.stdout).toBe('');
      expect(run.stderr).toBe(`gateway: Node.js ${FLOOR} or newer is needed, this is v20.20.2 (npm start and npm test run on the one npm install brings; otherwise install a newer Node.js)\n`);
    }
    // The floor itself runs.
    const atFloor = await cliAs(FLOOR, ['--version']);
    expect(atFloor).toMatchObject({ code: 0, stderr: '' });
  });

  // These machines' own Node (Debian's, 20) is older than the floor: the real thing, not a pretence,
  // so that nothing the CLI imports fails to load on it before the check can speak.
  const systemNode = ['/usr/bin/node', '/usr/local/bin/node'].map((file) => ({ file, version: versionOf(file) })).find((n) => n.version && nodeVersionProblem(n.version, ENGINES));
  it.runIf(systemNode)(`a real older Node (${systemNode?.version ?? 'none here'}) gets the same one line and exit 1`, async () => {
    ensureBuilt();
    const run = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(systemNode!.file, [CLI, 'check', '--config', '/nonexistent.yaml'], { env: { PATH: '/usr/bin:/bin' }, timeout: 30_000 }, (err, stdout, stderr) => {
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
      });
    });
    expect(run).toEqual({
      code: 1, stdout: '',
      stderr: `gateway: Node.js ${FLOOR} or newer is needed, this is ${systemNode!.version} `
        + '(npm start and npm test run on the one npm install brings; otherwise install a newer Node.js)\n',
    });
  });
});

describeWithServices('the V8 flags', () => {
  it('the installed command runs with the flag npm start and the Dockerfile pass, and says so', async () => {
    ensureBuilt();
    const gw = await spawnGateway(rawTestConfig(), { asInstalled: true });
    try {
      const listening = gw.logs.find((l) => l.msg === 'gateway listening')!;
      expect(listening.nodeFlags).toEqual(['--max-semi-space-size=32']);
    } finally {
      await gw.stop();
    }
    const dockerCmd = /^CMD (\[.*\])$/m.exec(readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8'))![1]!;
    const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } };
    expect(JSON.parse(dockerCmd)).toContain('--max-semi-space-size=32');
    expect(pkg.scripts.start).toContain('--max-semi-space-size=32');
  });
});
