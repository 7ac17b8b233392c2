// deploy/compose.yaml as an operator runs it (CONTRACT §25): copied with what the image is built
// from into an empty directory, brought up by podman-compose (the gateway, Postgres, Redis and the
// stand-in application, on stand-in images tagged as the official ones), then a user registers,
// logs in and gets a guarded 200 through the gateway; `down -v` leaves no container or volume.
// The gateway's image is the one the image test builds (same inputs, same tag): built once.
import { randomBytes } from 'node:crypto';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.js';
import { IMAGE_INPUTS, describeWithPodman, gatewayImage, mustRun, podman, run } from '../helpers/containers.js';
import { eventually, newEmail, newPassword } from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { sparePort } from '../helpers/ports.js';

const project = `gwcompose${randomBytes(4).toString('hex')}`;
const dir = mkdtempSync(path.join(tmpdir(), 'gw-compose-'));
let env: NodeJS.ProcessEnv;
let base: string;
const compose = (...args: string[]) => mustRun('podman-compose', ['-p', project, '-f', 'deploy/compose.yaml', ...args], { cwd: dir, env });

describeWithPodman('the compose test', ['podman-compose'])('deploy/compose.yaml', () => {
  beforeAll(async () => {
    const { tag } = await gatewayImage();
    for (const input of [...IMAGE_INPUTS, 'deploy/compose.yaml']) cpSync(path.join(ROOT, input), path.join(dir, input), { recursive: true });
    const port = await sparePort();
    base = `http://127.0.0.1:${port}`;
    env = { GATEWAY_IMAGE: tag, GATEWAY_PUBLISH: `127.0.0.1:${port}`, POSTGRES_PASSWORD: randomBytes(12).toString('hex') };
    const started = Date.now();
    await compose('up', '-d');
    // The gateway waits for Postgres (storage.startTimeout), which initialises its volume first.
    await eventually(async () => (await request(base, 'GET', '/readyz').catch(() => null))?.status === 200, 90_000, 250);
    console.log(`[compose] ready ${Math.round((Date.now() - started) / 1000)} s after podman-compose up`);
  }, 900_000);

  afterAll(async () => {
    await run('podman-compose', ['-p', project, '-f', 'deploy/compose.yaml', 'down', '-v'], { cwd: dir, env });
    rmSync(dir, { recursive: true, force: true });
  }, 120_000);

  it('is ready with Postgres and Redis, and every service passes its health check', async () => {
    const ready = await request(base, 'GET', '/readyz');
    expect(ready.json).toEqual({ status: 'ok', checks: { postgres: 'ok', redis: 'ok' } });
    for (const service of ['gateway', 'postgres', 'redis']) {
      await eventually(async () => (await run('podman', ['healthcheck', 'run', `${project}_${service}_1`])).status === 0, 30_000, 500);
      expect((await run('podman', ['healthcheck', 'run', `${project}_${service}_1`])).status, service).toBe(0);
    }
  }, 90_000);

  it('gives a guarded 200 after register and login, and 401 without a token', async () => {
    expect((await request(base, 'GET', '/api/v1/races')).status).toBe(401);
    const [email, password] = [newEmail(), newPassword()];
    const registered = await request(base, 'POST', '/api/v1/auth/register', { json: { email, password } });
    expect(registered.status).toBe(201);
    const login = await request(base, 'POST', '/api/v1/auth/login', { json: { email, password } });
    expect(login.status).toBe(200);
    const guarded = await request(base, 'GET', '/api/v1/races', { headers: { authorization: `Bearer ${login.json.access_token}` } });
    expect(guarded.status).toBe(200);
    expect(guarded.json).toEqual({ path: '/api/v1/races', user: String(registered.json.user_id), plan: 'free' });
  });

  it('down -v removes its containers and volumes', async () => {
    const started = Date.now();
    await compose('down', '-v');
    console.log(`[compose] down -v in ${Math.round((Date.now() - started) / 1000)} s`);
    expect(await podman('ps', '-a', '--filter', `label=io.podman.compose.project=${project}`, '--format', '{{.Names}}')).toBe('');
    expect(await podman('volume', 'ls', '--filter', `name=${project}_`, '--format', '{{.Name}}')).toBe('');
  }, 120_000);
});
