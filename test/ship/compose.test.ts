// deploy/compose.yaml as an operator runs it (CONTRACT §25): copied with what the image is built
// from into an empty directory, brought up by podman-compose (the gateway, Postgres, Redis and the
// stand-in application, on stand-in images tagged as the official ones), then a user registers,
// logs in and gets a guarded 200 through the gateway. docs/production.md's Podman blocks are run
// as printed (CONTRACT §28: its containers.conf, its up, its clean-up), with the project's name,
// port and image tag of the test's own; the clean-up leaves no container, volume or network.
// Closest equivalents: the gateway's image is the one the image test builds from the same
// Dockerfile (same inputs, same tag: built once), tagged under the name the block's
// `podman build` gives, and the base images are not removed (the other container tests use them):
// the test checks that line names exactly the images the compose file and the Dockerfile use.
import { randomBytes } from 'node:crypto';
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.js';
import { IMAGE_INPUTS, describeWithPodman, gatewayImage, mustRun, podman, run } from '../helpers/containers.js';
import { docsBlock } from '../helpers/docs.js';
import { eventually, newEmail, newPassword } from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { sparePort } from '../helpers/ports.js';

const project = `gwcompose${randomBytes(4).toString('hex')}`;
const dir = mkdtempSync(path.join(tmpdir(), 'gw-compose-'));
let env: NodeJS.ProcessEnv;
let base: string;
let gatewayTag: string;

/** A docs/production.md block with the project's name of the test's own (it names the network and the image too). */
const printed = (name: string) => docsBlock('production', name).replaceAll('auth-gateway', project);
const BUILD = `podman build --format docker --layers=false -t ${project}:latest .   # the build stage is not kept`;
const BASES = 'podman rmi node:26-bookworm-slim postgres:15-bookworm redis:7-bookworm   # the base images';
/** Runs shell lines as a terminal would (stopping at the first failure), after the containers.conf block (its export). */
const shell = (script: string) => mustRun('bash', ['-e', '-o', 'pipefail', '-c', `${printed('podman-containers-conf')}\n${script}`], { cwd: dir, env });

describeWithPodman('the compose test', ['podman-compose'])('deploy/compose.yaml', () => {
  beforeAll(async () => {
    const { tag } = await gatewayImage();
    for (const input of [...IMAGE_INPUTS, 'deploy/compose.yaml']) cpSync(path.join(ROOT, input), path.join(dir, input), { recursive: true });
    const port = await sparePort();
    base = `http://127.0.0.1:${port}`;
    gatewayTag = tag;
    // The image compose runs: the block's build's tag with the project's name (the file's default is auth-gateway:latest, the printed tag).
    env = { GATEWAY_PUBLISH: `127.0.0.1:${port}`, GATEWAY_IMAGE: `${project}:latest` };
    const up = printed('compose-podman');
    expect(up.split('\n')[0]).toBe(BUILD);
    expect(readFileSync(path.join(ROOT, 'deploy/compose.yaml'), 'utf8')).toContain('image: ${GATEWAY_IMAGE:-auth-gateway:latest}');
    const started = Date.now();
    await shell(up.replace(BUILD, `podman tag ${tag} ${project}:latest`));
    // The gateway waits for Postgres (storage.startTimeout), which initialises its volume first.
    await eventually(async () => (await request(base, 'GET', '/readyz').catch(() => null))?.status === 200, 90_000, 250);
    console.log(`[compose] ready ${Math.round((Date.now() - started) / 1000)} s after podman-compose up`);
  }, 900_000);

  afterAll(async () => {
    // Whatever an earlier failure left: nothing of the project stays on the machine.
    await run('podman-compose', ['-p', project, '-f', 'deploy/compose.yaml', 'down', '-v'], { cwd: dir, env });
    await run('podman', ['network', 'rm', `${project}_default`]);
    await run('podman', ['rmi', `${project}:latest`]);
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

  it('the documented clean-up leaves no container, volume, network or image of the project', async () => {
    const down = printed('compose-podman-down').trimEnd().split('\n');
    // The base images' line names the images the compose file and the Dockerfile use, no more.
    expect(down.at(-1)).toBe(BASES);
    const used = [...readFileSync(path.join(ROOT, 'deploy/compose.yaml'), 'utf8').matchAll(/^ {4}image: ([\w.:-]+)$/gm), ...readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8').matchAll(/^FROM ([\w.:-]+)/gm)]
      .map((match) => match[1]);
    expect([...new Set(used)].sort()).toEqual(BASES.split('#')[0]!.trim().split(' ').slice(2).sort());
    const started = Date.now();
    await shell(down.slice(0, -1).join('\n'));
    console.log(`[compose] documented clean-up in ${Math.round((Date.now() - started) / 1000)} s`);
    expect(await podman('ps', '-a', '--filter', `label=io.podman.compose.project=${project}`, '--format', '{{.Names}}')).toBe('');
    expect(await podman('volume', 'ls', '--format', '{{.Name}}')).not.toContain(project);
    expect(await podman('network', 'ls', '--format', '{{.Name}}')).not.toContain(project);
    expect(await podman('images', '--format', '{{.Repository}}')).not.toContain(project);
    // The image the tests share is still there (the block removed the project's tag only).
    expect((await run('podman', ['image', 'exists', gatewayTag])).status).toBe(0);
  }, 120_000);
});
