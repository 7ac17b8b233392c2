// Ports on the loopback for what cannot listen on port 0 itself, and one that always refuses.
import net from 'node:net';

/** A port nobody listens on right now (for listeners that cannot take port 0, like a redis-server). */
export async function sparePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * A loopback port that refuses every connection for the whole run (for an upstream or a server
 * that is down). Not a spare port: a port freed in the ephemeral range is soon taken by another
 * file's listener, which may hold the connection instead of refusing it, and a connection to it
 * can even pick it as its own source port and connect to itself. Port 1 is below that range and
 * nothing here listens on it; checked once, so a machine where something does fails loudly.
 */
export async function refusedPort(): Promise<number> {
  const port = 1;
  const outcome = await new Promise<string>((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => { socket.destroy(); resolve('connected'); });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
  if (outcome !== 'ECONNREFUSED') throw new Error(`127.0.0.1:${port} was expected to refuse connections: ${outcome}`);
  return port;
}
