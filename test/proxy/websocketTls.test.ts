// WebSockets end to end over TLS on both hops (wss:// to the HTTPS listener with HTTP/2 on, wss://
// to an upstream that demands a client certificate), and SIGTERM on the built CLI closing open
// sockets with 1001 once server.shutdownDelay has passed, before the process exits.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { makePki, type Pki } from '../helpers/certs.js';
import {
  bearer, closeSql, describeWithServices, makeUser, marker, rawTestConfig, startTestGateway, testConfig, type TestGateway,
} from '../helpers/gateway.js';
import { spawnGateway } from '../helpers/gatewayProcess.js';
import { opened, startWsUpstream, wsConnect, type WsUpstream } from '../helpers/wsUpstream.js';

describeWithServices('WebSockets over TLS, and at shutdown', () => {
  let pki: Pki;
  let upstream: WsUpstream;
  let gw: TestGateway;

  beforeAll(async () => {
    pki = makePki('Internal CA');
    const app = pki.issue('app', { cn: 'app.internal', names: ['app.internal'] });
    const client = pki.issue('client', { cn: 'gateway' });
    const listener = pki.issue('listener', { cn: 'gateway', names: ['localhost'] });
    upstream = await startWsUpstream({ tls: { key: app.key, cert: app.cert, ca: pki.ca, requestCert: true, rejectUnauthorized: true } });
    gw = await startTestGateway(testConfig({
      server: { tls: { certFile: listener.certFile, keyFile: listener.keyFile, http2: true } },
      upstreams: { app: { url: upstream.url, tls: { caFile: pki.caFile, certFile: client.certFile, keyFile: client.keyFile, serverName: 'app.internal' } } },
      routes: [{ path: '/stream', upstream: 'app', auth: 'required', websocket: true }],
    }));
  });

  afterAll(async () => {
    await gw?.close();
    await upstream?.close();
    pki?.remove();
    await closeSql();
  });

  it('relays wss:// from the HTTPS listener to a wss:// upstream that demands the gateway\'s client certificate', async () => {
    const user = await makeUser(gw);
    const m = marker();
    const url = `wss://localhost:${new URL(gw.url).port}/stream/${m}`;
    const socket = opened(await wsConnect(`${url}?access_token=${user.access}`, { ca: pki.ca }));
    socket.ws.send('over tls');
    expect(await socket.next()).toBe('echo:over tls');
    const seen = upstream.last(m)!;
    expect(seen.clientCn).toBe('gateway');
    expect(seen.headers['x-user-id']).toBe(String(user.id));
    expect(seen.headers['x-forwarded-proto']).toBe('https');
    expect(seen.url).toBe(`/stream/${m}`);
    socket.ws.close();
  });

  it('SIGTERM: open sockets keep working through server.shutdownDelay, then are closed with 1001, and the process exits 0', async () => {
    const plain = await startWsUpstream();
    const cli = await spawnGateway(rawTestConfig({
      server: { shutdownDelay: '1s' },
      upstreams: { app: { url: plain.url } },
      routes: [{ path: '/stream', upstream: 'app', auth: 'required', websocket: true }],
    }));
    try {
      const user = await makeUser(gw);
      const socket = opened(await wsConnect(`${cli.url.replace('http', 'ws')}/stream/${marker()}`, { headers: bearer(user.access) }));
      socket.ws.send('before');
      expect(await socket.next()).toBe('echo:before');
      cli.child.kill('SIGTERM');
      await cli.waitForLog((l) => l.msg?.startsWith('draining'));
      // A load balancer is moving its clients away: the sockets open meanwhile stay usable.
      socket.ws.send('while draining');
      expect(await socket.next()).toBe('echo:while draining');
      expect((await socket.closed).code).toBe(1001);
      expect(await cli.exited).toEqual({ code: 0, signal: null });
    } finally {
      await cli.stop();
      await plain.close();
    }
  });
});
