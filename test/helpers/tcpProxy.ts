// A TCP proxy in front of a dependency (Postgres, Redis), so a test can take it away and give it
// back: cut it as a stopped server is, or blackhole it as a partition does. Real sockets only: a
// stub would hide exactly the failure being tested.
import net from 'node:net';
import { testServices } from './gateway.js';

export interface TcpProxy {
  port: number;
  /** Refuses new connections and resets the open ones, as a stopped server does. */
  cut(): Promise<void>;
  /** Accepts again, on the same port. */
  restore(): Promise<void>;
  /**
   * Stops moving bytes either way, new connections included, without closing anything: a
   * firewall dropping packets, a partition, a hung server. Nothing is lost, as with TCP.
   */
  blackhole(): void;
  /** Moves the held bytes and the new ones again. */
  forward(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const sockets = new Set<net.Socket>();
  const pairs = new Set<[net.Socket, net.Socket]>();
  let holding = false;
  let server: net.Server | undefined;
  let port = 0;
  const join = ([client, upstream]: [net.Socket, net.Socket]) => { client.pipe(upstream).pipe(client); };
  const listen = async () => {
    const s = net.createServer((client) => {
      const upstream = net.connect(target.port, target.host);
      const pair: [net.Socket, net.Socket] = [client, upstream];
      sockets.add(client);
      sockets.add(upstream);
      pairs.add(pair);
      const drop = () => { client.destroy(); upstream.destroy(); sockets.delete(client); sockets.delete(upstream); pairs.delete(pair); };
      client.on('error', drop).on('close', drop);
      upstream.on('error', drop).on('close', drop);
      if (holding) client.pause();
      else join(pair);
    });
    await new Promise<void>((resolve, reject) => s.once('error', reject).listen(port, '127.0.0.1', () => resolve()));
    port = (s.address() as net.AddressInfo).port;
    server = s;
  };
  const cut = async () => {
    const s = server;
    server = undefined;
    for (const socket of sockets) socket.destroy();
    sockets.clear();
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
  };
  // Unpiped and paused, a socket is no longer read: its bytes wait in the kernel buffers.
  const blackhole = () => {
    holding = true;
    for (const [client, upstream] of pairs) {
      client.unpipe(upstream);
      upstream.unpipe(client);
      client.pause();
      upstream.pause();
    }
  };
  const forward = () => {
    holding = false;
    for (const pair of pairs) join(pair);
  };
  await listen();
  return { port, cut, restore: listen, blackhole, forward, close: cut };
}

/** The run's Postgres URL, reached through the proxy. */
export function throughProxy(postgresUrl: string, proxy: TcpProxy): string {
  const url = new URL(postgresUrl);
  url.hostname = '127.0.0.1';
  url.port = String(proxy.port);
  return url.toString();
}

export function postgresTarget(): { host: string; port: number } {
  const url = new URL(testServices!.postgres);
  return { host: url.hostname || '127.0.0.1', port: Number(url.port || 5432) };
}
