// Real upstreams for proxy tests: one that echoes what it received and counts hits per path marker,
// and the same that holds requests until the test lets them go (in-flight requests on reload and
// shutdown, slow upstreams).
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';

export interface Hit {
  method: string;
  url: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  rawHeaders: string[];
  body: string;
  /** Over HTTPS with a client certificate: its subject's CN. */
  clientCn?: string;
}

export interface EchoUpstream {
  url: string;
  port: number;
  hits: Hit[];
  count(marker: string): number;
  last(marker: string): Hit | undefined;
  /** TCP connections the upstream has accepted since it started (pooled keep-alive shows as few). */
  readonly connections: number;
  /** Cuts every open connection (the gateway's pooled ones among them); keeps listening. */
  dropConnections(): void;
  /** Per-path behaviour: return true when the handler answered itself. */
  handle?: (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) => boolean | void;
  close(): Promise<void>;
}

/** With `tls`, an HTTPS upstream (its options: key, cert, and requestCert/ca to demand a client certificate). */
export async function startEchoUpstream(options: { tls?: https.ServerOptions } = {}): Promise<EchoUpstream> {
  const hits: Hit[] = [];
  const sockets = new Set<import('node:net').Socket>();
  let connections = 0;
  const upstream: EchoUpstream = {
    url: '', port: 0, hits,
    get connections() { return connections; },
    count: (m) => hits.filter((h) => h.path.includes(m)).length,
    last: (m) => hits.filter((h) => h.path.includes(m)).at(-1),
    dropConnections: () => { for (const s of sockets) s.destroy(); },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const url = req.url ?? '/';
      const path = url.split('?')[0]!;
      const peer = options.tls ? (req.socket as TLSSocket).getPeerCertificate() : undefined;
      hits.push({ method: req.method ?? '', url, path, headers: req.headers, rawHeaders: req.rawHeaders, body: body.toString('utf8'), clientCn: peer?.subject ? String(peer.subject.CN) : undefined });
      if (upstream.handle?.(req, res, body)) return;
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'x-upstream': 'echo' });
      res.end(JSON.stringify({ method: req.method, url, path, headers: req.headers, body: body.toString('utf8'), bodyLength: body.length }));
    });
  };
  const server = options.tls ? https.createServer(options.tls, handler) : http.createServer(handler);
  server.on('connection', (s: import('node:net').Socket) => {
    connections++;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  upstream.port = (server.address() as AddressInfo).port;
  upstream.url = `${options.tls ? 'https' : 'http'}://127.0.0.1:${upstream.port}`;
  return upstream;
}

/** An echo upstream that holds requests whose path contains a marker until the test releases them. */
export interface HoldingUpstream extends EchoUpstream {
  /** Requests with this marker in their path wait; release() answers them normally. */
  hold(marker: string): { held(): number; release(): void };
}

export async function startHoldingUpstream(): Promise<HoldingUpstream> {
  const upstream = await startEchoUpstream() as HoldingUpstream;
  const holds = new Map<string, { waiting: Array<() => void>; released: boolean }>();
  upstream.handle = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const path = (req.url ?? '').split('?')[0]!;
    for (const [marker, hold] of holds) {
      if (!path.includes(marker) || hold.released) continue;
      hold.waiting.push(() => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ released: marker, path }));
      });
      return true;
    }
    return false;
  };
  upstream.hold = (marker) => {
    const hold = { waiting: [] as Array<() => void>, released: false };
    holds.set(marker, hold);
    return {
      held: () => hold.waiting.length,
      release: () => { hold.released = true; for (const answer of hold.waiting.splice(0)) answer(); },
    };
  };
  return upstream;
}
