// Ports on the loopback for what cannot listen on port 0 itself, and one that always refuses.
import net from 'node:net';

// Spare ports come from below the kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768–60999
// here): a port freed there is soon handed to another file's listener on port 0, or to an outgoing
// connection as its source port, and the process that was to listen on it fails with EADDRINUSE (or
// an upstream meant to be down answers). The kernel never picks these on its own; another file
// picking the same one at random within a second is unlikely, and each is checked free first.
const SPARE_LOW = 20_000;
const SPARE_HIGH = 32_000;

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** A port nobody listens on right now (for listeners that cannot take port 0, like a redis-server). */
export async function sparePort(): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = SPARE_LOW + Math.floor(Math.random() * (SPARE_HIGH - SPARE_LOW));
    if (await canListen(port)) return port;
  }
  throw new Error(`no spare port between ${SPARE_LOW} and ${SPARE_HIGH} on 127.0.0.1 after 100 tries`);
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
