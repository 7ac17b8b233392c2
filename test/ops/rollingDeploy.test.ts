// A rolling deploy behind nginx (issue 18, CONTRACT §9). Two gateway processes behind nginx with
// keep-alive connections (the docs' example configuration), and what every load balancer in front
// of a fleet does: it follows /readyz, here a small controller that polls it and reloads nginx with
// the instances that are ready (as the Kubernetes endpoints controller and an ingress do). One
// instance gets SIGTERM under a steady stream of POSTs: it drains for server.shutdownDelay (/readyz
// 503 at once, every answer closing its connection, new connections still served) while the load
// balancer takes it out, so not one POST is lost, and it exits 0.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { closeSql, marker, rawTestConfig } from '../helpers/gateway.js';
import { spawnGateway, type GatewayProcess } from '../helpers/gatewayProcess.js';
import { request } from '../helpers/http.js';
import { sparePort } from '../helpers/ports.js';
import { describeWithProxy, startNginx } from '../helpers/proxies.js';

const EXAMPLE = readFileSync(new URL('../../docs/examples/nginx-upstream.conf', import.meta.url), 'utf8');

/** The example, listening on `port`, with `servers` as its upstream instances. */
function site(port: number, servers: string[]): string {
  const upstream = servers.map((url) => `    server ${new URL(url).host} max_fails=1 fail_timeout=5s;`).join('\n');
  return EXAMPLE
    .replace(/( {4}server 127\.0\.0\.1:808[12] .*\n)+/, `${upstream}\n`)
    .replace('listen 127.0.0.1:8080', `listen 127.0.0.1:${port}`);
}

describeWithProxy('nginx')('a rolling deploy behind nginx', () => {
  let upstream: EchoUpstream;
  let gateways: GatewayProcess[] = [];
  let nginx: Awaited<ReturnType<typeof startNginx>>;
  let port: number;

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    const config = (p: number) => rawTestConfig({
      server: { port: p, shutdownDelay: '2s' },
      upstreams: { app: { url: upstream.url } },
      routes: [{ path: '/orders', upstream: 'app', methods: ['POST'], auth: 'none' }],
    });
    const [p1, p2] = await Promise.all([sparePort(), sparePort()]);
    port = await sparePort();
    gateways = await Promise.all([spawnGateway(config(p1)), spawnGateway(config(p2))]);
    nginx = await startNginx(site(port, gateways.map((gw) => gw.url)), port);
  }, 60_000);

  afterAll(async () => {
    await nginx?.close();
    await Promise.all(gateways.map((gw) => gw.stop()));
    await upstream?.close();
    await closeSql();
  });

  it('loses no POST when an instance is stopped with SIGTERM under load', async () => {
    const [leaving, staying] = gateways as [GatewayProcess, GatewayProcess];
    const front = `http://127.0.0.1:${port}`;
    const m = marker();
    const failures: string[] = [];
    let sent = 0;
    let running = true;

    // The load balancer's controller: every 100 ms, the instances whose /readyz answers 200.
    let ready = gateways.map((gw) => gw.url);
    const controller = (async () => {
      while (running) {
        const now = (await Promise.all(gateways.map(async (gw) => {
          const res = await request(gw.url, 'GET', '/readyz', { freshConnection: true, timeout: 500 }).catch(() => undefined);
          return res?.status === 200 ? [gw.url] : [];
        }))).flat();
        if (now.length && now.join() !== ready.join()) {
          ready = now;
          await nginx.reload(site(port, ready));
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();

    // Eight clients posting one after the other, as fast as answers come back. A connection of
    // their own each time: an nginx reload closes its idle client connections, a race between the
    // client and nginx that says nothing about the gateway (nginx keeps its keep-alive upstream).
    const client = async (c: number) => {
      while (running) {
        const n = sent++;
        try {
          const res = await request(front, 'POST', `/orders/${m}/${c}-${n}`, { json: { n }, freshConnection: true });
          if (res.status !== 200) failures.push(`${n}: ${res.status} ${res.text}`);
        } catch (err) {
          failures.push(`${n}: ${(err as Error).message}`);
        }
      }
    };
    const clients = Array.from({ length: 8 }, (_, c) => client(c));
    await new Promise((resolve) => setTimeout(resolve, 1000));
    leaving.child.kill('SIGTERM');
    await leaving.waitForLog((l) => l.msg === 'draining: /readyz answers 503, responses close their connections');
    expect((await request(leaving.url, 'GET', '/readyz', { freshConnection: true })).status).toBe(503);
    expect(await leaving.exited).toEqual({ code: 0, signal: null });
    expect(ready).toEqual([staying.url]);
    await new Promise((resolve) => setTimeout(resolve, 500));
    running = false;
    await Promise.all([...clients, controller]);

    expect(failures).toEqual([]);
    expect(sent).toBeGreaterThan(100);
    expect(upstream.count(m)).toBe(sent);
  });
});
