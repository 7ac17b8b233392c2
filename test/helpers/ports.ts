// Ports on the loopback for what cannot listen on port 0 itself.
import net from 'node:net';

/** A port nobody listens on right now (for an upstream that refuses connections, or listeners that cannot take port 0, like a redis-server). */
export async function sparePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

