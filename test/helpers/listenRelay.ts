// A TCP relay to the run's Postgres that can misbehave toward the connections that issued LISTEN
// only, the way a network can without the client noticing: hold their bytes back with the socket
// left open (a partition, a failover), or deliver everything, in order, but late.
import net from 'node:net';
import { testServices } from './gateway.js';

export interface ListenRelay {
  url: string;
  /** Hold back what the LISTEN connections receive until thaw(). */
  freeze(): void;
  thaw(): void;
  /** Deliver what the LISTEN connections receive this much later, in order (0: on time again). */
  lag(ms: number): void;
  close(): Promise<void>;
}

export async function startListenRelay(): Promise<ListenRelay> {
  const target = new URL(testServices!.postgres);
  const sockets = new Set<net.Socket>();
  const thawers = new Set<() => void>();
  let frozen = false;
  let lagMs = 0;
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 5432), target.hostname || '127.0.0.1');
    sockets.add(client).add(upstream);
    let listener = false;
    let held: Buffer[] = [];
    let due = 0; // when the last delayed chunk goes out: later ones never overtake it
    const flush = () => { for (const chunk of held) client.write(chunk); held = []; };
    thawers.add(flush);
    const drop = () => { client.destroy(); upstream.destroy(); thawers.delete(flush); };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.on('data', (chunk: Buffer) => {
      if (chunk.includes('LISTEN ')) listener = true;
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (!listener) { client.write(chunk); return; }
      if (frozen) { held.push(chunk); return; }
      const now = Date.now();
      if (lagMs === 0 && due <= now) { client.write(chunk); return; }
      due = Math.max(now + lagMs, due);
      setTimeout(() => { if (!client.destroyed) client.write(chunk); }, due - now);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(testServices!.postgres);
  url.hostname = '127.0.0.1';
  url.port = String((server.address() as net.AddressInfo).port);
  return {
    url: url.toString(),
    freeze: () => { frozen = true; },
    thaw: () => { frozen = false; for (const flush of thawers) flush(); },
    lag: (ms) => { lagMs = ms; },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
