// A real upstream for proxy tests: echoes what it received and counts hits per path marker.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Hit {
  method: string;
  url: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  rawHeaders: string[];
  body: string;
}

export interface EchoUpstream {
  url: string;
  port: number;
  hits: Hit[];
  count(marker: string): number;
  last(marker: string): Hit | undefined;
  /** TCP connections the upstream has accepted since it started (pooled keep-alive shows as few). */
  readonly connections: number;
  /** Per-path behaviour: return true when the handler answered itself. */
  handle?: (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) => boolean | void;
  close(): Promise<void>;
}

export async function startEchoUpstream(): Promise<EchoUpstream> {
  const hits: Hit[] = [];
  const sockets = new Set<import('node:net').Socket>();
  let connections = 0;
  const upstream: EchoUpstream = {
    url: '', port: 0, hits,
    get connections() { return connections; },
    count: (m) => hits.filter((h) => h.path.includes(m)).length,
    last: (m) => hits.filter((h) => h.path.includes(m)).at(-1),
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const url = req.url ?? '/';
      const path = url.split('?')[0]!;
      hits.push({ method: req.method ?? '', url, path, headers: req.headers, rawHeaders: req.rawHeaders, body: body.toString('utf8') });
      if (upstream.handle?.(req, res, body)) return;
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'x-upstream': 'echo' });
      res.end(JSON.stringify({ method: req.method, url, path, headers: req.headers, body: body.toString('utf8'), bodyLength: body.length }));
    });
  });
  server.on('connection', (s) => {
    connections++;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  upstream.port = (server.address() as AddressInfo).port;
  upstream.url = `http://127.0.0.1:${upstream.port}`;
  return upstream;
}
