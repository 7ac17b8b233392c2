// The gateway's image (CONTRACT §25): the Dockerfile as it is, built with Podman on the stand-in
// base, run as an operator would: read-only root, data and temp on their own mounts. A user sees
// a non-root process, /healthz, a guarded route refusing without a token and proxying with one,
// a working HEALTHCHECK, and SIGTERM draining (/readyz 503 "draining") then exit 0.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeWithPodman, gatewayImage, podman, run } from '../helpers/containers.js';
import { docsBlock } from '../helpers/docs.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { guardedThenServed } from '../helpers/firstRequests.js';
import { eventually } from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { sparePort } from '../helpers/ports.js';

const name = `gw-image-${randomBytes(4).toString('hex')}`;

/** The flags of the `docker run` of docs/production.md's image-run block, but its name and published port, with `replace`'s values. */
function docsRunFlags(replace: Record<string, string>): string[] {
  const command = docsBlock('production', 'image-run').replace(/\\\n/g, ' ').split('\n').find((line) => line.startsWith('docker run '))!;
  const words = command.replace(/\s+#.*$/, '').split(/\s+/).slice(2, -1);
  const flags: string[] = [];
  for (let i = 0; i < words.length; i++) {
    if (words[i] === '--name' || words[i] === '-p') i++;
    else flags.push(Object.entries(replace).reduce((word, [from, to]) => word.replace(from, to), words[i]!));
  }
  expect(flags).toEqual(expect.arrayContaining(['-d', '--read-only', '--tmpfs', '/tmp', '-v', `${name}:/app/data`]));
  return flags;
}

let upstream: EchoUpstream;
let base: string;

describeWithPodman('the image tests')('the container image', () => {
  beforeAll(async () => {
    const { tag, built } = await gatewayImage();
    console.log(`[image] ${built ?? `${tag}: already built`}`);
    upstream = await startEchoUpstream();
    const [port, adminPort] = [await sparePort(), await sparePort()];
    base = `http://127.0.0.1:${port}`;
    // docs/production.md's flags, on the host's network (the upstream on the host's loopback is the
    // container's, and ports are the test's own): only the names, ports and addresses change.
    await podman('run', '--name', name, '--network', 'host', '-e', `PORT=${port}`, '-e', `ADMIN_PORT=${adminPort}`,
      ...docsRunFlags({ 'gateway-data:': `${name}:`, 'http://app.internal:3000': upstream.url }), tag);
    const started = Date.now();
    await eventually(async () => (await request(base, 'GET', '/healthz').catch(() => null))?.status === 200, 60_000, 250);
    console.log(`[image] answering /healthz ${Math.round((Date.now() - started) / 1000)} s after podman run`);
  }, 900_000);

  afterAll(async () => {
    await run('podman', ['rm', '-f', '-t', '0', name]);
    await run('podman', ['volume', 'rm', '-f', name]);
    await upstream?.close();
  });

  it('runs as the node user (uid 1000) on a read-only root, writing only to its data volume', async () => {
    expect((await podman('exec', name, 'id', '-u')).trim()).toBe('1000');
    const write = await run('podman', ['exec', name, 'touch', '/app/dist/x']);
    expect(write.status).not.toBe(0);
    expect(write.stderr).toContain('Read-only file system');
    expect((await podman('exec', name, 'ls', '/app/data')).trim()).not.toBe('');
  });

  it('answers /healthz, refuses a guarded route without a token and proxies it after register and login', async () => {
    expect((await request(base, 'GET', '/healthz')).status).toBe(200);
    await guardedThenServed(base, upstream);
  });

  it('has a HEALTHCHECK that passes', async () => {
    expect(await podman('inspect', '--format', '{{json .Config.Healthcheck.Test}}', name)).toContain('dist/cli.js","health"');
    const check = await run('podman', ['--runtime', 'runc', 'healthcheck', 'run', name]);
    expect(check.status, check.stderr).toBe(0);
    expect(await podman('exec', name, 'node', 'dist/cli.js', 'health')).toContain('answered 200');
  });

  it('drains on SIGTERM (/readyz 503 "draining"), then exits 0', async () => {
    await podman('kill', '--signal', 'TERM', name);
    await eventually(async () => (await request(base, 'GET', '/readyz', { freshConnection: true }).catch(() => null))?.json?.status === 'draining', 5000, 50);
    expect((await podman('wait', name)).trim()).toBe('0');
    expect(await podman('logs', name)).toContain('"msg":"shut down"');
  }, 60_000);
});
