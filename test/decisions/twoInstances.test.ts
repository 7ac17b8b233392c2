// The two-instance recipe of docs/decisions.md, run as written (issue 27: the second instance failed
// with the doc's own YAML, on the same ./data, another secret and admin port 9090 taken): its
// commands with the built CLI in real processes, only the example ports changed. Both instances
// serve, share one database and one signing secret: a token one signed passes the other's decisions.
import { execSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CLI, ensureBuilt } from '../helpers/cli.js';
import { docsBlock, docsExample } from '../helpers/docs.js';
import { bearer, closeSql, describeWithServices, eventually, newEmail, newPassword, testServices } from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { sparePort } from '../helpers/ports.js';

interface Started { child: ChildProcess; lines: Array<Record<string, unknown>>; stderr: string }

describeWithServices('docs/decisions.md: two instances on one host', () => {
  let dir: string;
  const started: Started[] = [];
  const ports = new Map<number, number>();

  beforeAll(async () => {
    ensureBuilt();
    dir = mkdtempSync(path.join(tmpdir(), 'gw-two-'));
    writeFileSync(path.join(dir, 'decisions.yaml'), docsExample('decisions', 'decisions'));
    for (const port of [8080, 8081, 9191, 9192, 9090, 9091]) ports.set(port, await sparePort());
  });
  afterAll(async () => {
    await Promise.all(started.map(({ child }) => new Promise((resolve) => { if (child.exitCode !== null) return resolve(null); child.once('exit', resolve); child.kill('SIGTERM'); })));
    if (dir) rmSync(dir, { recursive: true, force: true });
    await closeSql();
  });

  /** VAR=value words before `npx gateway start …`, the example ports mapped to spare ones. */
  function envOf(line: string): Record<string, string> {
    const env: Record<string, string> = {};
    for (const [, name, value] of line.matchAll(/(?:^|\s)([A-Z_]+)=(\S+)(?=\s)/g)) env[name!] = value!;
    const map = (name: string, example: number) => String(ports.get(Number(env[name] ?? example))!);
    return { ...env, PORT: map('PORT', 8080), DECISIONS_PORT: map('DECISIONS_PORT', 9191), ADMIN_PORT: map('ADMIN_PORT', 9090) };
  }

  it('starts both with the doc\'s commands: one database, one secret, a port each', async () => {
    const [exported, ...commands] = docsBlock('decisions', 'two-instances').split('\n').filter((l) => l.trim());
    // The secret as the doc makes it; the database is the test run's (the doc's host is an example).
    const secretCommand = /JWT_SECRET="\$\((.+)\)"/.exec(exported!)![1]!;
    const shared = { DATABASE_URL: testServices!.postgres, JWT_SECRET: execSync(secretCommand, { encoding: 'utf8' }).trim() };
    expect(exported).toMatch(/^export DATABASE_URL=\S+ JWT_SECRET=/);
    expect(commands).toHaveLength(2);
    for (const command of commands) {
      expect(command).toMatch(/npx gateway start --config decisions\.yaml &/);
      const child = spawn(process.execPath, [CLI, 'start', '--config', 'decisions.yaml'], {
        cwd: dir, env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'info', ...shared, ...envOf(command) }, stdio: ['ignore', 'pipe', 'pipe'],
      });
      const run: Started = { child, lines: [], stderr: '' };
      child.stdout!.setEncoding('utf8').on('data', (chunk: string) => { for (const l of chunk.split('\n').filter(Boolean)) run.lines.push(JSON.parse(l) as Record<string, unknown>); });
      child.stderr!.setEncoding('utf8').on('data', (chunk: string) => { run.stderr += chunk; });
      started.push(run);
    }
    await eventually(() => started.every((s) => s.lines.some((l) => l.msg === 'gateway listening') || s.child.exitCode !== null), 30_000);
    for (const s of started) expect(s.child.exitCode, `${JSON.stringify(s.lines.slice(-3))} ${s.stderr}`).toBeNull();
    expect(started.flatMap((s) => s.lines).filter((l) => (l.level as number) >= 50)).toEqual([]);

    const [a, b] = [ports.get(8080)!, ports.get(8081)!].map((p) => `http://127.0.0.1:${p}`);
    const email = newEmail('two');
    const password = newPassword();
    expect((await request(a!, 'POST', '/api/v1/auth/register', { json: { email, password } })).status).toBe(201);
    const login = await request(b!, 'POST', '/api/v1/auth/login', { json: { email, password } });
    expect(login.status).toBe(200);
    // A token signed by the second instance, decided by the first: accepted (a free user on a premium route).
    const decided = await request(`http://127.0.0.1:${ports.get(9191)}`, 'GET', '/decisions/api/v1/reports/x', { headers: bearer(login.json.access_token) });
    expect(decided.status).toBe(403);
    expect(decided.json).toMatchObject({ error: 'Plan insuffisant', current_plan: 'free' });
    for (const admin of [9090, 9091]) expect((await request(`http://127.0.0.1:${ports.get(admin)}`, 'GET', '/healthz')).status).toBe(200);
  });
});
