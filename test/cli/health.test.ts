// `gateway health`: the Docker HEALTHCHECK. It reads the configuration as `start` does (file,
// GATEWAY_CONFIG or ./gateway.yaml, then PORT and HOST) and asks GET /healthz on that port.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ensureBuilt, gateway } from '../helpers/cli.js';
import { closeSql, describeWithServices, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';
import { refusedPort, sparePort } from '../helpers/ports.js';

describeWithServices('gateway health', () => {
  let dir: string;
  let gw: TestGateway;
  let port: number;
  const servers: http.Server[] = [];

  /** A config file whose server section is `server` (the rest does not matter to `health`). */
  const config = (name: string, server: string) => {
    const file = path.join(dir, name);
    writeFileSync(file, `server: ${server}\n`);
    return file;
  };

  /** A listener on 127.0.0.1 that answers every request with `handle`. */
  const listener = async (handle: http.RequestListener) => {
    const server = http.createServer(handle);
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return (server.address() as AddressInfo).port;
  };

  beforeAll(async () => {
    ensureBuilt();
    dir = mkdtempSync(path.join(tmpdir(), 'gw-health-'));
    gw = await startTestGateway(testConfig());
    port = Number(new URL(gw.url).port);
  }, 120_000);
  afterAll(async () => {
    for (const server of servers) server.closeAllConnections();
    await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
    await gw?.close();
    rmSync(dir, { recursive: true, force: true });
    await closeSql();
  });

  it('exit 0 when the configured port answers 200; a host of 0.0.0.0 is asked on 127.0.0.1', async () => {
    const run = await gateway(['health', '--config', config('up.yaml', `{ host: 0.0.0.0, port: ${port} }`)]);
    expect(run).toEqual({ code: 0, stdout: `healthy: GET http://127.0.0.1:${port}/healthz answered 200\n`, stderr: '' });
  });

  it('finds the configuration as start does: ./gateway.yaml, GATEWAY_CONFIG, and PORT over the file', async () => {
    const elsewhere = await sparePort();
    const own = mkdtempSync(path.join(dir, 'cwd-'));
    writeFileSync(path.join(own, 'gateway.yaml'), `server: { host: 127.0.0.1, port: ${port} }\n`);
    const [fromCwd, fromEnv, fromPort] = await Promise.all([
      gateway(['health'], { cwd: own }),
      gateway(['health'], { env: { GATEWAY_CONFIG: config('env.yaml', `{ port: ${port} }`) } }),
      gateway(['health', '--config', config('overridden.yaml', `{ port: ${elsewhere} }`)], { env: { PORT: String(port) } }),
    ]);
    for (const run of [fromCwd, fromEnv, fromPort]) expect(run).toEqual({ code: 0, stdout: `healthy: GET http://127.0.0.1:${port}/healthz answered 200\n`, stderr: '' });
  });

  it('exit 1, saying why, when nothing listens, when /healthz is not 200, when it does not answer in time', async () => {
    const closed = await refusedPort();
    const failing = await listener((_req, res) => { res.statusCode = 503; res.end(); });
    const silent = await listener(() => { /* never answers */ });
    const [refused, unhealthy, hanging] = await Promise.all([closed, failing, silent].map((p, i) => gateway(['health', '--config', config(`down-${i}.yaml`, `{ host: 127.0.0.1, port: ${p} }`)])));
    expect(refused).toEqual({ code: 1, stdout: '', stderr: `gateway: unhealthy: GET http://127.0.0.1:${closed}/healthz: ECONNREFUSED\n` });
    expect(unhealthy).toEqual({ code: 1, stdout: '', stderr: `gateway: unhealthy: GET http://127.0.0.1:${failing}/healthz answered 503\n` });
    expect(hanging).toEqual({ code: 1, stdout: '', stderr: `gateway: unhealthy: GET http://127.0.0.1:${silent}/healthz: no answer within 2000 ms\n` });
  });
});
