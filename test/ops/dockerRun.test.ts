// The Docker section of docs/operating.md, run without a Docker engine (none runs here): the
// image's command (the Dockerfile's CMD) on the image's gateway.yaml, with the environment the
// doc's `docker run` passes. Issue 27: the doc never named APP_UPSTREAM, and the image's routes
// went to 127.0.0.1:3000, the container itself: 502. Only the example ports and hosts are changed.
import { execSync, spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ensureBuilt, ROOT } from '../helpers/cli.js';
import { docsBlock } from '../helpers/docs.js';
import { closeSql, describeWithServices, eventually, marker, testServices } from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { request } from '../helpers/http.js';
import { sparePort } from '../helpers/ports.js';

describeWithServices('docs/operating.md: the Docker section\'s environment', () => {
  let dir: string;
  let upstream: EchoUpstream;
  let child: ChildProcess | undefined;

  beforeAll(async () => {
    ensureBuilt();
    upstream = await startEchoUpstream();
    dir = mkdtempSync(path.join(tmpdir(), 'gw-docker-'));
  });
  afterAll(async () => {
    if (child && child.exitCode === null) await new Promise((resolve) => { child!.once('exit', resolve); child!.kill('SIGTERM'); });
    await upstream?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
    await closeSql();
  });

  it('the image holds everything the package ships (the console\'s pages were once left out)', () => {
    const dockerfile = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
    const runtime = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
    const copied = new Set([...runtime.matchAll(/^COPY (?:--from=\S+ )?(.+) \S+$/gm)].flatMap(([, sources]) => sources!.split(' ').map((s) => s.replace(/^\/app\//, ''))));
    const shipped = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { files: string[] }).files;
    expect(shipped.filter((f) => !copied.has(f))).toEqual([]);
  });

  it('serves the image\'s routes to APP_UPSTREAM with the environment docker run passes', async () => {
    const block = docsBlock('operating', 'docker-run');
    const passed = Object.fromEntries([...block.matchAll(/-e ([A-Z_]+)=("\$\((.+?)\)"|\S+)/g)].map(([, name, value, command]) => [name!, command ? execSync(command, { encoding: 'utf8' }).trim() : value!]));
    expect(Object.keys(passed).sort()).toEqual(['APP_UPSTREAM', 'DATABASE_URL', 'GATEWAY_ADMIN_KEY', 'JWT_SECRET', 'REDIS_URL']);
    // The example hosts are the test run's; Redis stays out (the image's key prefix would be shared).
    const env = { ...passed, DATABASE_URL: testServices!.postgres, REDIS_URL: '', APP_UPSTREAM: upstream.url };
    // The image's files: its gateway.yaml (with a spare admin port), dist, migrations; CMD as written.
    const cmd = JSON.parse(/^CMD (\[.*\])$/m.exec(readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8'))![1]!) as string[];
    expect(cmd.slice(0, 1)).toEqual(['node']);
    const adminPort = await sparePort();
    writeFileSync(path.join(dir, 'gateway.yaml'), readFileSync(path.join(ROOT, 'gateway.yaml'), 'utf8').replace(/^( {2}port: )9090\b/m, `$1${adminPort}`));
    copyFileSync(path.join(ROOT, 'package.json'), path.join(dir, 'package.json'));
    const port = await sparePort();
    const args = cmd.slice(1).map((a) => (a.startsWith('dist/') ? path.join(ROOT, a) : a));
    child = spawn(process.execPath, args, { cwd: dir, env: { PATH: process.env.PATH ?? '', NODE_ENV: 'production', PORT: String(port), ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (c: string) => { out += c; });
    child.stderr!.setEncoding('utf8').on('data', (c: string) => { out += c; });
    await eventually(() => out.includes('"gateway listening"') || child!.exitCode !== null, 30_000);
    expect(child.exitCode, out).toBeNull();
    const m = marker();
    const res = await request(`http://127.0.0.1:${port}`, 'GET', `/api/v1/catalog/${m}`);
    expect(res.status, out).toBe(200);
    expect(upstream.count(m)).toBe(1);
    // The admin API is on (another key is refused, not 404), with the key it was given.
    const adminAs = (key: string) => request(`http://127.0.0.1:${adminPort}`, 'GET', '/admin/v1/users/1', { headers: { authorization: `Bearer ${key}` } });
    expect((await adminAs('not-the-key-but-long-enough-to-be-one-0000')).json).toEqual({ error: 'Clé d’administration invalide' });
    expect((await adminAs(passed.GATEWAY_ADMIN_KEY!)).status).not.toBe(401);
  });
});
