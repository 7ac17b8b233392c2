// The release (CONTRACT §25): `npm pack` makes a tarball that, installed in an empty directory,
// starts with `npx auth-gateway start`, as docs/operating.md's block says, run as written but for
// the ports (PORT, and ADMIN_PORT: the file's 9090 may be another test's or process's) and the version in the file name.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ensureBuilt, ROOT } from '../helpers/cli.js';
import { docsBlock } from '../helpers/docs.js';
import { describeWithServices, newEmail, newPassword } from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { sparePort } from '../helpers/ports.js';

const version = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

function run(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(command, args, { cwd, env, timeout: 150_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${command} ${args.join(' ')}: ${stderr || err.message}`));
      else resolve(stdout);
    });
  });
}

// Needs the npm registry (or npm's cache) for the dependencies, as any install does.
describeWithServices('the npm package', () => {
  let work: string;
  let child: ChildProcess | undefined;
  // npm and npx of the Node running the tests.
  const env: NodeJS.ProcessEnv = { ...process.env, PATH: [path.dirname(process.execPath), process.env.PATH ?? ''].join(path.delimiter) };
  delete env.HOST;
  delete env.GATEWAY_CONFIG;
  delete env.DATABASE_URL;

  beforeAll(async () => {
    ensureBuilt();
    work = mkdtempSync(path.join(tmpdir(), 'gw-pack-'));
    await run('npm', ['pack', '--silent', '--pack-destination', work], ROOT, env);
  }, 60_000);
  afterAll(async () => {
    if (child?.pid && child.exitCode === null && child.signalCode === null) {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch { /* already gone */ }
    }
    rmSync(work, { recursive: true, force: true });
  });

  it('installs in an empty directory and starts with npx auth-gateway start', { timeout: 240_000 }, async () => {
    const block = docsBlock('operating', 'install-package').replaceAll('1.0.0', version).split('\n');
    const [install, copy, start] = [block[0]!, block[1]!, block[2]!.replace(/\s+#.*$/, '')];
    const app = path.join(work, 'app');
    await run('mkdir', ['-p', app], work, env);
    await run('bash', ['-e', '-c', `${install.replace('./auth-gateway', '../auth-gateway')} --prefer-offline\n${copy}`], app, env);
    const [port, adminPort] = [await sparePort(), await sparePort()];
    // A process group of its own: npx runs the gateway as its child, and a signal goes to both, as a
    // terminal's Ctrl-C or a service manager's stop does.
    const started = { ...env, PORT: String(port), ADMIN_PORT: String(adminPort), LOG_LEVEL: 'info' };
    child = spawn('bash', ['-c', `exec ${start}`], { cwd: app, env: started, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let out = '';
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no "gateway listening" line:\n${out}`)), 60_000);
      child!.stdout!.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes('"msg":"gateway listening"')) {
          clearTimeout(timer);
          resolve();
        }
      });
      child!.stderr!.on('data', (chunk: Buffer) => { out += chunk.toString(); });
      child!.once('exit', (code) => reject(new Error(`exited ${code}:\n${out}`)));
    });
    const url = `http://127.0.0.1:${port}`;
    expect((await request(url, 'GET', '/healthz')).status).toBe(200);
    const email = newEmail();
    const password = newPassword();
    expect((await request(url, 'POST', '/api/v1/auth/register', { json: { email, password } })).status).toBe(201);
    expect((await request(url, 'POST', '/api/v1/auth/login', { json: { email, password } })).json.token_type).toBe('Bearer');
    // 'close': every process holding the output has ended, the gateway (npx's child) included.
    const closed = new Promise((resolve) => child!.once('close', resolve));
    process.kill(-child.pid!, 'SIGTERM');
    await closed;
    // The gateway drained and stopped on its own (not killed): its last line says so.
    expect(out).toMatch(/"msg":"shutting down: finishing requests in flight"[\s\S]*"msg":"shut down"/);
  });
});
